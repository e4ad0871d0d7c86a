package ecs

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	smithytime "github.com/aws/smithy-go/time"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/launch"
)

// MaxOverrideChars is ECS's limit on a RunTask's overrides: 8192
// characters of their JSON, formatting included (RunTask API reference,
// overrides).
const MaxOverrideChars = 8192

// DefaultContainer is the runner's container name when Config.Container
// is empty.
const DefaultContainer = "runner"

// StartedBy is the startedBy of the task of a dispatch task id:
// "stratus-" and 40 hex digits of its SHA-256 (startedBy takes at most
// 128 letters, digits, '-', '/' and '_'; a task id may hold other
// characters). StopTask finds a worker by it.
func StartedBy(taskID string) string {
	sum := sha256.Sum256([]byte(taskID))
	return "stratus-" + hex.EncodeToString(sum[:])[:40]
}

// API is the part of the ECS client the Launcher calls; *ecs.Client
// satisfies it.
type API interface {
	RunTask(ctx context.Context, in *awsecs.RunTaskInput, optFns ...func(*awsecs.Options)) (*awsecs.RunTaskOutput, error)
	StopTask(ctx context.Context, in *awsecs.StopTaskInput, optFns ...func(*awsecs.Options)) (*awsecs.StopTaskOutput, error)
	ListTasks(ctx context.Context, in *awsecs.ListTasksInput, optFns ...func(*awsecs.Options)) (*awsecs.ListTasksOutput, error)
}

var _ API = (*awsecs.Client)(nil)

// NetworkProfile is the awsvpc configuration of one kind of worker.
type NetworkProfile struct {
	Subnets        []string // subnet ids; at least one
	SecurityGroups []string // security group ids; at least one
	AssignPublicIP bool     // a public IP (public subnets without a NAT route)
	// TaskDefinition is the runner these nodes run, when it is not
	// Config.TaskDefinition (template.yaml NetworkRunnerTaskDefinition: the
	// online profile's own image); "" = Config.TaskDefinition.
	TaskDefinition string
}

// RetryPolicy bounds the retries of RunTask answers that mean "not now".
type RetryPolicy struct {
	// Attempts is the number of RunTask calls at most; default 5.
	Attempts int
	// BaseDelay and MaxDelay shape the backoff: before retry n (1-based)
	// the launcher waits a uniformly random time in [0, min(MaxDelay,
	// BaseDelay·2^(n-1))] (full jitter). Defaults 1 s and 20 s.
	BaseDelay, MaxDelay time.Duration
	// Sleep waits d or until ctx ends; nil is a timer. Tests record the
	// delays with it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Config is where and how workers run.
type Config struct {
	Cluster         string // cluster name or ARN
	TaskDefinition  string // the runner's task definition: family[:revision] or ARN
	Container       string // the runner's container in it; "" = DefaultContainer
	PlatformVersion string // Fargate platform version; "" = LATEST
	// Offline is the network of nodes without network access (the
	// default): template.yaml's WorkerSubnetIds and a security group whose
	// only egress is HTTPS (the worker API, S3, the model provider). Online
	// is the network of nodes with network_access true: subnets and a
	// security group with any egress. A node's offline stance is its
	// engine's (docs/security.md § Network profiles); a boundary at the
	// network is the subnets' routes.
	Offline, Online NetworkProfile
	// PublisherTaskDefinition is the task definition of a publish node's
	// worker (launch.Spec.Publisher; template.yaml
	// PublisherTaskDefinition): the only one whose container gets the git
	// token secret. It runs on the Online profile, since it pushes to the
	// git host (docs/architecture.md § Publishing). "" = none: a publisher
	// spec is refused (EINVALID), never run on a runner that holds no
	// token.
	PublisherTaskDefinition string
	Retry                   RetryPolicy
}

// Launcher starts `stratus runner` as an ECS Fargate task per attempt.
type Launcher struct {
	api API
	cfg Config
}

var (
	_ launch.Launcher    = (*Launcher)(nil)
	_ launch.TaskStopper = (*Launcher)(nil)
)

// New checks cfg and returns a Launcher calling api. Errors: EINVALID
// naming the missing field.
func New(api API, cfg Config) (*Launcher, error) {
	switch {
	case cfg.Cluster == "":
		return nil, stratus.FieldErrorf(stratus.EINVALID, "Cluster", "is empty; valid: an ECS cluster name or ARN")
	case cfg.TaskDefinition == "":
		return nil, stratus.FieldErrorf(stratus.EINVALID, "TaskDefinition", "is empty; valid: the runner's task definition, family[:revision] or ARN")
	}
	for _, p := range []struct {
		name string
		p    NetworkProfile
	}{{"Offline", cfg.Offline}, {"Online", cfg.Online}} {
		if len(p.p.Subnets) == 0 {
			return nil, stratus.FieldErrorf(stratus.EINVALID, p.name+".Subnets", "is empty; valid: one or more subnet ids (awsvpc needs a subnet)")
		}
		if len(p.p.SecurityGroups) == 0 {
			return nil, stratus.FieldErrorf(stratus.EINVALID, p.name+".SecurityGroups", "is empty; valid: one or more security group ids")
		}
	}
	if cfg.Container == "" {
		cfg.Container = DefaultContainer
	}
	r := &cfg.Retry
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = time.Second
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 20 * time.Second
	}
	if r.Sleep == nil {
		r.Sleep = smithytime.SleepWithContext
	}
	return &Launcher{api: api, cfg: cfg}, nil
}

// Environment returns the worker's environment, as its container
// overrides carry it: the API URL, the handle, the dispatch task id and
// the attempt number.
func Environment(s launch.Spec) []types.KeyValuePair {
	env := []types.KeyValuePair{
		{Name: aws.String(launch.EnvAPIURL), Value: aws.String(s.APIURL)},
		{Name: aws.String(launch.EnvHandle), Value: aws.String(s.Handle)},
	}
	if s.TaskID != "" {
		env = append(env, types.KeyValuePair{Name: aws.String(launch.EnvTaskID), Value: aws.String(s.TaskID)})
	}
	if s.Attempt > 0 {
		env = append(env, types.KeyValuePair{Name: aws.String(launch.EnvAttempt), Value: aws.String(strconv.Itoa(s.Attempt))})
	}
	return env
}

// overridesSize is the length of the overrides' JSON as the RunTask
// request carries it (bytes, never fewer than its characters).
func overridesSize(o *types.TaskOverride) int {
	type kv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type container struct {
		Name        string `json:"name"`
		Environment []kv   `json:"environment"`
	}
	var doc struct {
		ContainerOverrides []container `json:"containerOverrides"`
	}
	for _, c := range o.ContainerOverrides {
		co := container{Name: aws.ToString(c.Name)}
		for _, e := range c.Environment {
			co.Environment = append(co.Environment, kv{aws.ToString(e.Name), aws.ToString(e.Value)})
		}
		doc.ContainerOverrides = append(doc.ContainerOverrides, co)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(doc)
	return len(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// Request builds the RunTask request of one worker, and checks its
// overrides against MaxOverrideChars (ETOOLARGE, field
// "overrides"). A publisher's spec (launch.Spec.Publisher) runs
// Config.PublisherTaskDefinition on the Online profile, whatever its
// NetworkAccess; without one it is refused (EINVALID, field
// "PublisherTaskDefinition"). The overrides are the same for every
// worker: the git token is the publisher task definition's secret, never
// an override. try (1-based) is part of the idempotency token, so the
// SDK's retries of one call cannot start two tasks while the launcher's
// own retries each get a fresh answer.
func (l *Launcher) Request(s launch.Spec, try int) (*awsecs.RunTaskInput, error) {
	if s.APIURL == "" || s.Handle == "" {
		return nil, stratus.Errorf(stratus.EINVALID, "launch spec needs the API URL and the handle; got API URL %q, handle %q", s.APIURL, s.Handle)
	}
	net := l.cfg.Offline
	if s.NetworkAccess {
		net = l.cfg.Online
	}
	td := cmp.Or(net.TaskDefinition, l.cfg.TaskDefinition)
	if s.Publisher {
		if l.cfg.PublisherTaskDefinition == "" {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "PublisherTaskDefinition",
				"is empty, so the publisher of task %s has nowhere to run; valid: the publisher's task definition, family[:revision] or ARN (template.yaml PublisherTaskDefinition, STRATUS_ECS_PUBLISHER_TASK_DEFINITION)", s.TaskID)
		}
		net, td = l.cfg.Online, l.cfg.PublisherTaskDefinition
	}
	public := types.AssignPublicIpDisabled
	if net.AssignPublicIP {
		public = types.AssignPublicIpEnabled
	}
	overrides := &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{{
		Name: aws.String(l.cfg.Container), Environment: Environment(s),
	}}}
	if n := overridesSize(overrides); n > MaxOverrideChars {
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "overrides",
			"the container overrides of task %s are %d characters of JSON; ECS allows at most %d (the API URL is %d characters, the handle %d)",
			s.TaskID, n, MaxOverrideChars, len(s.APIURL), len(s.Handle))
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", s.Handle, try)))
	in := &awsecs.RunTaskInput{
		Cluster:        aws.String(l.cfg.Cluster),
		TaskDefinition: aws.String(td),
		LaunchType:     types.LaunchTypeFargate,
		Count:          aws.Int32(1),
		StartedBy:      aws.String(StartedBy(s.TaskID)),
		ClientToken:    aws.String(hex.EncodeToString(sum[:])[:64]),
		NetworkConfiguration: &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets: append([]string(nil), net.Subnets...), SecurityGroups: append([]string(nil), net.SecurityGroups...), AssignPublicIp: public,
		}},
		Overrides: overrides,
	}
	if l.cfg.PlatformVersion != "" {
		in.PlatformVersion = aws.String(l.cfg.PlatformVersion)
	}
	return in, nil
}

// Launch starts the worker of s as one Fargate task and returns its task
// ARN. Errors: the overrides guard (ETOOLARGE) before any call; after
// Config.Retry's attempts on throttling or capacity, an error wrapping
// launch.ErrInfrastructure; any other refusal at once.
func (l *Launcher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	if _, err := l.Request(s, 1); err != nil {
		return "", err
	}
	r := l.cfg.Retry
	var last string
	for try := 1; ; try++ {
		in, _ := l.Request(s, try)
		out, err := l.api.RunTask(ctx, in)
		arn, why, retryable := classify(out, err)
		if arn != "" {
			return arn, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("ecs:RunTask for %s: %w", s.TaskID, ctx.Err())
		}
		if !retryable {
			return "", fmt.Errorf("ecs:RunTask for %s: %s", s.TaskID, why)
		}
		last = why
		if try >= r.Attempts {
			return "", &InfrastructureError{TaskID: s.TaskID, Attempts: try, Reason: last}
		}
		if s.Waiting != nil {
			if err := s.Waiting(); err != nil {
				return "", fmt.Errorf("ecs:RunTask for %s: %w (%v; last answer: %s)", s.TaskID, launch.ErrStepGone, err, last)
			}
		}
		if err := r.Sleep(ctx, backoff(r, try)); err != nil {
			return "", fmt.Errorf("ecs:RunTask for %s: %w (last answer: %s)", s.TaskID, err, last)
		}
	}
}

// InfrastructureError is a launch that ran out of retries on throttling or
// capacity; errors.Is(err, launch.ErrInfrastructure) holds.
type InfrastructureError struct {
	TaskID   string
	Attempts int
	Reason   string // the last answer, e.g. "RESOURCE:CPU" or "ThrottlingException: Rate exceeded"
}

func (e *InfrastructureError) Error() string {
	return fmt.Sprintf("ecs:RunTask for %s: %s (after %d attempts): an infrastructure failure (capacity or throttling), not the step's",
		e.TaskID, e.Reason, e.Attempts)
}

// Unwrap makes the error launch.ErrInfrastructure.
func (e *InfrastructureError) Unwrap() error { return launch.ErrInfrastructure }

// classify reads one RunTask answer: the started task's ARN, or why not
// and whether another try may succeed.
func classify(out *awsecs.RunTaskOutput, err error) (arn, why string, retryable bool) {
	if err != nil {
		var ae smithy.APIError
		if !errors.As(err, &ae) {
			// A connection that failed through all the SDK's retries is
			// infrastructure; anything else (an answer that cannot be read)
			// is not helped by another try.
			return "", err.Error(), retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
		}
		code := ae.ErrorCode()
		why = code + ": " + ae.ErrorMessage()
		_, throttled := retry.DefaultThrottleErrorCodes[code]
		return "", why, throttled || serverSide[code] || capacity(ae.ErrorMessage())
	}
	for _, t := range out.Tasks {
		if a := aws.ToString(t.TaskArn); a != "" {
			return a, "", false
		}
	}
	if len(out.Failures) == 0 {
		return "", "no task started and no failure reported", true
	}
	var reasons []string
	retryable = true
	for _, f := range out.Failures {
		reason := aws.ToString(f.Reason)
		if d := aws.ToString(f.Detail); d != "" {
			reason += " (" + d + ")"
		}
		reasons = append(reasons, reason)
		if !capacity(reason) {
			retryable = false
		}
	}
	return "", strings.Join(reasons, "; "), retryable
}

// serverSide are the error codes of an ECS that could not answer now.
var serverSide = map[string]bool{"ServerException": true, "ServiceUnavailableException": true, "InternalFailure": true, "ServiceUnavailable": true}

// capacity reports whether a RunTask failure reason means "no capacity
// now": RESOURCE:CPU / RESOURCE:MEMORY / RESOURCE:ENI ..., Fargate's
// "Capacity is unavailable at this time", throttling text, and EC2's
// throttling behind awsvpc, which ECS passes on inside another code
// ("InvalidParameterException: … Request limit exceeded
// (RequestLimitExceeded)").
func capacity(reason string) bool {
	r := strings.ToLower(reason)
	return strings.HasPrefix(r, "resource:") || strings.Contains(r, "capacity is unavailable") ||
		strings.Contains(r, "throttl") || strings.Contains(r, "rate exceeded") ||
		strings.Contains(r, "request limit exceeded") || strings.Contains(r, "requestlimitexceeded")
}

// backoff is the full-jitter delay before retry n (1-based).
func backoff(r RetryPolicy, n int) time.Duration {
	ceiling := r.MaxDelay
	if n < 31 {
		if d := r.BaseDelay << (n - 1); d > 0 && d < ceiling {
			ceiling = d
		}
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// Stop stops the task id (its ARN) with ecs:StopTask: ECS sends the
// runner SIGTERM and, after the task definition's stopTimeout, SIGKILL.
// A task that is already gone is not an error.
func (l *Launcher) Stop(ctx context.Context, id string) error {
	_, err := l.api.StopTask(ctx, &awsecs.StopTaskInput{Cluster: aws.String(l.cfg.Cluster), Task: aws.String(id),
		Reason: aws.String("stratus: the worker's state timed out or failed")})
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidParameterException" && strings.Contains(strings.ToLower(ae.ErrorMessage()), "not found") {
		return nil
	}
	return fmt.Errorf("ecs:StopTask %s: %w", id, err)
}

// StopTask stops every task still running for the dispatch task taskID
// (ecs:ListTasks by StartedBy, then ecs:StopTask each), so a stop message
// handled by another invocation than the launching one still stops the
// worker. None running is not an error.
func (l *Launcher) StopTask(ctx context.Context, taskID string) error {
	out, err := l.api.ListTasks(ctx, &awsecs.ListTasksInput{Cluster: aws.String(l.cfg.Cluster),
		StartedBy: aws.String(StartedBy(taskID)), DesiredStatus: types.DesiredStatusRunning})
	if err != nil {
		return fmt.Errorf("ecs:ListTasks for %s: %w", taskID, err)
	}
	var errs []error
	for _, arn := range out.TaskArns {
		if err := l.Stop(ctx, arn); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
