package awsapp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	"github.com/stratusflow/stratus/internal/runenv"
	smsecret "github.com/stratusflow/stratus/internal/secret/secretsmanager"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// launcher records worker specs instead of starting tasks; fail, when set,
// is what every Launch answers.
type launcher struct {
	mu    sync.Mutex
	specs []launch.Spec
	fail  error
}

func (l *launcher) Launch(_ context.Context, s launch.Spec) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return "", l.fail
	}
	l.specs = append(l.specs, s)
	return "arn:aws:ecs:us-east-1:123456789012:task/c/" + s.Handle, nil
}
func (l *launcher) Stop(context.Context, string) error { return nil }

func (l *launcher) launched() []launch.Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.specs)
}

// tokens records task-token failures and successes.
type tokens struct {
	mu        sync.Mutex
	failures  map[string]string // token -> error name
	successes map[string]bool
}

func (t *tokens) SendTaskSuccess(_ context.Context, tok string, _ json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.successes == nil {
		t.successes = map[string]bool{}
	}
	t.successes[tok] = true
	return nil
}

func (t *tokens) succeeded(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.successes[tok]
}
func (t *tokens) SendTaskFailure(_ context.Context, tok, name, _ string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures[tok] = name
	return nil
}
func (t *tokens) SendTaskHeartbeat(context.Context, string) error { return nil }

func (t *tokens) failure(tok string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failures[tok]
}

// stack is what template.yaml would have deployed, made on moto with
// names unique to the test: the store's table, the data bucket and the
// HMAC key secret; env is the functions' environment for it.
type stack struct {
	aws aws.Config
	env map[string]string
}

var unsafe = regexp.MustCompile(`[^a-z0-9-]+`)

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	cfg := awstest.Moto(t).Config()
	b := make([]byte, 3)
	rand.Read(b)
	name := strings.Trim(unsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	name += "-" + hex.EncodeToString(b)
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	arn, err := smsecret.CreateKeySecret(ctx, awssm.NewFromConfig(cfg), name)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{aws: cfg, env: map[string]string{
		awsapp.EnvTable:          dynamodb.TableName(name + "-"),
		awsapp.EnvBucket:         name,
		awsapp.EnvBucketPrefix:   "stratus/",
		awsapp.EnvSecretID:       arn,
		awsapp.EnvCluster:        "arn:aws:ecs:us-east-1:123456789012:cluster/" + name,
		awsapp.EnvTaskDefinition: name + "-runner",
		awsapp.EnvSubnets:        "subnet-0a,subnet-0b",
		awsapp.EnvSecurityGroups: "sg-0a",
	}}
}

// app builds an App from the stack's environment with extra variables.
func (s *stack) app(t *testing.T, o awsapp.Options, extra ...string) *awsapp.App {
	t.Helper()
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	cfg, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	a, err := awsapp.New(context.Background(), cfg, s.aws, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startRun freezes a run of the built-in implementation flow into the
// app's bucket (as `stratus run --target aws` does before it starts the
// execution) and records it in the store.
func startRun(t *testing.T, a *awsapp.App, runID string) stratus.Run {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	flows := filepath.Join(dir, worker.StateDirName, "flows")
	err := iofs.WalkDir(builtin.Flows, "flows", func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := builtin.Flows.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("flows", p)
		os.MkdirAll(filepath.Dir(filepath.Join(flows, rel)), 0o755)
		return os.WriteFile(filepath.Join(flows, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	taskPath := filepath.Join(dir, "t1.md")
	os.WriteFile(taskPath, []byte("---\nid: t1\ntitle: A task\n---\n## Description\n\nDo it.\n"), 0o644)
	c := config.Default()
	c.Supervisor.Enabled = new(bool) // no observation turns: one launch per dispatch
	cfgYAML, err := config.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runenv.Freeze(ctx, a.Sink, runID, dir, flows, taskPath, cfgYAML); err != nil {
		t.Fatal(err)
	}
	run := stratus.Run{ID: runID, TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, CreatedAt: time.Now().UTC()}
	if err := a.Store.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func message(runID, node, token string) string {
	b, _ := json.Marshal(worker.Message{RunID: runID, Node: node, Kind: "agent", TaskToken: token})
	return string(b)
}

// The two functions over one stack on moto (DESIGN.md § The path of one
// step, 2-3): dispatch creates the step, attempt and handle in DynamoDB,
// writes the rendered prompt under the bucket prefix template.yaml's IAM
// grants (stratus/*) and launches the worker with the API URL it was
// configured with; the worker API, which has no configured URL, takes the
// host its request came to, and serves the prompt to the handle given in
// a lower-cased authorization header.
func TestApp_DispatchThenWorkerAPIOnMoto(t *testing.T) {
	s := newStack(t)
	l := &launcher{}
	dispatch := s.app(t, awsapp.Options{Launcher: l}, awsapp.EnvAPIURL, "https://api.example.test")
	api := s.app(t, awsapp.Options{Launcher: &launcher{}})
	run := startRun(t, dispatch, "r-moto-1")
	ctx := context.Background()

	if err := dispatch.HandleMessage(ctx, message(run.ID, "planning", "tok-1")); err != nil {
		t.Fatalf("HandleMessage: %v", err)
	}
	specs := l.launched()
	if len(specs) != 1 || specs[0].APIURL != "https://api.example.test" || specs[0].TaskID != run.ID+".planning.1" {
		t.Fatalf("launched %+v; want one worker of %s.planning.1 told https://api.example.test", specs, run.ID)
	}
	if _, err := api.Store.GetHandle(ctx, specs[0].Handle); err != nil {
		t.Fatalf("the handle is not in the store the worker API reads: %v", err)
	}
	s3c := awss3.NewFromConfig(s.aws, func(o *awss3.Options) { o.UsePathStyle = true })
	// The run's own logs, under runs/<run_id>/ (sink.ForRun).
	key := "stratus/runs/" + run.ID + "/workdir/.stratus/logs/t1/stages/planning/run-000001/rendered-prompt.md"
	if _, err := s3c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.env[awsapp.EnvBucket]), Key: aws.String(key)}); err != nil {
		t.Errorf("no s3://%s/%s: %v", s.env[awsapp.EnvBucket], key, err)
	}

	// docs/security.md § Handles: the launch carried a one-time bootstrap
	// value; the worker exchanges it for its handle (and it works only once).
	exchange := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "https://abc123.execute-api.us-east-1.amazonaws.com/v1/worker/bootstrap", nil)
		req.Header.Set("authorization", "Bearer "+specs[0].Handle)
		w := httptest.NewRecorder()
		api.HTTPHandler().ServeHTTP(w, req)
		return w
	}
	w := exchange()
	var boot worker.Bootstrapped
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &boot) != nil || !strings.HasPrefix(boot.Handle, "wh-") || boot.TaskID != specs[0].TaskID {
		t.Fatalf("bootstrap = %d %s", w.Code, w.Body)
	}
	if w := exchange(); w.Code != http.StatusUnauthorized {
		t.Errorf("a second exchange of the bootstrap value = %d %s; want 401", w.Code, w.Body)
	}
	req := httptest.NewRequest("GET", "https://abc123.execute-api.us-east-1.amazonaws.com/v1/worker/prompt?task_id="+specs[0].TaskID, nil)
	req.Header.Set("authorization", "Bearer "+boot.Handle)
	w = httptest.NewRecorder()
	api.HTTPHandler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("prompt = %d %s", w.Code, w.Body)
	}
	var p worker.Payload
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.TaskID != specs[0].TaskID || !strings.Contains(p.Prompt, "t1") {
		t.Fatalf("payload %s (%v)", w.Body, err)
	}
	if got := api.Service.APIURL; got != "https://abc123.execute-api.us-east-1.amazonaws.com" {
		t.Errorf("the worker API took %q for its URL; want the host its request came to", got)
	}
}

// A redelivered dispatch message creates nothing twice (the step is keyed
// on the task token): the second delivery launches no second worker.
func TestApp_RedeliveredMessageLaunchesOnce(t *testing.T) {
	s := newStack(t)
	l := &launcher{}
	a := s.app(t, awsapp.Options{Launcher: l}, awsapp.EnvAPIURL, "https://api.example.test")
	run := startRun(t, a, "r-moto-2")
	for range 2 {
		if err := a.HandleMessage(context.Background(), message(run.ID, "planning", "tok-1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.launched()); n != 1 {
		t.Fatalf("two deliveries launched %d workers; want 1", n)
	}
}

// Throttling and capacity errors of RunTask (after the launcher's retries)
// are infrastructure failures: the Task state fails with
// stratus.InfrastructureFailed, which the compiled machine routes to
// manual_action_required without charging a rework budget, and the message is
// not redelivered.
func TestHandleMessage_CapacityFailureIsInfrastructureNotRedelivered(t *testing.T) {
	s := newStack(t)
	l := &launcher{fail: &ecs.InfrastructureError{TaskID: "x", Attempts: 5, Reason: "RESOURCE:CPU"}}
	a := s.app(t, awsapp.Options{Launcher: l}, awsapp.EnvAPIURL, "https://api.example.test")
	rec := &tokens{failures: map[string]string{}}
	a.Service.Tokens = rec
	run := startRun(t, a, "r-moto-3")
	if err := a.HandleMessage(context.Background(), message(run.ID, "planning", "tok-1")); err != nil {
		t.Fatalf("HandleMessage = %v; a failure reported to the state machine is not redelivered", err)
	}
	if got := rec.failure("tok-1"); got != worker.ErrInfrastructure {
		t.Fatalf("the Task state failed with %q; want %s", got, worker.ErrInfrastructure)
	}
}

// A message that can never be dispatched (its run is unknown) fails its
// Task state with stratus.DispatchFailed now, instead of at the state's
// timeout, and is not redelivered; a body that is no dispatch message is
// dropped.
func TestHandleMessage_PermanentErrorFailsTheTaskState(t *testing.T) {
	s := newStack(t)
	var log bytes.Buffer
	a := s.app(t, awsapp.Options{Launcher: &launcher{}, Log: &log}, awsapp.EnvAPIURL, "https://api.example.test")
	rec := &tokens{failures: map[string]string{}}
	a.Service.Tokens = rec
	if err := a.HandleMessage(context.Background(), message("r-nowhere", "planning", "tok-9")); err != nil {
		t.Fatalf("HandleMessage = %v; want nil (not redelivered)", err)
	}
	if got := rec.failure("tok-9"); got != worker.ErrDispatch {
		t.Fatalf("the Task state failed with %q; want %s", got, worker.ErrDispatch)
	}
	if err := a.HandleMessage(context.Background(), "not json"); err != nil {
		t.Fatalf("HandleMessage(not json) = %v; want nil (dropped)", err)
	}
	if !strings.Contains(log.String(), "not a dispatch message") {
		t.Errorf("log %q does not say the body was dropped", log.String())
	}
}

// An AWS failure (here: the store's table does not exist) is an
// infrastructure error: HandleMessage returns it so SQS redelivers the
// message, and no Task state is failed for it.
func TestHandleMessage_AWSFailureIsRedelivered(t *testing.T) {
	s := newStack(t)
	a := s.app(t, awsapp.Options{Launcher: &launcher{}}, awsapp.EnvTable, "no-such-table-"+s.env[awsapp.EnvBucket])
	rec := &tokens{failures: map[string]string{}}
	a.Service.Tokens = rec
	err := a.HandleMessage(context.Background(), message("r-1", "planning", "tok-1"))
	if err == nil || !awsapp.Infrastructure(err) {
		t.Fatalf("HandleMessage = %v; want an infrastructure error", err)
	}
	if rec.failure("tok-1") != "" {
		t.Errorf("the Task state was failed (%s) for an infrastructure error", rec.failure("tok-1"))
	}
}

// Without Options.Launcher, New builds the ECS launcher from the
// environment; its RunTask reaches the cluster and task definition named
// there, in the subnets of the node's network access.
func TestNew_ECSLauncherFromEnvironmentOnMoto(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	rec := &runTaskRecorder{}
	s.aws.HTTPClient = &awstest.ECSClient{RunTask: rec.record}
	ecsc := awsecs.NewFromConfig(s.aws)
	name := s.env[awsapp.EnvBucket]
	cl, err := ecsc.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	// Bridge, not awsvpc as in template.yaml: moto 5.2.1's RunTask fails
	// with a 500 on an awsvpc task definition (internal/launch/ecs tests
	// the awsvpc request itself).
	_, err = ecsc.RegisterTaskDefinition(ctx, &awsecs.RegisterTaskDefinitionInput{
		Family: aws.String(name + "-runner"), NetworkMode: ecstypes.NetworkModeBridge,
		ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("runner"), Image: aws.String("stratus-runner:test"), Memory: aws.Int32(512)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := s.app(t, awsapp.Options{}, awsapp.EnvCluster, aws.ToString(cl.Cluster.ClusterArn), awsapp.EnvAPIURL, "https://api.example.test")
	if _, ok := a.Launcher.(*ecs.Launcher); !ok {
		t.Fatalf("Launcher is %T; want *ecs.Launcher", a.Launcher)
	}
	arn, err := a.Launcher.Launch(ctx, launch.Spec{APIURL: "https://api.example.test", Handle: "wh-abcd1234", TaskID: "r.planning.1", Attempt: 1})
	if err != nil {
		t.Fatalf("Launch on moto: %v", err)
	}
	out, err := ecsc.DescribeTasks(ctx, &awsecs.DescribeTasksInput{Cluster: cl.Cluster.ClusterArn, Tasks: []string{arn}})
	if err != nil || len(out.Tasks) != 1 {
		t.Fatalf("DescribeTasks(%s) = %+v, %v", arn, out, err)
	}
	var env []string
	for _, o := range out.Tasks[0].Overrides.ContainerOverrides {
		for _, kv := range o.Environment {
			env = append(env, aws.ToString(kv.Name)+"="+aws.ToString(kv.Value))
		}
	}
	slices.Sort(env)
	want := []string{"STRATUS_API_URL=https://api.example.test", "STRATUS_ATTEMPT=1", "STRATUS_HANDLE=wh-abcd1234", "STRATUS_TASK_ID=r.planning.1"}
	if !slices.Equal(env, want) {
		t.Errorf("the task's environment overrides = %v; want %v", env, want)
	}
	// The network of a node without network access: the subnets and
	// security groups of STRATUS_ECS_SUBNETS / _SECURITY_GROUPS.
	var req struct {
		TaskDefinition       string
		NetworkConfiguration struct {
			AwsvpcConfiguration struct{ Subnets, SecurityGroups []string }
		}
	}
	json.Unmarshal(rec.body(), &req)
	if vpc := req.NetworkConfiguration.AwsvpcConfiguration; req.TaskDefinition != name+"-runner" ||
		!slices.Equal(vpc.Subnets, []string{"subnet-0a", "subnet-0b"}) || !slices.Equal(vpc.SecurityGroups, []string{"sg-0a"}) {
		t.Errorf("RunTask request %s; want task definition %s-runner in subnet-0a,subnet-0b with sg-0a", rec.body(), name)
	}
}

// runTaskRecorder keeps the last RunTask request body sent through an
// awstest.ECSClient (record is its RunTask hook).
type runTaskRecorder struct {
	mu   sync.Mutex
	last []byte
}

func (r *runTaskRecorder) record(body []byte) {
	r.mu.Lock()
	r.last = body
	r.mu.Unlock()
}

func (r *runTaskRecorder) body() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// New refuses a configuration that lacks what every function needs,
// naming the variable, before it calls AWS.
func TestNew_RequiresTableBucketSecretAndECS(t *testing.T) {
	full := map[string]string{
		awsapp.EnvTable: "t", awsapp.EnvBucket: "b", awsapp.EnvSecretID: "s",
		awsapp.EnvCluster: "c", awsapp.EnvTaskDefinition: "td", awsapp.EnvSubnets: "subnet-1", awsapp.EnvSecurityGroups: "sg-1",
	}
	for _, missing := range []string{awsapp.EnvTable, awsapp.EnvBucket, awsapp.EnvSecretID, awsapp.EnvCluster, awsapp.EnvTaskDefinition, awsapp.EnvSubnets, awsapp.EnvSecurityGroups} {
		env := map[string]string{}
		for k, v := range full {
			if k != missing {
				env[k] = v
			}
		}
		cfg, err := awsapp.FromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		// No launcher given: the ECS one is built from the environment. No
		// call is made: the configuration is refused first.
		_, err = awsapp.New(context.Background(), cfg, aws.Config{Region: "us-east-1"}, awsapp.Options{})
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != missing {
			t.Errorf("New without %s = %v; want EINVALID naming %s", missing, err, missing)
		}
	}
}

// docs/security.md § Upload size limits: results of any size on AWS. A 20 MiB
// part and a 20 MiB final body, five times the 4 MiB inline limit, go from
// the worker client through presigned S3 PUTs (moto) and arrive whole: the
// part's ctx file, the store's tail (the Final spilled to the bucket) and the
// projection hold every byte, and the uploads are deleted once recorded.
// Before the fix the worker API answered 413 and the runner never uploaded.
func TestApp_TwentyMiBResultThroughAPresignedUploadOnMoto(t *testing.T) {
	s := newStack(t)
	l := &launcher{}
	dispatch := s.app(t, awsapp.Options{Launcher: l}, awsapp.EnvAPIURL, "https://api.example.test")
	api := s.app(t, awsapp.Options{Launcher: &launcher{}})
	api.Service.Tokens = &tokens{failures: map[string]string{}}
	srv := httptest.NewServer(api.HTTPHandler())
	defer srv.Close()
	run := startRun(t, dispatch, "r-moto-upload")
	ctx := context.Background()
	if err := dispatch.HandleMessage(ctx, message(run.ID, "planning", "tok-1")); err != nil {
		t.Fatal(err)
	}
	spec := l.launched()[0]
	c := &workerclient.Client{BaseURL: srv.URL, Credential: spec.Handle}
	if _, err := c.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	const size = 20 << 20
	part, final := bytes.Repeat([]byte("p"), size), bytes.Repeat([]byte("f"), size)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/worker/submit", bytes.NewReader(final))
	req.Header.Set("Authorization", "Bearer "+c.Credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(msg), "4194304 bytes for a body sent inline") || !strings.Contains(string(msg), "up to 33554432 bytes") {
		t.Fatalf("20 MiB inline = %d %s; want 413 naming the 4 MiB inline limit and the 32 MiB upload limit", resp.StatusCode, msg)
	}

	start := time.Now()
	if err := c.Artifact(ctx, "plan.md", part); err != nil {
		t.Fatalf("Artifact(20 MiB): %v", err)
	}
	sv, err := c.Submit(ctx, spec.TaskID, final)
	if err != nil {
		t.Fatalf("Submit(20 MiB): %v", err)
	}
	t.Logf("a 20 MiB part and a 20 MiB final body through presigned uploads on moto: %v", time.Since(start).Round(time.Millisecond))
	if sv.Bytes != size || sv.Outcome != "done" {
		t.Errorf("step value %+v; want %d bytes, done", sv, size)
	}
	tail, err := api.Store.ListOutput(ctx, spec.TaskID, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, e := range tail {
		got[e.Kind] = e.Body
	}
	if !bytes.Equal(got[stratus.OutputFinal], final) || !bytes.Equal(got[stratus.OutputArtifact], part) {
		t.Errorf("the tail holds a Final of %d and a part of %d bytes; want %d each", len(got[stratus.OutputFinal]), len(got[stratus.OutputArtifact]), size)
	}
	files := sink.ForRun(api.Sink, run.ID) // the run's own ctx dir
	ctxPart, err := files.Get(ctx, "workspace/tasks/t1/ctx/plan.md")
	if err != nil || !bytes.Equal(ctxPart, part) {
		t.Errorf("ctx plan.md in the bucket: %d bytes (%v); want the part", len(ctxPart), err)
	}
	proj, err := files.Get(ctx, "workspace/tasks/t1/ctx/planning.md")
	if err != nil || !bytes.HasSuffix(bytes.TrimRight(proj, "\n"), final) {
		t.Errorf("projection planning.md: %d bytes (%v); want it to end with the final body", len(proj), err)
	}
	if left, err := api.Sink.List(ctx, ".stratus/uploads"); err != nil || len(left) != 0 {
		t.Errorf("uploads left in the bucket: %v (%v)", left, err)
	}
}

// README.md § Logs: the functions log JSON lines (slog), each event with the
// run_id, step_ref and attempt it concerns, as CloudWatch Logs Insights
// queries them; a warning is a line of level WARN.
func TestApp_LogsStructuredJSON(t *testing.T) {
	s := newStack(t)
	var log bytes.Buffer
	a := s.app(t, awsapp.Options{Launcher: &launcher{}, Log: &log}, awsapp.EnvAPIURL, "https://api.example.test")
	run := startRun(t, a, "r-moto-log")
	if err := a.HandleMessage(context.Background(), message(run.ID, "planning", "tok-log")); err != nil {
		t.Fatal(err)
	}
	a.HandleMessage(context.Background(), "not json")
	var started, warned bool
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if m["msg"] == "stratus.event" && m["type"] == worker.EventStepStarted {
			started = m["run_id"] == run.ID && m["step_ref"] == "planning#1" && m["attempt"] == float64(1) && m["level"] == "INFO" && m["time"] != nil
		}
		if m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["msg"]), "not a dispatch message") {
			warned = true
		}
	}
	if !started || !warned {
		t.Errorf("log (step_started with run_id/step_ref/attempt: %v; the dropped body a WARN: %v):\n%s", started, warned, log.String())
	}
}

// refusingSink is the bucket refusing the PutObject of keys ending in
// suffix (S3 answering 503 SlowDown after the SDK's retries).
type refusingSink struct {
	sink.Sink
	suffix string
}

func (s refusingSink) Put(ctx context.Context, key string, body []byte) error {
	if strings.HasSuffix(key, s.suffix) {
		return fmt.Errorf("s3 sink: put %q: operation error S3: PutObject, https response error StatusCode: 503, api error SlowDown: Please reduce your request rate", key)
	}
	return s.Sink.Put(ctx, key, body)
}

// docs/security.md § Output that did not persist, on AWS: a submit whose
// projection the bucket refuses fails its step in DynamoDB and its Task
// state (SendTaskFailure stratus.ProjectionFailed, never SendTaskSuccess),
// and the worker's answer names the step but not the bucket's error.
func TestApp_UnpersistedProjectionFailsTheTaskStateOnMoto(t *testing.T) {
	s := newStack(t)
	l := &launcher{}
	dispatch := s.app(t, awsapp.Options{Launcher: l}, awsapp.EnvAPIURL, "https://api.example.test")
	api := s.app(t, awsapp.Options{Launcher: &launcher{}})
	tk := &tokens{failures: map[string]string{}}
	api.Service.Tokens = tk
	api.Service.Sink = refusingSink{api.Service.Sink, "/planning.md"}
	srv := httptest.NewServer(api.HTTPHandler())
	defer srv.Close()
	run := startRun(t, dispatch, "r-moto-unpersisted")
	ctx := context.Background()
	if err := dispatch.HandleMessage(ctx, message(run.ID, "planning", "tok-1")); err != nil {
		t.Fatal(err)
	}
	spec := l.launched()[0]
	c := &workerclient.Client{BaseURL: srv.URL, Credential: spec.Handle}
	if _, err := c.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/worker/submit", strings.NewReader("# Plan\n"))
	req.Header.Set("Authorization", "Bearer "+c.Credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(msg), "planning#1") || strings.Contains(string(msg), "SlowDown") {
		t.Errorf("submit = %d %s; want 500 naming planning#1, not the bucket's error", resp.StatusCode, msg)
	}
	if got := tk.failure("tok-1"); got != worker.ErrProjection || tk.succeeded("tok-1") {
		t.Errorf("the Task state: failure %q, success %v; want %s only", got, tk.succeeded("tok-1"), worker.ErrProjection)
	}
	st, err := api.Store.GetStep(ctx, spec.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var v worker.StepValue
	json.Unmarshal(st.Value, &v)
	if st.Status != stratus.StepFailed || !strings.Contains(v.Reason, "its output did not persist") || !strings.Contains(v.Reason, "SlowDown") {
		t.Errorf("step %s in DynamoDB, reason %q; want failed, saying the output did not persist and why", st.Status, v.Reason)
	}
}

// taskStateChange is the "ECS Task State Change" event EventBridge sends to
// the dispatch queue (the stack's WorkerTaskStoppedRule) for a worker task
// launched with env as its container overrides.
func taskStateChange(status string, exitCode int, env map[string]string) string {
	var kv []map[string]string
	for k, v := range env {
		kv = append(kv, map[string]string{"name": k, "value": v})
	}
	b, _ := json.Marshal(map[string]any{
		"version": "0", "source": "aws.ecs", "detail-type": awsapp.DetailTaskStateChange,
		"detail": map[string]any{
			"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/runners/0123abcd", "lastStatus": status,
			"stopCode": "EssentialContainerExited", "stoppedReason": "Essential container in task exited",
			"containers": []map[string]any{{"name": "runner", "exitCode": exitCode, "reason": "stratus: the API is unreachable"}},
			"overrides":  map[string]any{"containerOverrides": []map[string]any{{"name": "runner", "environment": kv}}},
		},
	})
	return string(b)
}

// A worker task that stopped before its prompt fetch fails its step's
// attempt as the event reaches dispatch, with ECS's reason and the
// container's exit code, and the Task state fails now (not at its
// heartbeat's lapse); a state change that is not a stop, and a stopped
// task that is no worker's, change nothing.
func TestHandleMessage_AStoppedWorkerTaskFailsItsAttempt(t *testing.T) {
	s := newStack(t)
	l := &launcher{}
	var log bytes.Buffer
	a := s.app(t, awsapp.Options{Launcher: l, Log: &log}, awsapp.EnvAPIURL, "https://api.example.test")
	rec := &tokens{failures: map[string]string{}}
	a.Service.Tokens = rec
	run := startRun(t, a, "r-moto-stop")
	ctx := context.Background()
	if err := a.HandleMessage(ctx, message(run.ID, "planning", "tok-1")); err != nil {
		t.Fatal(err)
	}
	sp := l.launched()[0]
	env := map[string]string{launch.EnvHandle: sp.Handle, launch.EnvTaskID: sp.TaskID, launch.EnvAttempt: "1", launch.EnvAPIURL: sp.APIURL}

	for _, body := range []string{taskStateChange("RUNNING", 0, env), taskStateChange("STOPPED", 0, map[string]string{"OTHER": "x"})} {
		if err := a.HandleMessage(ctx, body); err != nil {
			t.Fatalf("HandleMessage: %v", err)
		}
	}
	if rec.failure("tok-1") != "" {
		t.Fatalf("a running task's state change, or a stopped task that is no worker's, failed the Task state")
	}
	if !strings.Contains(log.String(), "not a worker's") || strings.Contains(log.String(), "not a dispatch message") {
		t.Errorf("log %q: the foreign task's stop is not said to be dropped as such", log.String())
	}

	if err := a.HandleMessage(ctx, taskStateChange("STOPPED", 3, env)); err != nil {
		t.Fatalf("HandleMessage(stopped) = %v", err)
	}
	if got := rec.failure("tok-1"); got != worker.ErrWorkerFailed {
		t.Fatalf("the Task state failed with %q; want %s", got, worker.ErrWorkerFailed)
	}
	att, err := a.Store.LatestAttempt(ctx, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if att.Status != stratus.AttemptFailed || !strings.Contains(att.Reason, "before it fetched its prompt") ||
		!strings.Contains(att.Reason, "exit code 3") || !strings.Contains(att.Reason, "the API is unreachable") {
		t.Errorf("attempt %s %q; want failed, naming the stop, the exit code and the container's reason", att.Status, att.Reason)
	}
}
