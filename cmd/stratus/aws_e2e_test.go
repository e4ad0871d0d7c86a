//go:build !slim

// The in-process --target aws tests need the AWS code: not in the slim build.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	"github.com/stratusflow/stratus/internal/launch/local"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/report"
	smsecret "github.com/stratusflow/stratus/internal/secret/secretsmanager"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
)

// The built-in implementation flow end to end on moto. What template.yaml
// deploys is made on the moto server (the store's table, the bucket, the
// dispatch queue and its DLQ, the HMAC key secret, the ECS cluster and runner
// task definition, and the state machine compiled from the flow with its
// DefinitionSubstitutions applied); `stratus run --target aws` freezes the
// run to the bucket, starts an execution and follows it, while this test
// plays Lambda and Fargate: it runs the dispatch function's handler
// (awsapp.App) on the queue's messages, serves the worker API function's
// handler on a local server, and starts each worker as a local `stratus
// runner` process after its ecs:RunTask was sent to moto (and checked).
// moto's Step Functions executes the machine for real.
//
// Asserted: the execution SUCCEEDED; the CLI printed the embedded run's
// progress lines (the same step sequence); the store's tail items; the
// ctx files in the bucket; every RunTask's overrides and network; and
// parity with the same task run by the embedded executor: the same step
// sequence, the same progress lines (durations aside) and byte-identical
// ctx files (submitted_at aside). `stratus status` then shows both runs.
//
// It measures what the per-run AWS cost estimate needs and logs it (see
// costFigures); with STRATUS_COST_OUT set it writes the figures there as
// JSON.
func TestAWS_ImplementationFlowEndToEndOnMoto(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	moto := awstest.Moto(t) // skips without moto, naming it (fails under STRATUS_REQUIRE_ALL=1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The parity run, on the embedded executor, alongside.
	embDir := installExample(t, root)
	var embProgress syncBuffer
	type embedded struct {
		res *orchestrator.Result
		err error
	}
	embDone := make(chan embedded, 1)
	go func() {
		res, err := orchestrator.Run(ctx, orchestrator.Options{Dir: embDir, TaskPath: filepath.Join(embDir, "task.md"), Self: stratusBin, Progress: &embProgress})
		embDone <- embedded{res, err}
	}()

	dir := installExample(t, root)
	st := deployStack(t, ctx, moto, dir)
	fns := startFunctions(t, ctx, st)

	// `stratus run --target aws`, in process so its requests are counted.
	cli := newOpCounter()
	useAWSForTest(t, ctx, cli)
	var out, errb syncBuffer
	start := time.Now()
	code := Main([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json",
		"--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region,
		"--state-machine", st.stateMachine, "--bucket", st.bucket, "--table-prefix", st.tablePrefix,
		"--poll-interval", "200ms"}, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	runWall := time.Since(start)
	cliOps := cli.snapshot() // before the status commands below add theirs
	checkBootstrapsSpent(t, fns)
	fns.stop()
	if code != ExitOK {
		t.Fatalf("stratus run --target aws: exit %d\nstderr:\n%s\nfunctions' log:\n%s\nrunner logs:\n%s", code, errb.String(), fns.log.String(), fns.launcher.logs())
	}
	res := decodeRun(t, out.String())
	if res.Status != stratus.RunDone || res.TaskID != "demo-greeting" || res.Flow != "implementation" {
		t.Errorf("result = %+v", res)
	}
	// The run's files are its own, under runs/<run_id>/workdir/ (README §
	// Running on AWS).
	files := "s3://" + st.bucket + "/" + runFiles(res.RunID)
	wantCtx := files + "workspace/tasks/demo-greeting/ctx"
	if res.CtxDir != wantCtx || !slices.Equal(res.Summary, []string{
		files + ".stratus/logs/demo-greeting/summary.json", files + ".stratus/logs/demo-greeting/summary.md"}) {
		t.Errorf("ctx dir %s, summary %v; want %s and the summary under %s.stratus/logs/demo-greeting/", res.CtxDir, res.Summary, wantCtx, files)
	}
	if got := join(steps(errb.String())); got != exampleSteps {
		t.Errorf("the CLI's progress lines give the steps\n got %s\nwant %s\nstderr:\n%s", got, exampleSteps, errb.String())
	}

	// The execution, as Step Functions has it.
	run, err := st.store.GetRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	sfnc := awssfn.NewFromConfig(st.cfg)
	x, err := sfnc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(run.Execution)})
	if err != nil || x.Status != "SUCCEEDED" || aws.ToString(x.Name) != run.ID {
		t.Fatalf("execution %s: %v %v (name %s); want SUCCEEDED, named by the run id", run.Execution, x.Status, err, aws.ToString(x.Name))
	}
	if run.Status != stratus.RunDone || run.EndedAt.IsZero() {
		t.Errorf("the store's run record: status %s, ended %v; want done with an end", run.Status, run.EndedAt)
	}

	// The store: the step sequence, and each worker step's tail (its Final
	// and final marker; planning also staged plan.md).
	stored, err := st.store.ListSteps(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	stepOf := map[string]stratus.Step{}
	for _, s := range stored {
		stepOf[s.TID] = s
		if s.Kind != report.Kind {
			seq = append(seq, s.StepRef+":"+s.Verdict)
		}
	}
	if got := join(seq); got != exampleSteps {
		t.Errorf("the store's steps\n got %s\nwant %s", got, exampleSteps)
	}
	for _, s := range stored {
		if s.Kind == flow.KindPublish || s.Kind == report.Kind {
			continue
		}
		kinds := st.tail(t, ctx, s.TID)
		want := []string{"marker", stratus.OutputFinal} // final#1 sorts before output#1#...
		if s.Node == "planning" {
			want = []string{"marker", stratus.OutputArtifact, stratus.OutputFinal}
		}
		if !slices.Equal(kinds, want) {
			t.Errorf("tail items of %s (%s) = %v; want %v", s.StepRef, s.TID, kinds, want)
		}
	}

	// The bucket: the ctx files under the prefix, the run's bundle and the
	// rendered prompts; parity with the embedded run's ctx dir.
	e := <-embDone
	if e.err != nil || e.res.Status != stratus.RunDone {
		t.Fatalf("embedded run: %+v %v\n%s", e.res, e.err, embProgress.String())
	}
	awsCtx := st.objects(t, ctx, runFiles(run.ID)+"workspace/tasks/demo-greeting/ctx/")
	embCtx := dirFiles(t, e.res.CtxDir)
	delete(embCtx, orchestrator.CtxMarker) // the embedded ctx dir's marker of ownership (a directory's, not a projection)
	if !slices.Equal(sortedKeys(awsCtx), sortedKeys(embCtx)) {
		t.Errorf("ctx files\n on AWS %v\nembedded %v", sortedKeys(awsCtx), sortedKeys(embCtx))
	}
	for name, b := range embCtx {
		if a, ok := awsCtx[name]; ok && stripSubmittedAt(a) != stripSubmittedAt(b) {
			t.Errorf("ctx file %s differs (submitted_at aside):\n on AWS %q\nembedded %q", name, a, b)
		}
	}
	if want := []string{"fixing.md", "implementation.md", "plan.md", "planning.md", "review.md"}; !slices.Equal(sortedKeys(awsCtx), want) {
		t.Errorf("ctx files on AWS %v; want %v", sortedKeys(awsCtx), want)
	}
	for _, key := range []string{"stratus/runs/" + run.ID + "/bundle/manifest.json", "stratus/runs/" + run.ID + "/bundle/flows/implementation.yaml",
		runFiles(run.ID) + ".stratus/logs/demo-greeting/stages/fixing/run-000001/rendered-prompt.md", runFiles(run.ID) + ".stratus/logs/demo-greeting/summary.md"} {
		if _, err := st.s3.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)}); err != nil {
			t.Errorf("no s3://%s/%s: %v", st.bucket, key, err)
		}
	}
	embSteps := join(steps(embProgress.String()))
	if embSteps != exampleSteps {
		t.Errorf("embedded steps %s; want %s", embSteps, exampleSteps)
	}
	if a, b := stepLines(errb.String()), stepLines(embProgress.String()); !slices.Equal(a, b) {
		t.Errorf("progress lines differ (durations aside)\n on AWS:   %s\nembedded: %s", strings.Join(a, "\n          "), strings.Join(b, "\n          "))
	}

	// ecs:RunTask went to moto for every worker, with the handle, API URL
	// and task id as overrides and the network of the node's access.
	launches := fns.launcher.launched()
	if len(launches) != 7 { // 5 flow steps run a worker, and 2 supervisor turns
		t.Errorf("%d workers launched; want 7", len(launches))
	}
	for _, l := range launches {
		fns.checkRunTask(t, l)
	}

	// `stratus status` on both targets, and the stack found by name.
	stackName := st.createStack(t, ctx)
	for _, args := range [][]string{
		{"status", run.ID, "--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--bucket", st.bucket, "--table-prefix", st.tablePrefix},
		{"status", run.ID, "--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--stack", stackName},
		{"status", e.res.Run.ID, "--dir", embDir},
	} {
		r := mainOut(args...)
		if r.code != ExitOK {
			t.Errorf("%v: exit %d %s", args, r.code, r.stderr)
			continue
		}
		for _, want := range []string{"run " + args[1] + ": done", "planning#1", "review#1         review         rework", "review#2         review         accept", "publish#1", "summary:  "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v does not show %q:\n%s", args, want, r.stdout)
			}
		}
	}
	if r := mainOut("status", run.ID, "--json", "--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--stack", stackName); r.code == ExitOK {
		var sr StatusResult
		if err := json.Unmarshal([]byte(r.stdout), &sr); err != nil || sr.Execution == nil || sr.Execution.Status != "SUCCEEDED" || len(sr.Steps) != 8 ||
			!slices.Contains(sr.Summary, "s3://"+st.bucket+"/"+runFiles(run.ID)+".stratus/logs/demo-greeting/summary.md") {
			t.Errorf("status --json = %s (%v); want the execution SUCCEEDED, 8 steps (6 and 2 supervisor turns), the summary in the bucket", r.stdout, err)
		}
	}

	figures := st.measure(t, ctx, run, fns, cliOps, stepOf, runWall)
	figures.log(t)
	if p := os.Getenv("STRATUS_COST_OUT"); p != "" {
		b, _ := json.MarshalIndent(figures, "", "  ")
		if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
			t.Errorf("STRATUS_COST_OUT: %v", err)
		}
	}
}

// A run that fails on AWS ends as it does embedded (exit codes as embedded):
// planning's engine fails, its state's Catch sends the stop message, which
// the dispatch function handles, and the execution ends FAILED; `stratus run
// --target aws` exits 1 with the same progress lines as the embedded run of
// the task, and records the run failed. Not parallel: it sets the CLI's AWS
// hooks, which the other end to end test sets too (parallel tests run after
// this one).
func TestAWS_FailedRunExitsAsEmbeddedOnMoto(t *testing.T) {
	moto := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, "nodes:\n  planning:\n    - fail: the model refused\ndefault:\n  report: ok\n")
	embDir, dir := installTask(t, scenario, exampleTask(t)), installTask(t, scenario, exampleTask(t))
	emb := runCLI(t, "run", filepath.Join(embDir, "task.md"), "--dir", embDir)

	st := deployStack(t, ctx, moto, dir)
	fns := startFunctions(t, ctx, st)
	useAWSForTest(t, ctx, newOpCounter())
	r := mainOut("run", filepath.Join(dir, "task.md"), "--dir", dir, "--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region,
		"--state-machine", st.stateMachine, "--bucket", st.bucket, "--table-prefix", st.tablePrefix, "--poll-interval", "200ms")
	fns.stop()
	if emb.code != ExitFailed || r.code != emb.code {
		t.Fatalf("exit %d on AWS, %d embedded; want %d both\nAWS stderr:\n%s\nembedded stderr:\n%s", r.code, emb.code, ExitFailed, r.stderr, emb.stderr)
	}
	if a, b := stepLines(r.stderr), stepLines(emb.stderr); !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("progress lines differ (durations aside)\n on AWS:   %s\nembedded: %s", strings.Join(a, "\n          "), strings.Join(b, "\n          "))
	}
	if !strings.Contains(r.stdout, ": failed\n") || !strings.Contains(r.stdout, "why:      planning#1 failed: the model refused") {
		t.Errorf("stdout %q; want the run failed and why", r.stdout)
	}
	runID := strings.TrimSuffix(strings.Fields(r.stdout)[1], ":")
	run, err := st.store.GetRun(ctx, runID)
	if err != nil || run.Status != stratus.RunFailed {
		t.Errorf("the store's run %s: %+v %v; want failed", runID, run, err)
	}
	// docs/architecture.md § The run lifecycle: one owner of a run's end —
	// the AWS summary says why the run stopped as the embedded one does, from
	// the execution's history. An embedded step's failure also names its
	// runner's local log (on AWS the log is CloudWatch's): that tail aside,
	// the same words.
	noLog := func(s string) string {
		s, _, _ = strings.Cut(s, "; log: ")
		s, _, _ = strings.Cut(s, " (log: ")
		return strings.TrimSuffix(s, ".")
	}
	why := func(md string) string {
		_, rest, _ := strings.Cut(md, "## Why the run stopped\n\n")
		line, _, _ := strings.Cut(rest, "\n")
		return noLog(line)
	}
	awsMD := st.objects(t, ctx, runFiles(runID)+".stratus/logs/")["demo-greeting/summary.md"]
	embMD := readFile(t, filepath.Join(embDir, ".stratus/logs/demo-greeting/summary.md"))
	if w := why(awsMD); w == "" || w != why(embMD) {
		t.Errorf("why the run stopped\n on AWS:   %q\nembedded: %q", w, why(embMD))
	}
	whyLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  why:") {
				return noLog(l)
			}
		}
		return ""
	}
	if a, b := whyLine(r.stdout), whyLine(emb.stdout); a == "" || a != b {
		t.Errorf("the why line\n on AWS:   %q\nembedded: %q", a, b)
	}
	// The stop message reached the dispatch function.
	fns.mu.Lock()
	inv := slices.Clone(fns.invocations)
	fns.mu.Unlock()
	if !slices.ContainsFunc(inv, func(i invocation) bool { return i.What == compiler.KindStop+" planning" }) {
		t.Errorf("dispatch handled %v; want the stop of planning", inv)
	}
}

// `stratus run --target aws` and `stratus status --target aws` refuse what
// cannot name a stack before calling AWS; AWS flags need --target aws.
func TestRunTargetAWS_BadFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "t.md", "--target", "gcp"}, `--target "gcp" is not valid`},
		{[]string{"run", "t.md", "--stack", "s"}, "--stack needs --target aws"},
		{[]string{"status", "r-1", "--bucket", "b"}, "--bucket needs --target aws"},
		{[]string{"run", "t.md", "--target", "aws", "--endpoint-url", "http://127.0.0.1:1", "--table", "t", "--table-prefix", "p"}, "not both"},
		{[]string{"status", "r-1", "--target", "aws", "--endpoint-url", "http://127.0.0.1:1", "--bucket", "b"}, "--table NAME"},
	} {
		r := runCLI(t, c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d %q; want %d and %q", c.args, r.code, r.stderr, ExitUsage, c.want)
		}
	}
}

// `stratus status RUN` of a run the dir never saw is a usage error naming
// what is missing.
func TestStatus_UnknownRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "status", "r-nope", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "no run was made in") {
		t.Errorf("status in an empty dir: %d %s", r.code, r.stderr)
	}
}

// ---- the stack on moto --------------------------------------------------

// stack is what template.yaml would have deployed, made on moto under
// names unique to the test.
type stack struct {
	cfg          aws.Config
	name         string
	tablePrefix  string
	table        string
	bucket       string
	queueURL     string
	secretARN    string
	stateMachine string
	cluster      string
	taskDef      string
	cpu, memory  int // the runner task definition's size: template.yaml's WorkerCpu / WorkerMemory defaults
	lambdaMB     int // template.yaml's Globals MemorySize

	store *dynamodb.Store
	s3    *awss3.Client
	ddb   *awsdynamodb.Client
}

func deployStack(t *testing.T, ctx context.Context, moto *awstest.Server, dir string) *stack {
	t.Helper()
	tpl := readFile(t, filepath.Join(testenv.ModuleRoot(t), "template.yaml"))
	cfg0 := moto.Config()
	cfg0.Logger = logging.Nop{} // moto's answers carry no checksums; the SDK would say so on stderr
	st := &stack{cfg: cfg0, name: fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1e12),
		cpu: templateDefault(t, tpl, "WorkerCpu"), memory: templateDefault(t, tpl, "WorkerMemory"), lambdaMB: templateInt(t, tpl, `MemorySize: (\d+)`)}
	st.tablePrefix, st.bucket = st.name+"-", st.name
	st.table = dynamodb.TableName(st.tablePrefix)
	st.ddb = awsdynamodb.NewFromConfig(st.cfg)
	if err := dynamodb.CreateTables(ctx, st.ddb, st.tablePrefix); err != nil {
		t.Fatal(err)
	}
	st.s3 = awss3.NewFromConfig(st.cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := st.s3.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(st.bucket)}); err != nil {
		t.Fatal(err)
	}
	q := sqs.NewFromConfig(st.cfg)
	dlq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(st.name + "-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	dlqAttrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqAttrs.Attributes["QueueArn"], "maxReceiveCount": "5"})
	dq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(st.name + "-dispatch"),
		Attributes: map[string]string{"VisibilityTimeout": "720", "RedrivePolicy": string(redrive)}})
	if err != nil {
		t.Fatal(err)
	}
	st.queueURL = aws.ToString(dq.QueueUrl)
	if st.secretARN, err = smsecret.CreateKeySecret(ctx, awssm.NewFromConfig(st.cfg), st.name+"-hmac"); err != nil {
		t.Fatal(err)
	}

	// ECS: template.yaml's task definition is awsvpc; moto 5.2.1's RunTask
	// fails on one, so the runner's is bridge here (internal/launch/ecs
	// checks the awsvpc request itself), with the template's size.
	ecsc := awsecs.NewFromConfig(st.cfg)
	cl, err := ecsc.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(st.name)})
	if err != nil {
		t.Fatal(err)
	}
	st.cluster = aws.ToString(cl.Cluster.ClusterArn)
	st.taskDef = st.name + "-runner"
	_, err = ecsc.RegisterTaskDefinition(ctx, &awsecs.RegisterTaskDefinitionInput{
		Family: aws.String(st.taskDef), NetworkMode: ecstypes.NetworkModeBridge,
		Cpu: aws.String(fmt.Sprint(st.cpu)), Memory: aws.String(fmt.Sprint(st.memory)),
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String(ecs.DefaultContainer), Image: aws.String("stratus-runner:e2e"), Memory: aws.Int32(int32(st.memory))}},
	})
	if err != nil {
		t.Fatal(err)
	}

	// The state machine of the flow the work dir runs, compiled as an
	// embedded run compiles it, with the template's DefinitionSubstitutions
	// applied (moto does not apply them).
	cfg, err := config.Load(filepath.Join(dir, ".stratus/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := flow.Load(filepath.Join(dir, ".stratus/flows"), "implementation")
	if err != nil {
		t.Fatal(err)
	}
	def, err := compiler.Compile(fl, compiler.Options{HITLTimeoutSeconds: cfg.HITL.TimeoutSeconds, MaxFixCycles: cfg.Agents.MaxFixCycles})
	if err != nil {
		t.Fatal(err)
	}
	sub := strings.ReplaceAll(string(def), "${DispatchQueueUrl}", st.queueURL)
	if i := strings.Index(sub, "${"); i >= 0 {
		t.Fatalf("the compiled definition has a substitution template.yaml does not define: %.40s", sub[i:])
	}
	sm, err := awssfn.NewFromConfig(st.cfg).CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String(st.name + "-implementation"),
		Definition: aws.String(sub), RoleArn: aws.String(e2eRole)})
	if err != nil {
		t.Fatal(err)
	}
	st.stateMachine = aws.ToString(sm.StateMachineArn)
	blobs, err := s3sink.New(st.s3, st.bucket, "stratus/")
	if err != nil {
		t.Fatal(err)
	}
	if st.store, err = dynamodb.New(st.ddb, dynamodb.Options{Table: st.table, Blobs: blobs}); err != nil {
		t.Fatal(err)
	}
	return st
}

// e2eRole is the execution role of the test stacks' state machines.
const e2eRole = "arn:aws:iam::123456789012:role/stratus-e2e"

// createStack makes a CloudFormation stack on moto whose outputs name the
// resources as template.yaml's do, for --stack.
func (st *stack) createStack(t *testing.T, ctx context.Context) string {
	t.Helper()
	tpl, _ := json.Marshal(map[string]any{
		"Resources": map[string]any{"Handle": map[string]any{"Type": "AWS::CloudFormation::WaitConditionHandle"}},
		"Outputs": map[string]any{
			awsrun.OutputTable:  map[string]string{"Value": st.table},
			awsrun.OutputBucket: map[string]string{"Value": st.bucket},
			"Implementation" + awsrun.StateMachineOutputSuffix: map[string]string{"Value": st.stateMachine},
			// What lets a run create the state machine of its own flow.
			awsrun.OutputQueueURL:           map[string]string{"Value": st.queueURL},
			awsrun.OutputStateMachineRole:   map[string]string{"Value": e2eRole},
			awsrun.OutputStateMachinePrefix: map[string]string{"Value": st.name + "-"},
		},
	})
	name := st.name + "-stack"
	if _, err := cloudformation.NewFromConfig(st.cfg).CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(string(tpl))}); err != nil {
		t.Fatal(err)
	}
	return name
}

// tail returns the kinds of a step's attempt-1 tail items in sort-key
// order, "marker" for its final marker.
func (st *stack) tail(t *testing.T, ctx context.Context, tid string) []string {
	t.Helper()
	out, err := st.ddb.Query(ctx, &awsdynamodb.QueryInput{TableName: aws.String(st.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: "task#" + tid}}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range out.Items {
		sk := it["sk"].(*ddbtypes.AttributeValueMemberS).Value
		switch {
		case strings.HasPrefix(sk, "output#0000000001#"):
			k, _ := it["kind"].(*ddbtypes.AttributeValueMemberS)
			if k == nil {
				t.Fatalf("tail item %s of %s has no string kind: %v", sk, tid, it)
			}
			kinds = append(kinds, k.Value)
		case sk == "final#0000000001":
			kinds = append(kinds, "marker")
		}
	}
	return kinds
}

// runFiles is the object-key prefix of run runID's work-dir files in a
// test stack's bucket: its ctx dir, logs and summary (sink.ForRun under
// the functions' prefix, stratus/).
func runFiles(runID string) string { return "stratus/runs/" + runID + "/workdir/" }

// objects returns the objects under prefix, by key relative to it.
func (st *stack) objects(t *testing.T, ctx context.Context, prefix string) map[string]string {
	t.Helper()
	out, err := st.s3.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(st.bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, o := range out.Contents {
		g, err := st.s3.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(st.bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(g.Body)
		g.Body.Close()
		m[strings.TrimPrefix(aws.ToString(o.Key), prefix)] = string(b)
	}
	return m
}

// ---- the functions, played in process -------------------------------------

// functions are the two Lambda functions over the stack and the ECS
// stand-in: the dispatch function polling the queue, the worker API
// served on a local server (one request at a time, as one function
// instance serves them), and a launcher that calls ecs:RunTask on moto,
// then starts the worker as a local process.
type functions struct {
	st       *stack
	dispatch *awsapp.App
	api      *awsapp.App
	apiURL   string
	handler  http.Handler // the worker API function's
	serving  sync.Mutex   // one request at a time
	srv      *httptest.Server
	launcher *ecsThenLocal
	log      syncBuffer

	dispatchOps, apiOps, ecsOps *opCounter
	cancel                      context.CancelFunc
	done                        chan struct{}
	stopOnce                    sync.Once

	mu          sync.Mutex
	invocations []invocation // dispatch messages handled
	requests    []invocation // worker API requests served
	errs        []string
}

type invocation struct {
	What string
	Wall time.Duration
}

func startFunctions(t *testing.T, ctx context.Context, st *stack) *functions {
	t.Helper()
	f := &functions{st: st, dispatchOps: newOpCounter(), apiOps: newOpCounter(), ecsOps: newOpCounter(), done: make(chan struct{})}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.apiURL = "http://" + f.srv.Listener.Addr().String()
	ecsCfg := st.cfg.Copy()
	rec := &ecsRecorder{}
	ecsCfg.HTTPClient = &awstest.ECSClient{RunTask: rec.record}
	ecsCfg.APIOptions = append(ecsCfg.APIOptions, f.ecsOps.option())
	el, err := ecs.New(awsecs.NewFromConfig(ecsCfg), ecs.Config{Cluster: st.cluster, TaskDefinition: st.taskDef,
		Offline: ecs.NetworkProfile{Subnets: []string{"subnet-offline"}, SecurityGroups: []string{"sg-offline"}},
		Online:  ecs.NetworkProfile{Subnets: []string{"subnet-online"}, SecurityGroups: []string{"sg-online"}},
		Retry:   ecs.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	f.launcher = &ecsThenLocal{ecs: el, rec: rec, local: &local.Launcher{Executable: stratusBin}, logDir: t.TempDir()}
	env := map[string]string{
		awsapp.EnvTable: st.table, awsapp.EnvBucket: st.bucket, awsapp.EnvBucketPrefix: "stratus/",
		awsapp.EnvQueueURL: st.queueURL, awsapp.EnvSecretID: st.secretARN, awsapp.EnvAPIURL: f.apiURL,
	}
	cfg, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	app := func(ops *opCounter) *awsapp.App {
		c := st.cfg.Copy()
		c.APIOptions = append(c.APIOptions, ops.option())
		a, err := awsapp.New(ctx, cfg, c, awsapp.Options{Launcher: f.launcher, Log: &f.log, Commits: bundlecheck.Checker{}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	f.dispatch, f.api = app(f.dispatchOps), app(f.apiOps)
	f.handler = f.api.HTTPHandler()
	f.srv.Start()
	lctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	go f.poll(lctx)
	t.Cleanup(func() { f.stop(); f.launcher.local.StopAll("") })
	return f
}

// serve is the worker API function: one request at a time, its
// background work drained before it answers (functions/handler.HTTPAPI).
func (f *functions) serve(w http.ResponseWriter, r *http.Request) {
	f.serving.Lock()
	defer f.serving.Unlock()
	start := time.Now()
	f.handler.ServeHTTP(w, r)
	f.api.Drain()
	f.mu.Lock()
	f.requests = append(f.requests, invocation{r.Method + " " + r.URL.Path, time.Since(start)})
	f.mu.Unlock()
}

// poll is the dispatch function's event source: each message received is
// one invocation; a message whose handling failed is left for
// redelivery and recorded as an error.
func (f *functions) poll(ctx context.Context) {
	defer close(f.done)
	q := sqs.NewFromConfig(f.st.cfg)
	for ctx.Err() == nil {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.st.queueURL), MaxNumberOfMessages: 5, WaitTimeSeconds: 1})
		if err != nil {
			if ctx.Err() == nil {
				f.errorf("ReceiveMessage: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, m := range out.Messages {
			var msg struct{ Node, Kind string }
			json.Unmarshal([]byte(aws.ToString(m.Body)), &msg)
			start := time.Now()
			err := f.dispatch.HandleMessage(ctx, aws.ToString(m.Body))
			f.dispatch.Drain()
			f.mu.Lock()
			f.invocations = append(f.invocations, invocation{msg.Kind + " " + msg.Node, time.Since(start)})
			f.mu.Unlock()
			if err != nil {
				f.errorf("dispatch %s: %v", aws.ToString(m.Body), err)
				continue
			}
			q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.st.queueURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

func (f *functions) errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// stop waits (a minute at most) for the workers still running to exit —
// a supervisor observation may outlive the execution, and it needs the
// worker API to submit — then ends the dispatch loop and the server.
func (f *functions) stop() { f.stopOnce.Do(f.stopNow) }

func (f *functions) stopNow() {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && slices.ContainsFunc(f.launcher.launched(), func(l workerLaunch) bool { return l.End.IsZero() }) {
		time.Sleep(50 * time.Millisecond)
	}
	f.cancel()
	<-f.done
	f.srv.Close()
}

// checkRunTask checks the RunTask request of one launch.
func (f *functions) checkRunTask(t *testing.T, l workerLaunch) {
	t.Helper()
	var req struct {
		Cluster, TaskDefinition, LaunchType, StartedBy string
		Count                                          int
		NetworkConfiguration                           struct {
			AwsvpcConfiguration struct {
				Subnets, SecurityGroups []string
				AssignPublicIP          string `json:"assignPublicIp"`
			}
		}
		Overrides struct {
			ContainerOverrides []struct {
				Name        string
				Environment []struct{ Name, Value string }
			}
		}
	}
	body := f.launcher.rec.request(l.Spec.Handle)
	if err := json.Unmarshal(body, &req); err != nil {
		t.Errorf("RunTask of %s: %v (%s)", l.Spec.TaskID, err, body)
		return
	}
	subnets, sgs := []string{"subnet-offline"}, []string{"sg-offline"}
	if l.Spec.NetworkAccess {
		subnets, sgs = []string{"subnet-online"}, []string{"sg-online"}
	}
	vpc := req.NetworkConfiguration.AwsvpcConfiguration
	if req.Cluster != f.st.cluster || req.TaskDefinition != f.st.taskDef || req.LaunchType != "FARGATE" || req.Count != 1 ||
		req.StartedBy != ecs.StartedBy(l.Spec.TaskID) || !slices.Equal(vpc.Subnets, subnets) || !slices.Equal(vpc.SecurityGroups, sgs) || vpc.AssignPublicIP != "DISABLED" {
		t.Errorf("RunTask of %s = %s; want cluster %s, task definition %s, FARGATE, subnets %v and %v", l.Spec.TaskID, body, f.st.cluster, f.st.taskDef, subnets, sgs)
	}
	var env []string
	for _, c := range req.Overrides.ContainerOverrides {
		if c.Name != ecs.DefaultContainer {
			t.Errorf("RunTask of %s overrides container %q; want %q", l.Spec.TaskID, c.Name, ecs.DefaultContainer)
		}
		for _, kv := range c.Environment {
			env = append(env, kv.Name+"="+kv.Value)
		}
	}
	want := []string{launch.EnvAPIURL + "=" + f.apiURL, launch.EnvHandle + "=" + l.Spec.Handle, launch.EnvTaskID + "=" + l.Spec.TaskID,
		launch.EnvAttempt + "=" + fmt.Sprint(l.Spec.Attempt)}
	if !slices.Equal(env, want) {
		t.Errorf("RunTask of %s: environment overrides %v; want %v (and never the task token or a credential)", l.Spec.TaskID, env, want)
	}
	if !strings.HasPrefix(l.ARN, "arn:aws:ecs:") {
		t.Errorf("RunTask of %s answered task %q", l.Spec.TaskID, l.ARN)
	}
	// docs/security.md § Handles: what RunTask carried (ecs:DescribeTasks,
	// CloudTrail) is a one-time bootstrap value, worthless once the worker
	// started.
	if !strings.HasPrefix(l.Spec.Handle, captoken.BootstrapPrefix) {
		t.Errorf("RunTask of %s carries %q; want a one-time %s… bootstrap value, never the handle", l.Spec.TaskID, l.Spec.Handle, captoken.BootstrapPrefix)
	}
}

// checkBootstrapsSpent tries, while the worker API still serves, the value
// each RunTask carried: a one-time bootstrap value its worker exchanged
// when it started, so every use is a 401 (docs/security.md § Handles).
func checkBootstrapsSpent(t *testing.T, f *functions) {
	t.Helper()
	f.launcher.mu.Lock()
	runs := slices.Clone(f.launcher.runs)
	f.launcher.mu.Unlock()
	for _, l := range runs {
		for _, c := range []struct{ method, path string }{{"POST", "/v1/worker/bootstrap"}, {"GET", "/v1/worker/prompt?task_id=" + l.Spec.TaskID}} {
			req, _ := http.NewRequest(c.method, f.apiURL+c.path, nil)
			req.Header.Set("Authorization", "Bearer "+l.Spec.Handle)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("%s %s: %v", c.method, c.path, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with the value RunTask carried for %s: %d; want 401 (it was exchanged when the worker started)", c.method, c.path, l.Spec.TaskID, resp.StatusCode)
			}
		}
	}
}

// ecsThenLocal is the Fargate stand-in: ecs:RunTask goes to moto (which
// starts nothing), then the worker runs as a local `stratus runner`.
type ecsThenLocal struct {
	ecs    *ecs.Launcher
	rec    *ecsRecorder
	local  *local.Launcher
	logDir string

	mu   sync.Mutex
	runs []workerLaunch
	ids  map[string]string // local id -> task ARN
}

type workerLaunch struct {
	Spec       launch.Spec
	ARN        string
	Start, End time.Time
}

func (l *ecsThenLocal) Launch(ctx context.Context, s launch.Spec) (string, error) {
	arn, err := l.ecs.Launch(ctx, s)
	if err != nil {
		return "", err
	}
	if s.LogPath == "" {
		s.LogPath = filepath.Join(l.logDir, fmt.Sprintf("%s-%d.log", s.TaskID, s.Attempt))
	}
	l.mu.Lock()
	i := len(l.runs)
	l.runs = append(l.runs, workerLaunch{Spec: s, ARN: arn, Start: time.Now()})
	l.mu.Unlock()
	exit := s.OnExit
	s.OnExit = func(err error) {
		l.mu.Lock()
		l.runs[i].End = time.Now()
		l.mu.Unlock()
		if exit != nil {
			exit(err)
		}
	}
	id, err := l.local.Launch(ctx, s)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	if l.ids == nil {
		l.ids = map[string]string{}
	}
	l.ids[id] = arn
	l.mu.Unlock()
	return id, nil
}

func (l *ecsThenLocal) Stop(ctx context.Context, id string) error {
	l.mu.Lock()
	arn := l.ids[id]
	l.mu.Unlock()
	if arn != "" {
		l.ecs.Stop(ctx, arn)
	}
	return l.local.Stop(ctx, id)
}

func (l *ecsThenLocal) launched() []workerLaunch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

func (l *ecsThenLocal) logs() string {
	var b strings.Builder
	for _, r := range l.launched() {
		data, _ := os.ReadFile(r.Spec.LogPath)
		fmt.Fprintf(&b, "--- %s\n%s", r.Spec.TaskID, data)
	}
	return b.String()
}

// ecsRecorder keeps each RunTask request body sent through an
// awstest.ECSClient (record is its RunTask hook) by the handle it carries.
type ecsRecorder struct {
	mu   sync.Mutex
	reqs map[string][]byte // handle -> RunTask body
}

func (r *ecsRecorder) record(b []byte) {
	var in struct {
		Overrides struct {
			ContainerOverrides []struct {
				Environment []struct{ Name, Value string }
			}
		}
	}
	json.Unmarshal(b, &in)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reqs == nil {
		r.reqs = map[string][]byte{}
	}
	for _, c := range in.Overrides.ContainerOverrides {
		for _, kv := range c.Environment {
			if kv.Name == launch.EnvHandle {
				r.reqs[kv.Value] = b
			}
		}
	}
}

func (r *ecsRecorder) request(handle string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[handle]
}

// ---- counting requests ----------------------------------------------------

// opCounter counts SDK operations by "Service.Operation" (one per call,
// not per retry), under a source name.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func newOpCounter() *opCounter { return &opCounter{ops: map[string]int{}} }

// option is an APIOptions entry counting every operation of a client.
func (c *opCounter) option() func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("stratusCount", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, metadata, error) {
			c.mu.Lock()
			c.ops[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

type metadata = middleware.Metadata

func (c *opCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.ops {
		m[k] = v
	}
	return m
}

// useAWSForTest makes the CLI's AWS configuration moto's credentials plus
// cli's counting, and its commands' context ctx, for the rest of the test.
func useAWSForTest(t *testing.T, ctx context.Context, cli *opCounter) {
	awsConfigHook = func(c *aws.Config) {
		c.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
		c.Logger = logging.Nop{}
		c.APIOptions = append(c.APIOptions, cli.option())
	}
	awsContext = func() context.Context { return ctx }
	t.Cleanup(func() { awsConfigHook, awsContext = nil, context.Background })
}

// mainOut runs Main in process (its AWS configuration is the test's).
func mainOut(args ...string) result {
	var out, errb syncBuffer
	code := Main(args, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return result{code, out.String(), errb.String()}
}

var (
	durationField = regexp.MustCompile(` duration=\S+`)
	// The embedded runner's log tail and path (on AWS the log is
	// CloudWatch's): the same words without them.
	runnerLogTail = regexp.MustCompile(`(; log: .*| \(log: [^)]*\))"$`)
)

// stepLines are a run's start and end lines, durations masked and a
// failure reason's tail of the local runner log cut (an embedded run's
// workers log to .stratus/logs; an ECS task's log is in CloudWatch).
func stepLines(progress string) []string {
	var out []string
	for _, l := range strings.Split(progress, "\n") {
		if strings.HasPrefix(l, "stratus: start ") || strings.HasPrefix(l, "stratus: end ") {
			l = durationField.ReplaceAllString(l, " duration=…")
			out = append(out, runnerLogTail.ReplaceAllString(l, `"`))
		}
	}
	return out
}

// dirFiles reads every file under dir, by slash path relative to it.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// templateDefault is the number a template.yaml parameter defaults to.
func templateDefault(t *testing.T, tpl, param string) int {
	t.Helper()
	return templateInt(t, tpl, `(?m)^  `+param+`:\n(?:    .*\n)*?    Default: "?(\d+)"?`)
}

func templateInt(t *testing.T, tpl, pattern string) int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(tpl)
	if m == nil {
		t.Fatalf("template.yaml has no %s", pattern)
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}
