package devstack

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	smsecret "github.com/stratusflow/stratus/internal/secret/secretsmanager"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Stack is what template.yaml deploys, made on a stand-in by Create: the
// table, the bucket, the dispatch queue and its DLQ, the HMAC key secret,
// the runner's ECS cluster and task definition, and a CloudFormation stack
// whose outputs name them as template.yaml's do, so that `--stack Name`
// finds them. Runs create their own state machines (StateMachinePrefix,
// StateMachineRole); no built-in one is deployed.
type Stack struct {
	Name        string
	Table       string
	TablePrefix string
	Bucket      string
	QueueURL    string
	SecretARN   string
	Cluster     string // ARN
	TaskDef     string // family
	Role        string // the state machines' execution role (a stand-in takes any)
	APIURL      string // the worker API, set by Serve's caller before Create
	// PoolQueueURL and PoolNetworkQueueURL are the warm runner pool's
	// assignment queues (issue 17), once CreatePool made them.
	PoolQueueURL        string
	PoolNetworkQueueURL string
}

// CreatePool makes what template.yaml's RunnerPool=on adds for dispatch
// and the pooled runners (issue 17): an assignment queue per network
// profile, each with a dead-letter queue after 5 receives and a 60 s
// visibility timeout. Errors: the first AWS call that fails.
func (st *Stack) CreatePool(ctx context.Context, cfg aws.Config) error {
	q := sqs.NewFromConfig(cfg)
	for _, p := range []struct {
		name string
		url  *string
	}{{st.Name + "-pool", &st.PoolQueueURL}, {st.Name + "-pool-network", &st.PoolNetworkQueueURL}} {
		url, err := createQueueWithDLQ(ctx, q, p.name, "60")
		if err != nil {
			return fmt.Errorf("create the pool queue %s: %w", p.name, err)
		}
		*p.url = url
	}
	return nil
}

// createQueueWithDLQ creates name and name-dlq, the first redriven to the
// second after 5 receives, with the visibility timeout given (seconds).
func createQueueWithDLQ(ctx context.Context, q *sqs.Client, name, visibility string) (string, error) {
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		return "", err
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", err
	}
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": attrs.Attributes["QueueArn"], "maxReceiveCount": "5"})
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": visibility, "RedrivePolicy": string(redrive)}})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

// CreateOptions are template.yaml parameters a stand-in's stack takes.
type CreateOptions struct {
	// HeartbeatSeconds is the stack's HeartbeatSeconds output: the
	// heartbeat window of every worker Task state of a run compiled for
	// it (0: none, the compiler's default).
	HeartbeatSeconds int
}

// StackRole is the execution role ARN a stand-in's state machines get.
const StackRole = "arn:aws:iam::123456789012:role/stratus-dev-state-machines"

// Create makes a stack named name on the stand-in cfg points at; apiURL is
// where the worker API will listen (an output, and what workers are told).
// Errors: the first AWS call that fails.
//
// o, at most one, sets what template.yaml takes as parameters.
func Create(ctx context.Context, cfg aws.Config, name, apiURL string, o ...CreateOptions) (*Stack, error) {
	st := &Stack{Name: name, TablePrefix: name + "-", Bucket: name, TaskDef: name + "-runner", Role: StackRole, APIURL: apiURL}
	st.Table = dynamodb.TableName(st.TablePrefix)
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), st.TablePrefix); err != nil {
		return nil, fmt.Errorf("create the table: %w", err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(st.Bucket)}); err != nil {
		return nil, fmt.Errorf("create the bucket: %w", err)
	}
	q := sqs.NewFromConfig(cfg)
	dq, err := createQueueWithDLQ(ctx, q, name+"-dispatch", "720")
	if err != nil {
		return nil, fmt.Errorf("create the dispatch queue: %w", err)
	}
	st.QueueURL = dq
	if st.SecretARN, err = smsecret.CreateKeySecret(ctx, awssm.NewFromConfig(cfg), name+"-hmac"); err != nil {
		return nil, fmt.Errorf("create the HMAC key secret: %w", err)
	}
	// template.yaml's task definition is awsvpc; moto 5.2.1's RunTask
	// fails on one, so the stand-in's is bridge (the launcher still asks
	// for awsvpc, which moto ignores), with the template's size.
	ecsc := awsecs.NewFromConfig(cfg)
	cl, err := ecsc.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("create the ECS cluster: %w", err)
	}
	st.Cluster = aws.ToString(cl.Cluster.ClusterArn)
	if _, err := ecsc.RegisterTaskDefinition(ctx, &awsecs.RegisterTaskDefinitionInput{
		Family: aws.String(st.TaskDef), NetworkMode: ecstypes.NetworkModeBridge, Cpu: aws.String("1024"), Memory: aws.String("2048"),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String(ecs.DefaultContainer), Image: aws.String("stratus-runner:dev"), Memory: aws.Int32(2048)}},
	}); err != nil {
		return nil, fmt.Errorf("register the runner's task definition: %w", err)
	}
	outputs := map[string]any{
		awsrun.OutputTable:              map[string]string{"Value": st.Table},
		awsrun.OutputBucket:             map[string]string{"Value": st.Bucket},
		awsrun.OutputAPIURL:             map[string]string{"Value": apiURL},
		awsrun.OutputQueueURL:           map[string]string{"Value": st.QueueURL},
		awsrun.OutputStateMachineRole:   map[string]string{"Value": st.Role},
		awsrun.OutputStateMachinePrefix: map[string]string{"Value": name + "-"},
	}
	if len(o) > 0 && o[0].HeartbeatSeconds > 0 {
		outputs[awsrun.OutputHeartbeatSeconds] = map[string]string{"Value": fmt.Sprint(o[0].HeartbeatSeconds)}
	}
	tpl, _ := json.Marshal(map[string]any{
		"Resources": map[string]any{"Handle": map[string]any{"Type": "AWS::CloudFormation::WaitConditionHandle"}},
		"Outputs":   outputs,
	})
	if _, err := cloudformation.NewFromConfig(cfg).CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(string(tpl))}); err != nil {
		return nil, fmt.Errorf("create the CloudFormation stack: %w", err)
	}
	return st, nil
}
