package awsrun

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awspool"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Target is a deployed stack opened for runs: its store, its bucket and
// Step Functions, through one SDK configuration.
type Target struct {
	Resources
	Store *dynamodb.Store
	Sink  *s3sink.Sink
	Exec  *sfn.Executor

	region string
	cfg    aws.Config // what signs and sends the operator's replies (Reply)
}

// Open opens r through cfg. A custom endpoint (cfg.BaseEndpoint: moto,
// LocalStack) gets path-style S3 addressing. Nothing is called. Errors:
// Resources.Check's.
func Open(cfg aws.Config, r Resources) (*Target, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	if r.BucketPrefix == "" {
		r.BucketPrefix = DefaultBucketPrefix
	}
	pathStyle := cfg.BaseEndpoint != nil
	sk, err := s3sink.New(awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.UsePathStyle = pathStyle
		// Stand-ins (moto, LocalStack) answer GetObject without checksums;
		// the SDK would say so on stderr for every object read.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), r.Bucket, r.BucketPrefix)
	if err != nil {
		return nil, err
	}
	st, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), dynamodb.Options{Table: r.Table, Blobs: sk})
	if err != nil {
		return nil, err
	}
	opts := sfn.Options{PollInterval: 2 * time.Second}
	if r.OwnMachines() {
		// A run's definition is deployed as its own state machine, with
		// the template's DefinitionSubstitutions applied here.
		opts.RoleARN, opts.Substitutions = r.StateMachineRole, map[string]string{"DispatchQueueUrl": r.QueueURL}
	}
	return &Target{Resources: r, Store: st, Sink: sk, Exec: sfn.New(sfn.NewClient(cfg), opts), region: cfg.Region, cfg: cfg}, nil
}

// RunStateMachine returns the ARN of the state machine that runs the
// compiled definition def of flow taskType
// (docs/architecture.md § The run lifecycle: what runs is what was
// validated). With OwnMachines it is the stack's machine of that very
// definition, "<prefix><task type>-<first 12 hex of its SHA-256>" in the
// account of the execution role — StartExecution with the definition creates
// it the first time and reuses it after (an edited flow gets a new one);
// otherwise the deployed machine of the flow (StateMachineFor), and the
// definition is not used.
func (t *Target) RunStateMachine(taskType string, def []byte) (string, error) {
	if !t.OwnMachines() {
		return t.StateMachineFor(taskType)
	}
	return sfn.MachineARN(t.StateMachineRole, t.region, t.StateMachinePrefix, taskType, def)
}

// URL is the s3:// address of sink key key.
func (t *Target) URL(key string) string {
	return "s3://" + t.Sink.Bucket() + "/" + t.Sink.ObjectKey(key)
}

// RunURL is the s3:// address of key of run runID's work-dir files
// (sink.ForRun: under runs/<run_id>/ in the bucket).
func (t *Target) RunURL(runID, key string) string {
	return t.URL(t.Sink.RunKey(runID, key))
}

// ports are the stack's store, bucket and Step Functions, as a launch
// uses them (awspool.Launch).
func (t *Target) ports() awspool.Ports {
	return awspool.Ports{Store: t.Store, Sink: t.Sink, Exec: t.Exec}
}

// Pool is the stack's task pool as its claim serves it (its
// MaxConcurrentTasks and TaskQueue outputs; 1 and "default" without).
func (t *Target) Pool() *awspool.Pool {
	return &awspool.Pool{Ports: t.ports(), Queue: t.TaskQueue, Max: t.MaxConcurrentTasks}
}

// Wake sends the stack's claim queue a message (why, for its log): the
// claim function then looks at the pool. Errors: EINVALID when the stack
// has no claim queue; the SQS error.
func (t *Target) Wake(ctx context.Context, why string) error {
	if t.ClaimQueueURL == "" {
		return stratus.FieldErrorf(stratus.EINVALID, "stack", "the stack has no task pool (no %s output)", OutputClaimQueueURL)
	}
	body, _ := json.Marshal(map[string]string{"wake": why})
	_, err := awssqs.NewFromConfig(t.cfg).SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(t.ClaimQueueURL), MessageBody: aws.String(string(body))})
	return err
}
