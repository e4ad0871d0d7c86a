package awsrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/testenv"
)

func uniqueName(t *testing.T) string {
	n := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(n) > 30 {
		n = n[len(n)-30:]
	}
	return strings.Trim(fmt.Sprintf("%s-%d", n, time.Now().UnixNano()%1e9), "-")
}

func motoConfig(t *testing.T) aws.Config {
	cfg := awstest.Moto(t).Config()
	cfg.Logger = logging.Nop{}
	return cfg
}

// The stack's outputs name the resources (template.yaml § Outputs): the
// table, the bucket, the API URL and one state machine per flow, found by
// the flow's task type in CamelCase.
func TestFromStack_ReadsTheTemplateOutputs(t *testing.T) {
	t.Parallel()
	cfg := motoConfig(t)
	ctx := context.Background()
	cf := cloudformation.NewFromConfig(cfg)
	name := uniqueName(t)
	tpl, _ := json.Marshal(map[string]any{
		"Resources": map[string]any{"Handle": map[string]any{"Type": "AWS::CloudFormation::WaitConditionHandle"}},
		"Outputs": map[string]any{
			awsrun.OutputTable:              map[string]string{"Value": "s-stratus"},
			awsrun.OutputBucket:             map[string]string{"Value": "s-data"},
			awsrun.OutputAPIURL:             map[string]string{"Value": "https://abc.execute-api.us-east-1.amazonaws.com"},
			"ImplementationStateMachineArn": map[string]string{"Value": "arn:aws:states:us-east-1:123456789012:stateMachine:impl"},
			"BugFixStateMachineArn":         map[string]string{"Value": "arn:aws:states:us-east-1:123456789012:stateMachine:bugfix"},
			"DispatchDeadLetterQueueUrl":    map[string]string{"Value": "https://sqs/dlq"},
			awsrun.OutputHeartbeatSeconds:   map[string]string{"Value": "600"},
			awsrun.OutputClaimQueueURL:      map[string]string{"Value": "https://sqs/claim"},
		},
	})
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(string(tpl))}); err != nil {
		t.Fatal(err)
	}
	r, err := awsrun.FromStack(ctx, cf, name)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stack != name || r.Table != "s-stratus" || r.Bucket != "s-data" || r.BucketPrefix != awsrun.DefaultBucketPrefix || r.APIURL == "" ||
		r.HeartbeatSeconds != 600 || // The stack's heartbeat window
		r.ClaimQueueURL != "https://sqs/claim" { // The task pool's wake
		t.Errorf("resources = %+v", r)
	}
	for taskType, want := range map[string]string{"implementation": "impl", "bug_fix": "bugfix", "bug-fix": "bugfix"} {
		if arn, err := r.StateMachineFor(taskType); err != nil || !strings.HasSuffix(arn, ":"+want) {
			t.Errorf("StateMachineFor(%s) = %s, %v; want ...:%s", taskType, arn, err, want)
		}
	}
	_, err = r.StateMachineFor("review_only")
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "ReviewOnlyStateMachineArn") || !strings.Contains(err.Error(), "ImplementationStateMachineArn") {
		t.Errorf("StateMachineFor(review_only) = %v; want ENOTFOUND naming the output it looked for and those there are", err)
	}
	// An explicit state machine runs every flow.
	r.StateMachine = "arn:aws:states:us-east-1:123456789012:stateMachine:x"
	if arn, _ := r.StateMachineFor("anything"); arn != r.StateMachine {
		t.Errorf("with StateMachine set, StateMachineFor = %s", arn)
	}
}

// A stack that does not exist is ENOTFOUND naming it; one without the
// store's outputs is not a Stratus stack (EINVALID).
func TestFromStack_MissingOrForeignStack(t *testing.T) {
	t.Parallel()
	cfg := motoConfig(t)
	ctx := context.Background()
	cf := cloudformation.NewFromConfig(cfg)
	name := uniqueName(t)
	if _, err := awsrun.FromStack(ctx, cf, name); stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), name) {
		t.Errorf("missing stack: %v; want ENOTFOUND naming %s", err, name)
	}
	tpl := `{"Resources":{"H":{"Type":"AWS::CloudFormation::WaitConditionHandle"}},"Outputs":{"Other":{"Value":"x"}}}`
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(tpl)}); err != nil {
		t.Fatal(err)
	}
	if _, err := awsrun.FromStack(ctx, cf, name); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), awsrun.OutputTable) {
		t.Errorf("foreign stack: %v; want EINVALID naming %s", err, awsrun.OutputTable)
	}
}

// The output keys FromStack reads are the ones template.yaml declares,
// and the built-in flow's state machine is found among them.
func TestOutputs_AreTheTemplates(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, outputs, ok := strings.Cut(string(b), "\nOutputs:\n")
	if !ok {
		t.Fatal("template.yaml has no Outputs section")
	}
	for _, key := range []string{awsrun.OutputTable, awsrun.OutputBucket, awsrun.OutputAPIURL, "Implementation" + awsrun.StateMachineOutputSuffix, awsrun.OutputClaimQueueURL} {
		if !regexp.MustCompile(`(?m)^  ` + key + `:$`).MatchString(outputs) {
			t.Errorf("template.yaml declares no output %s", key)
		}
	}
	if !strings.Contains(string(b), "STRATUS_BUCKET_PREFIX: "+awsrun.DefaultBucketPrefix) {
		t.Errorf("template.yaml does not give the functions STRATUS_BUCKET_PREFIX %s", awsrun.DefaultBucketPrefix)
	}
}

// Check names the flag that would have named a missing table or bucket.
func TestResources_CheckNamesTheFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r     awsrun.Resources
		field string
	}{{awsrun.Resources{Bucket: "b"}, "table"}, {awsrun.Resources{Table: "t"}, "bucket"}} {
		var se *stratus.Error
		err := c.r.Check()
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != c.field || !strings.Contains(se.Message, "--"+c.field) {
			t.Errorf("Check(%+v) = %v; want EINVALID on %s naming --%s", c.r, err, c.field, c.field)
		}
	}
}

// A task that cannot run is refused before anything is written: no
// bundle in the bucket, no run in the store, no execution.
func TestStart_RefusesABadTaskBeforeWriting(t *testing.T) {
	t.Parallel()
	cfg := motoConfig(t)
	ctx := context.Background()
	name := uniqueName(t)
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	tg, err := awsrun.Open(cfg, awsrun.Resources{Table: dynamodb.TableName(name + "-"), Bucket: name, StateMachine: "arn:aws:states:us-east-1:123456789012:stateMachine:none"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "task.md"), []byte("---\nid: t1\ntitle: T\n---\nbody\n"), 0o644)
	_, err = tg.Start(ctx, awsrun.StartOptions{Dir: dir, TaskPath: filepath.Join(dir, "task.md")})
	if code := stratus.ErrorCode(err); code != stratus.ENOTFOUND || !strings.Contains(err.Error(), "config") {
		t.Errorf("Start without an installed work dir = %v; want ENOTFOUND naming the config", err)
	}
	out, err := s3c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(name)})
	if err != nil || len(out.Contents) != 0 {
		t.Errorf("the bucket holds %d objects (%v); want none", len(out.Contents), err)
	}
}

// docs/security.md § Retention: on AWS the bucket's rule removes a run's
// files RetentionDays after they were written, while the table keeps the
// run; a resume of such a run says its files are gone and why, rather
// than failing on a missing manifest.
func TestResume_ARunWhoseFilesExpiredSaysSo(t *testing.T) {
	t.Parallel()
	cfg := motoConfig(t)
	ctx := context.Background()
	name := uniqueName(t)
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	tg, err := awsrun.Open(cfg, awsrun.Resources{Table: dynamodb.TableName(name + "-"), Bucket: name, StateMachine: "arn:aws:states:us-east-1:123456789012:stateMachine:none"})
	if err != nil {
		t.Fatal(err)
	}
	run := stratus.Run{ID: "r-20250101T000000-abcdef", TaskID: "t1", Flow: "implementation", Status: stratus.RunFailed,
		CreatedAt: time.Now().Add(-40 * 24 * time.Hour), EndedAt: time.Now().Add(-39 * 24 * time.Hour)}
	if err := tg.Store.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	_, err = tg.Resume(ctx, awsrun.ResumeOptions{RunID: run.ID})
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "no longer has its file runs/"+run.ID+"/bundle/manifest.json") ||
		!strings.Contains(err.Error(), "RetentionDays") || !strings.Contains(err.Error(), "cannot resume it") {
		t.Errorf("resume of a run whose files expired: %v; want ENOTFOUND naming the file and the retention period", err)
	}
}
