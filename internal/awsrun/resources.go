package awsrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
)

// Output keys of template.yaml the CLI reads. A flow's state machine is
// the output named <TaskType>StateMachineArn, the task type in
// CamelCase ("ImplementationStateMachineArn").
const (
	OutputTable              = "StoreTableName"
	OutputBucket             = "DataBucketName"
	OutputAPIURL             = "ApiUrl"
	StateMachineOutputSuffix = "StateMachineArn"
	// The outputs that let a run create its own state machine
	// (docs/architecture.md § The run lifecycle): the queue its Task states
	// send to, the execution role, and the name prefix the stack's events
	// rule and operator policy cover.
	OutputQueueURL           = "DispatchQueueUrl"
	OutputStateMachineRole   = "StateMachineRoleArn"
	OutputStateMachinePrefix = "StateMachinePrefix"
	// OutputHeartbeatSeconds is the stack's HeartbeatSeconds parameter:
	// the heartbeat window every worker Task state of a run compiled for
	// the stack gets.
	OutputHeartbeatSeconds = "HeartbeatSeconds"
	// The stack's task pool (README.md § Task pool): the queue that wakes
	// its claim, how many of its tasks run at once and the queue selector
	// the claim serves (template.yaml MaxConcurrentTasks, TaskQueue).
	OutputClaimQueueURL      = "ClaimQueueUrl"
	OutputMaxConcurrentTasks = "MaxConcurrentTasks"
	OutputTaskQueue          = "TaskQueue"
)

// EnvStateMachine and EnvStack are the environment variables `stratus run
// --target aws` reads when --state-machine and --stack are not given
// (the table and bucket come from awsapp's STRATUS_TABLE, STRATUS_BUCKET
// and STRATUS_BUCKET_PREFIX, as the functions read them).
const (
	EnvStateMachine = "STRATUS_STATE_MACHINE_ARN"
	EnvStack        = "STRATUS_STACK"
)

// DefaultBucketPrefix is the key prefix template.yaml gives every
// function (STRATUS_BUCKET_PREFIX).
const DefaultBucketPrefix = "stratus/"

// Resources are the parts of a deployed stack a run needs.
type Resources struct {
	Stack string // the CloudFormation stack they came from ("" = given explicitly)
	// StateMachine, when set, runs every task (--state-machine); otherwise
	// StateMachines maps a stack's state-machine output keys to ARNs.
	StateMachine  string
	StateMachines map[string]string
	Table         string // the store's DynamoDB table
	Bucket        string
	BucketPrefix  string
	APIURL        string // the worker API's URL (shown only)
	// QueueURL, StateMachineRole and StateMachinePrefix, all three set,
	// make each run execute a state machine of its own compiled
	// definition (RunStateMachine) rather than a deployed one.
	QueueURL           string
	StateMachineRole   string
	StateMachinePrefix string
	// HeartbeatSeconds is the stack's heartbeat window (0 = the
	// compiler's default, 300 s).
	HeartbeatSeconds int
	// ClaimQueueURL wakes the stack's claim ("" = a stack without a task
	// pool); MaxConcurrentTasks and TaskQueue are what its claim serves
	// (0 and "": 1 and "default").
	ClaimQueueURL      string
	MaxConcurrentTasks int
	TaskQueue          string
}

// OwnMachines reports whether runs create their own state machines: the
// three resources it takes are known and no --state-machine overrides them.
func (r Resources) OwnMachines() bool {
	return r.StateMachine == "" && r.QueueURL != "" && r.StateMachineRole != "" && r.StateMachinePrefix != ""
}

// StateMachineFor returns the ARN of the state machine of flow taskType:
// Resources.StateMachine when set, else the output
// <TaskType>StateMachineArn (compared ignoring case, '_' and '-').
// Errors: ENOTFOUND naming the outputs there are.
func (r Resources) StateMachineFor(taskType string) (string, error) {
	if r.StateMachine != "" {
		return r.StateMachine, nil
	}
	want := normalize(taskType + StateMachineOutputSuffix)
	var have []string
	for k, v := range r.StateMachines {
		if normalize(k) == want {
			return v, nil
		}
		have = append(have, k)
	}
	slices.Sort(have)
	where := "no --state-machine was given"
	if r.Stack != "" {
		where = fmt.Sprintf("stack %s has no output %s%s (state-machine outputs: %s)", r.Stack, camel(taskType), StateMachineOutputSuffix, orNone(have))
	}
	return "", stratus.FieldErrorf(stratus.ENOTFOUND, "state_machine", "no state machine for flow %q: %s; deploy one for the flow or pass --state-machine ARN", taskType, where)
}

// Check refuses resources without a table or a bucket, naming the flag.
func (r Resources) Check() error {
	switch {
	case r.Table == "":
		return stratus.FieldErrorf(stratus.EINVALID, "table", "the store's table is not known; give --stack NAME, or --table NAME (or --table-prefix P, or STRATUS_TABLE)")
	case r.Bucket == "":
		return stratus.FieldErrorf(stratus.EINVALID, "bucket", "the data bucket is not known; give --stack NAME, or --bucket NAME (or STRATUS_BUCKET)")
	}
	return nil
}

// DescribeStacksAPI is the CloudFormation call FromStack makes.
type DescribeStacksAPI interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// FromStack reads the resources of stack from its outputs (template.yaml
// § Outputs); BucketPrefix is DefaultBucketPrefix. Errors: ENOTFOUND for
// a stack that does not exist, EINVALID for one whose outputs lack the
// table or the bucket (not a Stratus stack, or not yet deployed), the
// AWS error otherwise.
func FromStack(ctx context.Context, api DescribeStacksAPI, stack string) (Resources, error) {
	out, err := api.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist") {
			return Resources{}, stratus.FieldErrorf(stratus.ENOTFOUND, "stack", "stack %q does not exist (CloudFormation DescribeStacks: %s)", stack, ae.ErrorMessage())
		}
		return Resources{}, fmt.Errorf("CloudFormation DescribeStacks %s: %w", stack, err)
	}
	if len(out.Stacks) == 0 {
		return Resources{}, stratus.FieldErrorf(stratus.ENOTFOUND, "stack", "stack %q does not exist", stack)
	}
	r := Resources{Stack: stack, BucketPrefix: DefaultBucketPrefix, StateMachines: map[string]string{}}
	for _, o := range out.Stacks[0].Outputs {
		k, v := aws.ToString(o.OutputKey), aws.ToString(o.OutputValue)
		switch {
		case k == OutputTable:
			r.Table = v
		case k == OutputBucket:
			r.Bucket = v
		case k == OutputAPIURL:
			r.APIURL = v
		case k == OutputQueueURL:
			r.QueueURL = v
		case k == OutputStateMachineRole:
			r.StateMachineRole = v
		case k == OutputStateMachinePrefix:
			r.StateMachinePrefix = v
		case k == OutputHeartbeatSeconds:
			if r.HeartbeatSeconds, err = positive(stack, k, v, "seconds"); err != nil {
				return r, err
			}
		case k == OutputClaimQueueURL:
			r.ClaimQueueURL = v
		case k == OutputTaskQueue:
			r.TaskQueue = v
		case k == OutputMaxConcurrentTasks:
			if r.MaxConcurrentTasks, err = positive(stack, k, v, "tasks"); err != nil {
				return r, err
			}
		case strings.HasSuffix(k, StateMachineOutputSuffix):
			r.StateMachines[k] = v
		}
	}
	if r.Table == "" || r.Bucket == "" {
		return r, stratus.FieldErrorf(stratus.EINVALID, "stack", "stack %q (status %s) has no %s or %s output; is it a Stratus stack (template.yaml), deployed?",
			stack, out.Stacks[0].StackStatus, OutputTable, OutputBucket)
	}
	return r, nil
}

// positive reads stack output key's value v as a positive number of unit.
// Errors: EINVALID (field stack) naming the output and its value.
func positive(stack, key, v, unit string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, stratus.FieldErrorf(stratus.EINVALID, "stack", "stack %q output %s is %q; want a positive number of %s", stack, key, v, unit)
	}
	return n, nil
}

func normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// camel is the CamelCase of a task type ("bug_fix" → "BugFix").
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' || r == '-' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
