package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// eventsStack is a table and a bucket on moto and the events function's
// App on them.
type eventsStack struct {
	app    *awsapp.App
	cfg    aws.Config // moto's
	env    map[string]string
	s3     *awss3.Client
	bucket string
	log    *bytes.Buffer
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

func newEventsStack(t *testing.T) *eventsStack {
	t.Helper()
	ctx := context.Background()
	cfg := awstest.Moto(t).Config()
	b := make([]byte, 3)
	rand.Read(b)
	name := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
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
	// The events function's environment: the Globals of template.yaml
	// without the secret (it reads none).
	env := map[string]string{
		awsapp.EnvTable: dynamodb.TableName(name + "-"), awsapp.EnvBucket: name, awsapp.EnvBucketPrefix: "stratus/",
	}
	c, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := &bytes.Buffer{}
	app, err := awsapp.NewEvents(c, cfg, awsapp.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return &eventsStack{app: app, cfg: cfg, env: env, s3: s3c, bucket: name, log: log}
}

// startRun freezes a run of the built-in implementation flow into the
// bucket and records it running, as `stratus run --target aws` does.
func (s *eventsStack) startRun(t *testing.T, runID, execution string) stratus.Run {
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
	cfgYAML, err := config.Marshal(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runenv.Freeze(ctx, s.app.Sink, runID, dir, flows, taskPath, cfgYAML); err != nil {
		t.Fatal(err)
	}
	run := stratus.Run{ID: runID, TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, Execution: execution, CreatedAt: time.Now().UTC().Add(-time.Hour)}
	if err := s.app.Store.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	return run
}

func (s *eventsStack) createStep(t *testing.T, st stratus.Step) stratus.Step {
	t.Helper()
	got, _, err := s.app.Store.CreateStep(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// summaryKey is the bucket key of the summary.md of run runID of task
// taskID, among the run's own files (sink.ForRun; summary.json holds only
// the prose; the status and the stop line are in the markdown).
func (s *eventsStack) summaryKey(runID, taskID string) string {
	return s.app.Sink.ObjectKey(s.app.Sink.RunKey(runID, report.Dir(taskID)+"/summary.md"))
}

// getObject returns an object of the bucket, or nil when it does not exist.
func (s *eventsStack) getObject(t *testing.T, key string) []byte {
	t.Helper()
	out, err := s.s3.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchKey") || strings.Contains(err.Error(), "404") {
			return nil
		}
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// statusChange is an EventBridge "Step Functions Execution Status Change"
// event as AWS sends it (detail dates in Unix milliseconds, input and
// output as JSON text, error and cause null unless failed).
func statusChange(t *testing.T, execution, runID, status, errName string, stop time.Time) events.CloudWatchEvent {
	t.Helper()
	sm := "arn:aws:states:us-east-1:123456789012:stateMachine:stack-implementation"
	errJSON, causeJSON := "null", "null"
	if errName != "" {
		errJSON, causeJSON = fmt.Sprintf("%q", errName), `"the cause"`
	}
	raw := fmt.Sprintf(`{
  "version": "0",
  "id": "315c1398-40ff-a850-213b-158f73e60175",
  "detail-type": "Step Functions Execution Status Change",
  "source": "aws.states",
  "account": "123456789012",
  "time": %q,
  "region": "us-east-1",
  "resources": [%q],
  "detail": {
    "executionArn": %q,
    "stateMachineArn": %q,
    "name": %q,
    "status": %q,
    "startDate": %d,
    "stopDate": %d,
    "input": "{\"run_id\":\"%s\",\"task_id\":\"t1\"}",
    "output": null,
    "error": %s,
    "cause": %s
  }
}`, stop.Format(time.RFC3339), execution, execution, sm, runID, status,
		stop.Add(-time.Hour).UnixMilli(), stop.UnixMilli(), runID, errJSON, causeJSON)
	var ev events.CloudWatchEvent
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func executionARN(runID string) string {
	return "arn:aws:states:us-east-1:123456789012:execution:stack-implementation:" + runID
}

// A run nobody follows: the end of its execution, as EventBridge
// reports it, makes the run terminal by lifecycle.ExecutionStatus's mapping, fails the
// step still waiting for a human with its reason, writes the summary to
// the bucket; a replay of the event (or an event after Finish) changes
// nothing.
func TestEvents_ExecutionEndRecordsTerminalFailsWaitingStepWritesSummary(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
	runID := "r-20260101T000000-abc123"
	run := s.startRun(t, runID, executionARN(runID))
	done := s.createStep(t, stratus.Step{TID: "tid-plan", RunID: runID, Node: "plan", Kind: "agent", Visit: 1, StepRef: "plan#1",
		DedupKey: "d-plan", Status: stratus.StepCompleted, Verdict: "done", CreatedAt: run.CreatedAt, EndedAt: run.CreatedAt.Add(time.Minute)})
	pending, _ := json.Marshal(worker.HITLValue{StepRef: "approve#1", Node: "approve", Signal: worker.SignalApproval,
		Request: "approve the plan", Deadline: time.Now().Add(time.Hour).UTC()})
	waiting := s.createStep(t, stratus.Step{TID: "tid-approve", RunID: runID, Node: "approve", Kind: "hitl", Visit: 1, StepRef: "approve#1",
		DedupKey: "d-approve", Status: stratus.StepRunning, CreatedAt: run.CreatedAt.Add(time.Minute)})
	waiting.Status, waiting.Value = worker.StepWaiting, pending
	if err := s.app.Store.UpdateStep(ctx, waiting); err != nil {
		t.Fatal(err)
	}

	stop := time.Now().UTC().Truncate(time.Millisecond)
	ev := statusChange(t, executionARN(runID), runID, "FAILED", compiler.ErrManualActionRequired, stop)
	if err := h(ctx, ev); err != nil {
		t.Fatalf("handler: %v\n%s", err, s.log)
	}

	got, err := s.app.Store.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != stratus.RunManualActionRequired || !got.EndedAt.Equal(stop) {
		t.Errorf("run after the event: status %q ended %v; want %q ended %v", got.Status, got.EndedAt, stratus.RunManualActionRequired, stop)
	}
	st, err := s.app.Store.GetStep(ctx, waiting.TID)
	if err != nil {
		t.Fatal(err)
	}
	var v worker.HITLValue
	json.Unmarshal(st.Value, &v)
	if st.Status != stratus.StepFailed || v.Outcome != "failed" || v.Reason != awsapp.EndedWhileWaiting || v.Request != "approve the plan" || !st.EndedAt.Equal(stop) {
		t.Errorf("waiting step after the event: %s ended %v, value %s; want failed with reason %q, the request kept", st.Status, st.EndedAt, st.Value, awsapp.EndedWhileWaiting)
	}
	if st, _ := s.app.Store.GetStep(ctx, done.TID); st.Status != stratus.StepCompleted || st.Verdict != "done" {
		t.Errorf("completed step changed: %+v", st)
	}
	summary := s.getObject(t, s.summaryKey(runID, "t1"))
	if summary == nil {
		t.Fatalf("no summary at s3://%s/%s\n%s", s.bucket, s.summaryKey(runID, "t1"), s.log)
	}
	for _, want := range []string{runID, stratus.RunManualActionRequired, awsapp.EndedWhileWaiting} {
		if !bytes.Contains(summary, []byte(want)) {
			t.Errorf("summary.md does not mention %q:\n%s", want, summary)
		}
	}

	// A replay (EventBridge delivers at least once; Finish may have come
	// first): nothing is written again.
	if _, err := s.s3.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.summaryKey(runID, "t1"))}); err != nil {
		t.Fatal(err)
	}
	replay := statusChange(t, executionARN(runID), runID, "SUCCEEDED", "", stop.Add(time.Minute))
	if err := h(ctx, replay); err != nil {
		t.Fatal(err)
	}
	again, _ := s.app.Store.GetRun(ctx, runID)
	if again != got {
		t.Errorf("a replayed event changed the run:\n%+v\nwas\n%+v", again, got)
	}
	if st2, _ := s.app.Store.GetStep(ctx, waiting.TID); !bytes.Equal(st2.Value, st.Value) || st2.Status != st.Status || !st2.EndedAt.Equal(st.EndedAt) {
		t.Errorf("a replayed event changed the step: %+v", st2)
	}
	if b := s.getObject(t, s.summaryKey(runID, "t1")); b != nil {
		t.Errorf("a replayed event wrote the summary again:\n%s", b)
	}
}

// The run's terminal follows lifecycle.ExecutionStatus: SUCCEEDED is done, ABORTED
// (stratus cancel, StopExecution) interrupted and resumable, any other end
// failed (manual_action_required is checked above).
func TestEvents_TerminalIsAwsrunStatusOfTheExecution(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
	for i, c := range []struct{ status, errName, want string }{
		{"SUCCEEDED", "", stratus.RunDone},
		{"TIMED_OUT", "", stratus.RunFailed},
		{"ABORTED", "", stratus.RunInterrupted},
		{"FAILED", "States.TaskFailed", stratus.RunFailed},
	} {
		runID := fmt.Sprintf("r-20260101T00000%d-abc123", i)
		s.startRun(t, runID, "")
		if err := h(ctx, statusChange(t, executionARN(runID), runID, c.status, c.errName, time.Now())); err != nil {
			t.Fatalf("%s: %v", c.status, err)
		}
		got, err := s.app.Store.GetRun(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != c.want || got.Execution != executionARN(runID) {
			t.Errorf("execution %s %s: run %s, execution %q; want %s, %q", c.status, c.errName, got.Status, got.Execution, c.want, executionARN(runID))
		}
	}
}

// An execution no run is recorded for, or not the run's own execution, is
// ignored without an error (a retry would change nothing); a detail type
// the function does not serve is EINVALID.
func TestEvents_ForeignExecutionIgnoredUnknownDetailTypeInvalid(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
	if err := h(ctx, statusChange(t, executionARN("r-nobody"), "r-nobody", "SUCCEEDED", "", time.Now())); err != nil {
		t.Errorf("an execution without a run: %v; want nil", err)
	}
	runID := "r-20260101T000000-def456"
	s.startRun(t, runID, executionARN(runID))
	other := "arn:aws:states:us-east-1:123456789012:execution:other-machine:" + runID
	if err := h(ctx, statusChange(t, other, runID, "SUCCEEDED", "", time.Now())); err != nil {
		t.Errorf("another machine's execution of the same name: %v; want nil", err)
	}
	if got, _ := s.app.Store.GetRun(ctx, runID); got.Status != stratus.RunRunning {
		t.Errorf("another execution's end made run %s %s", runID, got.Status)
	}
	err := h(ctx, events.CloudWatchEvent{DetailType: "EC2 Instance State-change Notification", Source: "aws.ec2", Detail: json.RawMessage(`{}`)})
	if stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("an EC2 event: %v; want EINVALID", err)
	}
}

// README § On an AWS account: a resume records its new execution in the
// write that makes the run running again, before the execution starts;
// the end of the run's earlier execution, delivered late (EventBridge
// retries a delivery), is then not the resumed run's: ignored, the run
// running on and its task's lock held. The new execution's end finishes
// the run and releases the lock. A run recorded without an execution is
// matched by the name of its current resume's execution.
func TestEvents_LateEndOfAResumedRunsEarlierExecutionIgnored(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
	runID := "r-20260101T000000-fed321"
	run := s.startRun(t, runID, executionARN(runID))
	run.Resumes, run.Execution = 1, executionARN(runID+".resume-1")
	if err := s.app.Store.UpdateRunLocked(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, statusChange(t, executionARN(runID), runID, "FAILED", "States.TaskFailed", time.Now())); err != nil {
		t.Fatalf("the late end: %v", err)
	}
	if got, _ := s.app.Store.GetRun(ctx, runID); got.Status != stratus.RunRunning || got.Execution != run.Execution {
		t.Fatalf("after the late end of its earlier execution the resumed run is %s, execution %s; want running, %s\n%s", got.Status, got.Execution, run.Execution, s.log)
	}
	if l, err := s.app.Store.GetTaskLock(ctx, "t1"); err != nil || !l.Held || l.RunID != runID {
		t.Errorf("lock after the late end: %+v %v; want held by %s", l, err, runID)
	}
	if err := h(ctx, statusChange(t, run.Execution, runID+".resume-1", "SUCCEEDED", "", time.Now())); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.app.Store.GetRun(ctx, runID); got.Status != stratus.RunDone {
		t.Errorf("after its own execution's end the run is %s; want done", got.Status)
	}
	if l, err := s.app.Store.GetTaskLock(ctx, "t1"); err != nil || l.Held || l.RunID != runID {
		t.Errorf("lock after the run's end: %+v %v; want released, naming %s", l, err, runID)
	}

	legacy := "r-20260101T000000-fed322"
	old := s.startRun(t, legacy, "")
	old.Resumes = 1
	if err := s.app.Store.UpdateRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, statusChange(t, executionARN(legacy), legacy, "FAILED", "States.TaskFailed", time.Now())); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.app.Store.GetRun(ctx, legacy); got.Status != stratus.RunRunning {
		t.Errorf("a run resumed once, recorded without its execution, took its first execution's end: %s", got.Status)
	}
}

// README § On an AWS account, a resume and the end of the execution it
// replaces: the events function reads a run whose execution just ended,
// and while it records that end a resume makes the run running again,
// naming its new execution (the operator resumed at once: `resume --target
// aws` records the end itself first). The events function's write of the
// end then comes last: it must not make the resumed run failed again,
// naming its old execution — its steps' workers would be refused and the
// new execution would wait out its heartbeat — nor release the task's
// lock the resumed run holds.
func TestEvents_AResumeWhileTheEndIsRecordedIsNotUndone(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	runID := "r-20260101T000000-fed323"
	run := s.startRun(t, runID, executionARN(runID))
	resumed := run
	resumed.Resumes, resumed.Execution = 1, executionARN(runID+".resume-1")
	// The resume lands just before the events function's write of the
	// run's end (an UpdateItem of the run's record making it failed).
	var resumeErr error
	var once sync.Once
	cfg := s.cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("resumeFirst", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if u, ok := in.Parameters.(*awsdynamodb.UpdateItemInput); ok && slices.ContainsFunc(slices.Collect(maps.Values(u.ExpressionAttributeValues)), func(v ddbtypes.AttributeValue) bool {
				sv, ok := v.(*ddbtypes.AttributeValueMemberS)
				return ok && sv.Value == stratus.RunFailed
			}) {
				once.Do(func() { resumeErr = s.app.Store.UpdateRunLocked(ctx, resumed) })
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
	c, err := awsapp.FromEnv(func(k string) string { return s.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	app, err := awsapp.NewEvents(c, cfg, awsapp.Options{Log: s.log})
	if err != nil {
		t.Fatal(err)
	}
	h := handler.Events(app.ExecutionEnded, app.Sweep)
	if err := h(ctx, statusChange(t, executionARN(runID), runID, "FAILED", "States.TaskFailed", time.Now())); err != nil {
		t.Fatalf("the end: %v\n%s", err, s.log)
	}
	if resumeErr != nil {
		t.Fatalf("the resume: %v", resumeErr)
	}
	var resumedOnce bool
	once.Do(func() { resumedOnce = true })
	if resumedOnce {
		t.Fatalf("the events function never wrote the run's end:\n%s", s.log)
	}
	if got, _ := s.app.Store.GetRun(ctx, runID); got.Status != stratus.RunRunning || got.Execution != resumed.Execution || got.Resumes != 1 {
		t.Errorf("the resumed run is %s, execution %s, resumed %d times; want running, %s, once\n%s", got.Status, got.Execution, got.Resumes, resumed.Execution, s.log)
	}
	if l, err := s.app.Store.GetTaskLock(ctx, "t1"); err != nil || !l.Held || l.RunID != runID {
		t.Errorf("lock after the end: %+v %v; want held by %s", l, err, runID)
	}
	if !strings.Contains(s.log.String(), "was resumed while") {
		t.Errorf("the events function does not say it left the resumed run alone:\n%s", s.log)
	}
}

// The hourly schedule calls the store's Sweep, which deletes the
// handles expired at the event's time and keeps the others.
func TestEvents_ScheduleSweepsExpiredHandles(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
	now := time.Now().UTC()
	for _, hd := range []stratus.Handle{
		{Handle: "h-expired", TID: "tid-1", Attempt: 1, ExpiresAt: now.Add(-time.Hour)},
		{Handle: "h-live", TID: "tid-2", Attempt: 1, ExpiresAt: now.Add(time.Hour)},
	} {
		if err := s.app.Store.PutHandle(ctx, hd); err != nil {
			t.Fatal(err)
		}
	}
	var ev events.CloudWatchEvent
	json.Unmarshal([]byte(fmt.Sprintf(`{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",
"source":"aws.events","account":"123456789012","time":%q,"region":"us-east-1",
"resources":["arn:aws:events:us-east-1:123456789012:rule/stack-EventsFunctionSweep"],"detail":{}}`, now.Format(time.RFC3339))), &ev)
	if err := h(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.app.Store.GetHandle(ctx, "h-expired"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("the expired handle after the sweep: %v; want ENOTFOUND", err)
	}
	if _, err := s.app.Store.GetHandle(ctx, "h-live"); err != nil {
		t.Errorf("the live handle after the sweep: %v", err)
	}
}

// stopper records the task ids whose workers it was asked to stop.
type stopper struct {
	mu  sync.Mutex
	ids []string
}

func (s *stopper) StopTask(_ context.Context, taskID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, taskID)
	return nil
}

// docs/architecture.md § The run lifecycle: an execution aborted (stratus
// cancel, the console) or timed out runs no Catch: its run's steps still
// running are canceled, their running attempts failed, and their ECS tasks
// stopped; the run ends interrupted (aborted) or failed (timed out). A
// resumed execution ("<run_id>.resume-<n>") belongs to its run.
func TestEvents_AnExecutionEndedUnderItsWorkersStopsThem(t *testing.T) {
	for i, c := range []struct{ status, name, want string }{
		{"ABORTED", "%s", stratus.RunInterrupted},
		{"TIMED_OUT", "%s.resume-2", stratus.RunFailed},
	} {
		t.Run(c.status, func(t *testing.T) {
			s := newEventsStack(t)
			stop := &stopper{}
			s.app.Stopper = stop
			ctx := context.Background()
			runID := fmt.Sprintf("r-20260102T00000%d-abc123", i)
			execName := fmt.Sprintf(c.name, runID)
			execARN := "arn:aws:states:us-east-1:123456789012:execution:stack-implementation:" + execName
			s.startRun(t, runID, execARN)
			done := s.createStep(t, stratus.Step{TID: runID + ".planning.1", RunID: runID, Node: "planning", Kind: "agent", Visit: 1, StepRef: "planning#1",
				DedupKey: runID + "-p", Status: stratus.StepCompleted, CreatedAt: time.Now().UTC()})
			open := s.createStep(t, stratus.Step{TID: runID + ".implementation.1", RunID: runID, Node: "implementation", Kind: "agent", Visit: 1,
				StepRef: "implementation#1", DedupKey: runID + "-i", Status: stratus.StepRunning, CreatedAt: time.Now().UTC()})
			if err := s.app.Store.CreateAttempt(ctx, stratus.Attempt{TID: open.TID, N: 1, Agent: "implementation", Status: stratus.AttemptRunning, StartedAt: time.Now().UTC()}); err != nil {
				t.Fatal(err)
			}
			h := handler.Events(s.app.ExecutionEnded, s.app.Sweep)
			if err := h(ctx, statusChange(t, execARN, execName, c.status, "", time.Now())); err != nil {
				t.Fatal(err)
			}
			run, err := s.app.Store.GetRun(ctx, runID)
			if err != nil || run.Status != c.want {
				t.Fatalf("run %+v %v; want %s", run, err, c.want)
			}
			got, _ := s.app.Store.GetStep(ctx, open.TID)
			att, _ := s.app.Store.LatestAttempt(ctx, open.TID)
			if got.Status != stratus.StepCanceled || att.Status != stratus.AttemptFailed || !strings.Contains(att.Reason, c.status) {
				t.Errorf("the open step after %s: step %s, attempt %s %q; want canceled, failed with why", c.status, got.Status, att.Status, att.Reason)
			}
			if g, _ := s.app.Store.GetStep(ctx, done.TID); g.Status != stratus.StepCompleted {
				t.Errorf("a finished step was touched: %s", g.Status)
			}
			stop.mu.Lock()
			defer stop.mu.Unlock()
			if !slices.Equal(stop.ids, []string{open.TID}) {
				t.Errorf("workers stopped %v; want only %s's", stop.ids, open.TID)
			}
		})
	}
}

// README.md § Task pool: once a run's end is recorded, the events function
// wakes the pool's claim (a message to the claim queue), for a run it
// finishes and for one a follower finished first; without a claim queue it
// sends nothing.
func TestEvents_ARunsEndWakesThePoolsClaim(t *testing.T) {
	s := newEventsStack(t)
	ctx := context.Background()
	q := awssqs.NewFromConfig(s.cfg)
	out, err := q.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(s.bucket + "-claim")})
	if err != nil {
		t.Fatal(err)
	}
	s.env[awsapp.EnvClaimQueueURL] = aws.ToString(out.QueueUrl)
	c, err := awsapp.FromEnv(func(k string) string { return s.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	app, err := awsapp.NewEvents(c, s.cfg, awsapp.Options{Log: s.log})
	if err != nil {
		t.Fatal(err)
	}
	wakes := func() []string {
		t.Helper()
		r, err := q.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, m := range r.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			q.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: out.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
		return bodies
	}
	h := handler.Events(app.ExecutionEnded, app.Sweep)
	runID := "r-20260101T000000-wake01"
	s.startRun(t, runID, executionARN(runID))
	stop := time.Now().UTC().Truncate(time.Millisecond)
	if err := h(ctx, statusChange(t, executionARN(runID), runID, "SUCCEEDED", "", stop)); err != nil {
		t.Fatalf("handler: %v\n%s", err, s.log)
	}
	if got := wakes(); len(got) != 1 || !strings.Contains(got[0], runID) {
		t.Fatalf("claim queue after the end: %q; want one wake naming %s", got, runID)
	}
	// A replay (the run is recorded ended already) wakes it again: the
	// claim is idempotent, and a wake lost before is made good.
	if err := h(ctx, statusChange(t, executionARN(runID), runID, "SUCCEEDED", "", stop)); err != nil {
		t.Fatal(err)
	}
	if got := wakes(); len(got) != 1 {
		t.Fatalf("claim queue after a replay: %q; want one wake", got)
	}
	// The stack's events function without a pool sends nothing.
	other := "r-20260101T000000-wake02"
	s.startRun(t, other, executionARN(other))
	if err := handler.Events(s.app.ExecutionEnded, s.app.Sweep)(ctx, statusChange(t, executionARN(other), other, "SUCCEEDED", "", stop)); err != nil {
		t.Fatal(err)
	}
	if got := wakes(); len(got) != 0 {
		t.Fatalf("a stack without a claim queue woke it: %q", got)
	}
}
