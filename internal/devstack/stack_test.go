package devstack_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/testenv"
)

// setup returns an SDK config on the shared moto server and a stack name
// unique to the test; it skips (naming why) where moto or the SAM
// translator is missing.
func setup(t *testing.T) (aws.Config, string) {
	t.Helper()
	if why := devstack.MissingTranslator(); why != "" {
		testenv.Missing(t, "aws-sam-translator", why)
	}
	cfg := awstest.Moto(t).Config()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return cfg, name
}

// edit returns template.yaml with each old replaced by new, failing the
// test when old is not there exactly n times.
func edit(t *testing.T, tpl string, n int, old, new string) string {
	t.Helper()
	if c := strings.Count(tpl, old); c != n {
		t.Fatalf("template.yaml holds %q %d times; the test expects %d", old, c, n)
	}
	return strings.ReplaceAll(tpl, old, new)
}

// README "What dev aws emulates": the stand-in's stack is template.yaml,
// transformed by the SAM translator and created as a CloudFormation stack;
// what Create returns is read back from that stack (Load gives the same).
func TestCreate_DeploysTemplateYAML(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	ctx := context.Background()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, []byte("#!/bin/sh\necho built\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := devstack.Create(ctx, cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{HeartbeatSeconds: 150,
		Bootstraps: map[string]string{"EventsFunction": bootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	// A function's code is its bootstrap, zipped, as sam build leaves it;
	// one without a built bootstrap gets the placeholder.
	for f, path := range map[string]string{"EventsFunction": bootstrap, "DispatchFunction": ""} {
		zip, err := devstack.BootstrapZip(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(zip)
		fn, err := lambda.NewFromConfig(cfg).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(st.Functions[f])})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := aws.ToString(fn.Configuration.CodeSha256), base64.StdEncoding.EncodeToString(sum[:]); got != want {
			t.Errorf("%s's code sha256 %s; want %s (bootstrap %q zipped)", f, got, want, path)
		}
	}
	if st.APIURL != "http://127.0.0.1:9" || st.Outputs[awsrun.OutputHeartbeatSeconds] != "150" {
		t.Errorf("ApiUrl %q, HeartbeatSeconds %q; want the worker API's URL and 150", st.APIURL, st.Outputs[awsrun.OutputHeartbeatSeconds])
	}
	for _, f := range []string{"WorkerApiFunction", "DispatchFunction", "EventsFunction", "ClaimFunction"} {
		if st.Functions[f] == "" {
			t.Errorf("no function %s in %v", f, st.Functions)
		}
	}
	if len(st.Subnets) != 1 || len(st.SecurityGroups) != 1 || st.VPC == "" || st.StateMachine == "" || st.NetworkTaskDef == "" || st.PublisherTaskDef == "" {
		t.Errorf("stack %+v: want a VPC, a subnet, a security group, the implementation state machine, the network task definition", st)
	}
	// The function's environment is the template's, resolved.
	fc, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(st.Functions["WorkerApiFunction"])})
	if err != nil {
		t.Fatal(err)
	}
	env := fc.Environment.Variables
	if env["STRATUS_TABLE"] != st.Table || env["STRATUS_HMAC_SECRET_ID"] != st.SecretARN || env["STRATUS_API_URL"] != st.APIURL || aws.ToInt32(fc.MemorySize) != 512 {
		t.Errorf("WorkerApiFunction: memory %d, environment %v; want 512 MB and the stack's table, secret and API URL", aws.ToInt32(fc.MemorySize), env)
	}
	// The task pool: the claim function gets the parameters' defaults, and
	// the events function the queue that wakes it (README.md § Task pool).
	claimEnv := map[string]string{}
	for _, f := range []string{"ClaimFunction", "EventsFunction"} {
		fc, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(st.Functions[f])})
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(claimEnv, fc.Environment.Variables)
	}
	if st.ClaimQueueURL == "" || claimEnv["STRATUS_CLAIM_QUEUE_URL"] != st.ClaimQueueURL || claimEnv["STRATUS_MAX_CONCURRENT_TASKS"] != "1" || claimEnv["STRATUS_TASK_QUEUE"] != "default" {
		t.Errorf("claim queue %q; the claim and events functions' environment %v: want the claim queue's URL, 1 task at once, queue default", st.ClaimQueueURL, claimEnv)
	}
	// What dev aws feeds the claim function from: its queue, the stack's
	// bucket under the pending tasks' prefix, the schedule's rule.
	cq, cb, cp, rule, ok, err := devstack.ClaimSourcesOf(stratus.SAMTemplate, st, cfg.Region)
	if err != nil || !ok || cq != st.ClaimQueueURL || cb != st.Bucket || cp != "stratus/tasks/pending/" || !strings.HasPrefix(rule, "arn:aws:events:") {
		t.Errorf("the claim's sources: queue %q, bucket %q, prefix %q, schedule %q, %v, %v; want the stack's claim queue and bucket, stratus/tasks/pending/, an events rule ARN",
			cq, cb, cp, rule, ok, err)
	}
	// The secret is generated as GenerateSecretString says: 64 alphanumerics.
	sv, err := awssm.NewFromConfig(cfg).GetSecretValue(ctx, &awssm.GetSecretValueInput{SecretId: aws.String(st.SecretARN)})
	if err != nil {
		t.Fatal(err)
	}
	if s := aws.ToString(sv.SecretString); len(s) != 64 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Errorf("HMAC key secret %q: want 64 alphanumerics", s)
	}
	// The table has its TTL; the task definition its size and network mode.
	ttl, err := awsdynamodb.NewFromConfig(cfg).DescribeTimeToLive(ctx, &awsdynamodb.DescribeTimeToLiveInput{TableName: aws.String(st.Table)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "ttl" || ttl.TimeToLiveDescription.TimeToLiveStatus != "ENABLED" {
		t.Errorf("table TTL %+v; want ttl, enabled", ttl.TimeToLiveDescription)
	}
	td, err := awsecs.NewFromConfig(cfg).DescribeTaskDefinition(ctx, &awsecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(st.TaskDef)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(td.TaskDefinition.Cpu) != "1024" || aws.ToString(td.TaskDefinition.Memory) != "2048" || td.TaskDefinition.NetworkMode != "awsvpc" {
		t.Errorf("task definition cpu %q memory %q network %q; want 1024, 2048, awsvpc", aws.ToString(td.TaskDefinition.Cpu), aws.ToString(td.TaskDefinition.Memory), td.TaskDefinition.NetworkMode)
	}
	// A Fargate RunTask of it works as dispatch sends it: awsvpc, in the
	// stack's subnet and security group.
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &awstest.ECSClient{}
	run, err := awsecs.NewFromConfig(ecsCfg).RunTask(ctx, &awsecs.RunTaskInput{
		Cluster: aws.String(st.Cluster), TaskDefinition: aws.String(st.TaskDef), LaunchType: ecstypes.LaunchTypeFargate,
		NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: st.Subnets, SecurityGroups: st.SecurityGroups}},
	})
	if err != nil || len(run.Tasks) != 1 {
		t.Fatalf("RunTask on the stack's task definition: %v", err)
	}
	// The dispatch queue is the dispatch function's event source, played by
	// dev aws: moto itself does not consume it (a message sent is received
	// once, by whoever polls it).
	q := sqs.NewFromConfig(cfg)
	for i := range 6 {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURL), MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURL), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got.Messages {
		if n := m.Attributes["ApproximateReceiveCount"]; n != "1" {
			t.Errorf("dispatch message %s received %s times; want once (nothing else consumes the queue)", aws.ToString(m.Body), n)
		}
	}
	if len(got.Messages) != 6 {
		t.Errorf("received %d of the 6 dispatch messages sent", len(got.Messages))
	}
	// The built-in state machine's definition came from DefinitionUri, its
	// DispatchQueueUrl substituted.
	sm, err := sfn.NewFromConfig(cfg).DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(st.StateMachine)})
	if err != nil {
		t.Fatal(err)
	}
	if def := aws.ToString(sm.Definition); !strings.Contains(def, st.QueueURL) || strings.Contains(def, "${DispatchQueueUrl}") {
		t.Errorf("the implementation state machine's definition does not send to %s:\n%.400s", st.QueueURL, def)
	}
	// --stack NAME: Load reads the same stack back.
	again, err := devstack.Load(ctx, cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(again) != fmt.Sprint(st) {
		t.Errorf("Load:\n%+v\nCreate:\n%+v", again, st)
	}
}

// README "What dev aws emulates": what is deployed is the template given —
// an edit of a copy of template.yaml shows in the deployed stand-in (a
// Lambda environment variable, the task definition's CPU, a table
// attribute).
func TestCreate_EditedTemplateIsWhatIsDeployed(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	ctx := context.Background()
	tpl := string(stratus.SAMTemplate)
	tpl = edit(t, tpl, 1, `          STRATUS_MAX_UPLOAD_BYTES: !Sub "${MaxUploadBytes}"`,
		`          STRATUS_MAX_UPLOAD_BYTES: !Sub "${MaxUploadBytes}"
          STRATUS_EDITED: "from the edited copy"`)
	tpl = edit(t, tpl, 1, `      Family: !Sub "${AWS::StackName}-runner"
      RequiresCompatibilities: [FARGATE]
      NetworkMode: awsvpc
      Cpu: !Ref WorkerCpu
      Memory: !Ref WorkerMemory`, `      Family: !Sub "${AWS::StackName}-runner"
      RequiresCompatibilities: [FARGATE]
      NetworkMode: awsvpc
      Cpu: "4096"
      Memory: "8192"`)
	tpl = edit(t, tpl, 2, "AttributeName: ttl_bucket", "AttributeName: ttl_shard")
	// The copy is a file of its own, as a user's edited template would be.
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := devstack.Create(ctx, cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{Template: b})
	if err != nil {
		t.Fatal(err)
	}
	fc, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(st.Functions["WorkerApiFunction"])})
	if err != nil {
		t.Fatal(err)
	}
	if v := fc.Environment.Variables["STRATUS_EDITED"]; v != "from the edited copy" {
		t.Errorf("WorkerApiFunction's STRATUS_EDITED = %q; want the edited copy's", v)
	}
	td, err := awsecs.NewFromConfig(cfg).DescribeTaskDefinition(ctx, &awsecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(st.TaskDef)})
	if err != nil {
		t.Fatal(err)
	}
	if c, m := aws.ToString(td.TaskDefinition.Cpu), aws.ToString(td.TaskDefinition.Memory); c != "4096" || m != "8192" {
		t.Errorf("the runner's task definition has cpu %q memory %q; want the edited 4096, 8192", c, m)
	}
	tbl, err := awsdynamodb.NewFromConfig(cfg).DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(st.Table)})
	if err != nil {
		t.Fatal(err)
	}
	var attrs []string
	for _, a := range tbl.Table.AttributeDefinitions {
		attrs = append(attrs, aws.ToString(a.AttributeName))
	}
	if got := strings.Join(attrs, ","); !strings.Contains(got, "ttl_shard") || strings.Contains(got, "ttl_bucket") {
		t.Errorf("the table's attributes are %s; want the edited ttl_shard, no ttl_bucket", got)
	}
}

// issue's Bad input rule, README "What dev aws emulates": a template the
// SAM translator refuses is ErrTransform with the translator's message,
// which names the resource.
func TestCreate_TransformFailureNamesTheResource(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	tpl := edit(t, string(stratus.SAMTemplate), 1, "            Path: /v1/healthz\n", "            Path: 42\n")
	_, err := devstack.Create(context.Background(), cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{Template: []byte(tpl)})
	if !errors.Is(err, devstack.ErrTransform) || !strings.Contains(err.Error(), "WorkerApiFunction") || !strings.Contains(err.Error(), "Healthz") {
		t.Fatalf("Create = %v; want ErrTransform naming WorkerApiFunction's event Healthz", err)
	}
}

// README "What dev aws emulates": a resource the stand-in fails to create
// fails the stack (CREATE_FAILED, not an HTTP 500), and Create's error names
// it.
func TestCreate_FailedResourceNamesIt(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	tpl := edit(t, string(stratus.SAMTemplate), 1, "      Bucket: !Ref DataBucket\n", "      Bucket: stratus-no-such-bucket\n")
	_, err := devstack.Create(context.Background(), cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{Template: []byte(tpl)})
	if err == nil || !strings.Contains(err.Error(), "CREATE_FAILED") || !strings.Contains(err.Error(), "DataBucketPolicy") {
		t.Fatalf("Create = %v; want CREATE_FAILED naming DataBucketPolicy", err)
	}
}

// template.yaml's RunnerPool on: the pool's queues are outputs the stack
// gives (and its services, scaling and alarms are created with it).
func TestCreate_PoolOn(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	st, err := devstack.Create(context.Background(), cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{Pool: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.PoolQueueURL == "" || st.PoolNetworkQueueURL == "" || st.Resources["PoolService"] == "" || st.Resources["PoolScaleOutPolicy"] == "" {
		t.Errorf("pool queues %q %q, resources %v; want both queues, the services and their scaling", st.PoolQueueURL, st.PoolNetworkQueueURL, st.Resources)
	}
}

// `sam deploy` reads parameter_overrides from samconfig.toml.
func TestSamconfigParameters(t *testing.T) {
	t.Parallel()
	got, err := devstack.SamconfigParameters([]byte(`version = 0.1
[default.deploy.parameters]
stack_name = "stratus"
parameter_overrides = "ImageUri=\"img:1\" WorkerCpu=2048 AlarmEmail='a b@c'"
`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[AlarmEmail:a b@c ImageUri:img:1 WorkerCpu:2048]" {
		t.Errorf("SamconfigParameters = %v", got)
	}
}

// dev aws --pool-pickup reaches the stack as its RunnerPoolPickupSeconds
// parameter (the dispatch function's STRATUS_POOL_PICKUP_SECONDS); a
// value under the template's MinValue is deployed for tests and said to
// be one AWS would refuse.
func TestCreate_PoolPickupIsTheStacksParameter(t *testing.T) {
	t.Parallel()
	cfg, name := setup(t)
	ctx := context.Background()
	st, err := devstack.Create(ctx, cfg, name, "http://127.0.0.1:9", devstack.CreateOptions{Pool: true, PoolPickupSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], `RunnerPoolPickupSeconds="2": under its MinValue 5`) {
		t.Errorf("warnings %q; want one saying RunnerPoolPickupSeconds 2 is under the template's MinValue 5", st.Warnings)
	}
	fn, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(st.Functions["DispatchFunction"])})
	if err != nil {
		t.Fatal(err)
	}
	if got := fn.Environment.Variables["STRATUS_POOL_PICKUP_SECONDS"]; got != "2" {
		t.Errorf("the dispatch function waits %q s for a pooled runner; want 2, as asked", got)
	}
}
