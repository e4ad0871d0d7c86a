package awsapp

import (
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	"github.com/stratusflow/stratus/internal/worker"
)

// Environment variables the Lambda functions read (template.yaml sets them;
// `stratus run --target aws` sets the same from the stack's outputs).
const (
	EnvTable        = "STRATUS_TABLE"         // the store's DynamoDB table (store/dynamodb.TableName)
	EnvBucket       = "STRATUS_BUCKET"        // the data bucket
	EnvBucketPrefix = "STRATUS_BUCKET_PREFIX" // key prefix of everything Stratus stores in it ("stratus/")
	EnvQueueURL     = "STRATUS_DISPATCH_QUEUE_URL"
	EnvSecretID     = "STRATUS_HMAC_SECRET_ID" // name or ARN of the HMAC key secret
	// EnvAPIURL is the worker API's base URL, what workers are told to
	// call (the same variable a worker reads). The worker API function has
	// none: it takes the address its requests arrive at.
	EnvAPIURL         = launch.EnvAPIURL
	EnvCluster        = "STRATUS_ECS_CLUSTER"         // cluster name or ARN
	EnvTaskDefinition = "STRATUS_ECS_TASK_DEFINITION" // family[:revision] or ARN of the runner
	// EnvNetworkTaskDefinition is the runner of nodes with network_access
	// true (template.yaml NetworkRunnerTaskDefinition: its own image,
	// NetworkImageUri); default EnvTaskDefinition.
	EnvNetworkTaskDefinition = "STRATUS_ECS_NETWORK_TASK_DEFINITION"
	// EnvPublisherTaskDefinition is the worker of publish nodes
	// (template.yaml PublisherTaskDefinition: the one container that gets
	// the git token secret); "" = a publish node cannot be launched.
	EnvPublisherTaskDefinition = "STRATUS_ECS_PUBLISHER_TASK_DEFINITION"
	EnvContainer               = "STRATUS_ECS_CONTAINER" // the runner's container name (default "runner")
	EnvSubnets                 = "STRATUS_ECS_SUBNETS"   // comma-separated; nodes without network access
	EnvSecurityGroups          = "STRATUS_ECS_SECURITY_GROUPS"
	EnvNetworkSubnets          = "STRATUS_ECS_NETWORK_SUBNETS" // nodes with network_access true (default: EnvSubnets)
	EnvNetworkSecurityGroups   = "STRATUS_ECS_NETWORK_SECURITY_GROUPS"
	EnvAssignPublicIP          = "STRATUS_ECS_ASSIGN_PUBLIC_IP" // ENABLED | DISABLED (default)
	EnvMaxBodyBytes            = "STRATUS_MAX_BODY_BYTES"       // default DefaultMaxBodyBytes
	EnvMaxUploadBytes          = "STRATUS_MAX_UPLOAD_BYTES"     // default worker.DefaultMaxUploadBytes, at most MaxUploadBytes
	EnvTokenTTLSeconds         = "STRATUS_TOKEN_TTL_SECONDS"    // default captoken.DefaultTTL
	// The warm runner pool (README.md § Warm runners (pool mode);
	// template.yaml RunnerPool=on): the assignment queue of each network
	// profile ("" = that profile's steps go cold, RunTask) and how long
	// dispatch waits for a pooled runner before it falls back to RunTask.
	EnvPoolQueueURL        = "STRATUS_POOL_QUEUE_URL"         // nodes without network_access
	EnvPoolNetworkQueueURL = "STRATUS_POOL_NETWORK_QUEUE_URL" // nodes with network_access
	EnvPoolPickupSeconds   = "STRATUS_POOL_PICKUP_SECONDS"    // default 20 (pool.DefaultPickup), 1 to MaxPoolPickupSeconds
	// The task pool on the stack (README.md § Task pool): the queue that
	// wakes the claim function (the events function sends to it when a run
	// ends; `stratus submit` when it queues a task), how many of the pool's
	// tasks may run at once (template.yaml MaxConcurrentTasks) and the
	// queue selector the claim serves (template.yaml TaskQueue).
	EnvClaimQueueURL      = "STRATUS_CLAIM_QUEUE_URL"
	EnvMaxConcurrentTasks = "STRATUS_MAX_CONCURRENT_TASKS" // default 1, 1 to MaxConcurrentTasks
	EnvTaskQueue          = "STRATUS_TASK_QUEUE"           // default "default"
	// What the claim needs to prepare a run itself, for a task file written
	// straight under tasks/pending/ (README.md § Task pool): the stack's
	// state machines' execution role and name prefix, and its heartbeat
	// window (template.yaml HeartbeatSeconds). With the dispatch queue's URL
	// (EnvQueueURL), which a run's definition names.
	EnvStateMachineRole   = "STRATUS_STATE_MACHINE_ROLE_ARN"
	EnvStateMachinePrefix = "STRATUS_STATE_MACHINE_PREFIX"
	EnvHeartbeatSeconds   = "STRATUS_HEARTBEAT_SECONDS"
)

// Vars lists every variable Config reads, for checks that the template sets
// nothing else.
var Vars = []string{
	EnvTable, EnvBucket, EnvBucketPrefix, EnvQueueURL, EnvSecretID, EnvAPIURL,
	EnvCluster, EnvTaskDefinition, EnvNetworkTaskDefinition, EnvPublisherTaskDefinition, EnvContainer, EnvSubnets, EnvSecurityGroups,
	EnvNetworkSubnets, EnvNetworkSecurityGroups, EnvAssignPublicIP,
	EnvMaxBodyBytes, EnvMaxUploadBytes, EnvTokenTTLSeconds,
	EnvPoolQueueURL, EnvPoolNetworkQueueURL, EnvPoolPickupSeconds,
	EnvClaimQueueURL, EnvMaxConcurrentTasks, EnvTaskQueue, EnvStateMachineRole, EnvStateMachinePrefix, EnvHeartbeatSeconds,
}

// MaxConcurrentTasks bounds STRATUS_MAX_CONCURRENT_TASKS (template.yaml
// MaxConcurrentTasks: its MaxValue).
const MaxConcurrentTasks = 100

// MaxPoolPickupSeconds bounds STRATUS_POOL_PICKUP_SECONDS: dispatch waits
// for a pooled runner inside its invocation, then may RunTask with its
// retries, all within the dispatch function's 120 s timeout
// (template.yaml DispatchFunction).
const MaxPoolPickupSeconds = 90

// DefaultMaxBodyBytes bounds a worker body on AWS: 4 MiB, which API Gateway
// base64-encodes to under Lambda's 6 MB synchronous payload
// (docs/architecture.md § Limits). Larger bodies go through a presigned S3
// upload.
const DefaultMaxBodyBytes = 4 << 20

// MaxUploadBytes is the most STRATUS_MAX_UPLOAD_BYTES may be: the worker
// API function reads an uploaded body into memory (template.yaml gives it
// 512 MB; a submit holds the body, its projection and the store's copy).
const MaxUploadBytes = 64 << 20

// DefaultContainer is the runner's container name in template.yaml.
const DefaultContainer = ecs.DefaultContainer

// Config is what the AWS side of Stratus is told by its environment.
type Config struct {
	Table        string
	Bucket       string
	BucketPrefix string
	QueueURL     string
	SecretID     string
	APIURL       string // "" in the worker API function
	ECS          ECS
	MaxBodyBytes int64
	// MaxUploadBytes bounds a body sent through an upload
	// (docs/security.md § Upload size limits).
	MaxUploadBytes int64
	TokenTTL       time.Duration // 0 = captoken.DefaultTTL
	Pool           Pool
	Tasks          Tasks
}

// Tasks is the stack's task pool (README.md § Task pool).
type Tasks struct {
	ClaimQueueURL string // "" = nothing is woken when a run ends
	MaxConcurrent int    // tasks of the pool running at once; 1 by default
	Queue         string // the queue selector the claim serves; "default" by default
	// StateMachineRole, StateMachinePrefix and HeartbeatSeconds let the
	// claim prepare a run itself ("" and 0: it prepares none).
	StateMachineRole   string
	StateMachinePrefix string
	HeartbeatSeconds   int
}

// Pool is the warm runner pool dispatch sends steps to
// (README.md § Warm runners (pool mode)): a queue per network profile; both
// empty is the cold path alone.
type Pool struct {
	QueueURL        string        // nodes without network_access
	NetworkQueueURL string        // nodes with network_access
	Pickup          time.Duration // 0 = pool.DefaultPickup
}

// ECS is where workers run: the runner's task definition on a cluster, in
// the subnets and security groups of the node's network_access.
type ECS struct {
	Cluster               string
	TaskDefinition        string
	NetworkTaskDefinition string // nodes with network_access; "" = TaskDefinition
	// PublisherTaskDefinition is publish nodes' worker, run on the
	// network profile; "" = none (a publisher launch is refused).
	PublisherTaskDefinition string
	Container               string
	Subnets                 []string
	SecurityGroups          []string
	NetworkSubnets          []string
	NetworkSecurityGroups   []string
	AssignPublicIP          bool
}

// FromEnv reads Config from getenv (os.Getenv). It checks the form of what
// is set (numbers, ENABLED/DISABLED, an http(s) URL); which variables are
// required is New's business, since `stratus run --target aws` needs fewer
// than a function. Errors: EINVALID naming the variable, its value and
// what is valid.
func FromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	c := Config{
		Table:        get(EnvTable),
		Bucket:       get(EnvBucket),
		BucketPrefix: get(EnvBucketPrefix),
		QueueURL:     get(EnvQueueURL),
		SecretID:     get(EnvSecretID),
		APIURL:       strings.TrimRight(get(EnvAPIURL), "/"),
		ECS: ECS{
			Cluster:                 get(EnvCluster),
			TaskDefinition:          get(EnvTaskDefinition),
			NetworkTaskDefinition:   get(EnvNetworkTaskDefinition),
			PublisherTaskDefinition: get(EnvPublisherTaskDefinition),
			Container:               get(EnvContainer),
			Subnets:                 list(get(EnvSubnets)),
			SecurityGroups:          list(get(EnvSecurityGroups)),
			NetworkSubnets:          list(get(EnvNetworkSubnets)),
			NetworkSecurityGroups:   list(get(EnvNetworkSecurityGroups)),
		},
		MaxBodyBytes:   DefaultMaxBodyBytes,
		MaxUploadBytes: worker.DefaultMaxUploadBytes,
		Pool:           Pool{QueueURL: get(EnvPoolQueueURL), NetworkQueueURL: get(EnvPoolNetworkQueueURL)},
	}
	for k, v := range map[string]string{EnvPoolQueueURL: c.Pool.QueueURL, EnvPoolNetworkQueueURL: c.Pool.NetworkQueueURL} {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return c, stratus.FieldErrorf(stratus.EINVALID, k, "%q is not a queue URL; valid: the pool's SQS queue URL (template.yaml PoolQueueUrl or NetworkPoolQueueUrl), or empty for no pool", v)
		}
	}
	c.Tasks = Tasks{ClaimQueueURL: get(EnvClaimQueueURL), MaxConcurrent: 1, Queue: get(EnvTaskQueue),
		StateMachineRole: get(EnvStateMachineRole), StateMachinePrefix: get(EnvStateMachinePrefix)}
	if v := get(EnvHeartbeatSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvHeartbeatSeconds, "%q is not valid; valid: a positive number of seconds (template.yaml HeartbeatSeconds)", v)
		}
		c.Tasks.HeartbeatSeconds = n
	}
	if c.Tasks.ClaimQueueURL != "" && !strings.HasPrefix(c.Tasks.ClaimQueueURL, "https://") && !strings.HasPrefix(c.Tasks.ClaimQueueURL, "http://") {
		return c, stratus.FieldErrorf(stratus.EINVALID, EnvClaimQueueURL, "%q is not a queue URL; valid: the claim queue's SQS URL (template.yaml ClaimQueueUrl), or empty for no task pool", c.Tasks.ClaimQueueURL)
	}
	if c.Tasks.Queue == "" {
		c.Tasks.Queue = "default"
	}
	if v := get(EnvMaxConcurrentTasks); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxConcurrentTasks {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvMaxConcurrentTasks, "%q is not valid; valid: 1 to %d tasks at once (default 1)", v, MaxConcurrentTasks)
		}
		c.Tasks.MaxConcurrent = n
	}
	if v := get(EnvPoolPickupSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPoolPickupSeconds {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvPoolPickupSeconds, "%q is not valid; valid: 1 to %d seconds (default 20)", v, MaxPoolPickupSeconds)
		}
		c.Pool.Pickup = time.Duration(n) * time.Second
	}
	if c.ECS.Container == "" {
		c.ECS.Container = DefaultContainer
	}
	if c.ECS.NetworkTaskDefinition == "" {
		c.ECS.NetworkTaskDefinition = c.ECS.TaskDefinition
	}
	if len(c.ECS.NetworkSubnets) == 0 {
		c.ECS.NetworkSubnets = c.ECS.Subnets
	}
	if len(c.ECS.NetworkSecurityGroups) == 0 {
		c.ECS.NetworkSecurityGroups = c.ECS.SecurityGroups
	}
	switch v := get(EnvAssignPublicIP); v {
	case "", "DISABLED":
	case "ENABLED":
		c.ECS.AssignPublicIP = true
	default:
		return c, stratus.FieldErrorf(stratus.EINVALID, EnvAssignPublicIP, "%q is not valid; valid: ENABLED, DISABLED", v)
	}
	if c.APIURL != "" && !strings.HasPrefix(c.APIURL, "https://") && !strings.HasPrefix(c.APIURL, "http://") {
		return c, stratus.FieldErrorf(stratus.EINVALID, EnvAPIURL, "%q is not an http(s) URL; valid: the worker API's base URL, such as https://ID.execute-api.REGION.amazonaws.com", c.APIURL)
	}
	if v := get(EnvMaxBodyBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvMaxBodyBytes, "%q is not valid; valid: a positive number of bytes (default %d)", v, DefaultMaxBodyBytes)
		}
		c.MaxBodyBytes = n
	}
	if v := get(EnvMaxUploadBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > MaxUploadBytes {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvMaxUploadBytes, "%q is not valid; valid: 1 to %d bytes (default %d)", v, MaxUploadBytes, worker.DefaultMaxUploadBytes)
		}
		c.MaxUploadBytes = n
	}
	if v := get(EnvTokenTTLSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < config.MinTokenTTLSeconds {
			return c, stratus.FieldErrorf(stratus.EINVALID, EnvTokenTTLSeconds, "%q is not valid; valid: %d seconds or more (six times the runner's 20 s heartbeat, which renews a worker's handle)", v, config.MinTokenTTLSeconds)
		}
		c.TokenTTL = time.Duration(n) * time.Second
	}
	return c, nil
}

// list splits a comma-separated list, dropping empty items.
func list(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// require returns EINVALID naming the first variable whose value is empty.
func require(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return stratus.FieldErrorf(stratus.EINVALID, pairs[i], "is not set; template.yaml sets it on every function (see internal/awsapp)")
		}
	}
	return nil
}
