package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/dispatch"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// manualClock is an embedded.Clock whose timers fire only when the test
// advances it.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c    *manualClock
	at   time.Time
	f    func()
	done bool
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) embedded.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock on by d and fires the timers now due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.done && !t.at.After(c.now) {
			t.done = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// stopLauncher records launches and stops (a worker "runs" until stopped).
type stopLauncher struct {
	mu       sync.Mutex
	launched []launch.Spec
	stopped  []string
	svc      *worker.Service // set: the launched worker's bootstrap value is exchanged, as its runner does
}

func (l *stopLauncher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	if l.svc != nil {
		b, err := l.svc.ExchangeBootstrap(ctx, "Bearer "+s.Handle)
		if err != nil {
			return "", err
		}
		s.Handle = b.Handle
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.launched = append(l.launched, s)
	return "worker-" + s.TaskID, nil
}

func (l *stopLauncher) Stop(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = append(l.stopped, id)
	return nil
}

func (l *stopLauncher) snapshot() ([]launch.Spec, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.launched), slices.Clone(l.stopped)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// docs/architecture.md § The path of one step, 10: "If the state fails or
// times out, its Catch passes <node>.stop, whose message makes dispatch stop
// the worker before the failure routes". End to end in embedded mode: the
// compiled machine on the embedded executor, its sendMessage resources
// feeding Service.Dispatch as `stratus run` wires them. The agent's worker
// starts and never reports; when its state's heartbeat lapses, "<node>.stop"
// makes dispatch stop that worker and record why, then the Catch routes on
// (to failed). The stopped worker's late submit is refused.
func TestDispatch_StopMessageStopsTheTimedOutWorker(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	launcher := &stopLauncher{svc: r.Svc}
	r.Svc.Launcher = launcher
	clock := &manualClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var dispatches sync.WaitGroup
	var dispatchErrs []error
	var mu sync.Mutex
	exec := embedded.New(embedded.Options{
		Clock:         clock,
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": workertest.SendToDispatch(r.Svc, &dispatches, func(_ core.Message, err error) {
				mu.Lock()
				dispatchErrs = append(dispatchErrs, err)
				mu.Unlock()
			}),
		},
	})
	r.Svc.Tokens = exec
	def, err := compiler.Compile(r.Env.Flow, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	x, err := exec.StartExecution(ctx, executor.StartInput{StateMachine: "f", Definition: def, Name: r.Run.ID, Input: json.RawMessage(`{"run_id":"r1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the build worker to launch", func() bool { l, _ := launcher.snapshot(); return len(l) == 1 })
	// Nothing reports: the heartbeat lapses (the deadline is hours away).
	clock.Advance(time.Duration(compiler.DefaultHeartbeatSeconds+1) * time.Second)

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err := exec.WaitExecution(wctx, x.ARN)
	if err != nil || got.Status != executor.StatusFailed || got.Error != compiler.ErrFailed {
		t.Fatalf("execution %s %s (%v), want FAILED with %s", got.Status, got.Error, err, compiler.ErrFailed)
	}
	launched, _ := launcher.snapshot()
	spec := launched[0]
	eventually(t, "the build worker to be stopped", func() bool {
		_, stopped := launcher.snapshot()
		return slices.Contains(stopped, "worker-"+spec.TaskID)
	})
	dispatches.Wait()
	if len(dispatchErrs) > 0 {
		t.Errorf("dispatch errors: %v", dispatchErrs)
	}

	var entered []string
	for _, e := range exec.History(x.ARN) {
		if e.IsStateEntered() {
			entered = append(entered, e.State)
		}
	}
	if want := []string{"resume", "init", "build", "build.stop", "failed"}; !slices.Equal(entered, want) {
		t.Errorf("states entered %q, want %q", entered, want)
	}
	step, err := r.Svc.Store.GetStep(ctx, spec.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := core.DecodeStepValue(step.Value)
	if step.Status != stratus.StepFailed || !strings.Contains(sv.Reason, "States.HeartbeatTimeout") || !strings.Contains(sv.Reason, "stopped") {
		t.Errorf("step %s: status %s, value %s; want failed, the reason naming States.HeartbeatTimeout and the stop", step.StepRef, step.Status, step.Value)
	}
	att, err := r.Svc.Store.LatestAttempt(ctx, spec.TaskID)
	if err != nil || att.Status != stratus.AttemptFailed || !strings.Contains(att.Reason, "States.HeartbeatTimeout") {
		t.Errorf("attempt %+v (%v), want failed with the caught error as its reason", att, err)
	}
	// The stopped worker's late report counts for nothing.
	if _, err := r.Svc.Submit(ctx, "Bearer "+spec.Handle, spec.TaskID, []byte("late"), true); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("late submit of the stopped worker: %v, want ECONFLICT", err)
	}
}

// A stop message for a step that already ended (its worker failed it,
// which is what the Catch caught) keeps the step's own record and still
// stops the worker; one for a node never dispatched does nothing; a stop
// message needs no task token.
func TestDispatch_StopMessageKeepsAnEndedStep(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	launcher := &stopLauncher{svc: r.Svc}
	r.Svc.Launcher = launcher
	ctx := context.Background()
	if err := dispatch.Invoke(ctx, r.Svc.Service, core.Message{RunID: "r1", Node: "publish", Kind: compiler.KindStop}); err != nil {
		t.Errorf("stop of a node never dispatched: %v", err)
	}
	if err := dispatch.Invoke(ctx, r.Svc.Service, core.Message{RunID: "r1", Node: "build", Kind: "agent", TaskToken: "tok-1"}); err != nil {
		t.Fatal(err)
	}
	launched, _ := launcher.snapshot()
	sp := launched[0]
	if _, err := r.Svc.Submit(ctx, "Bearer "+sp.Handle, sp.TaskID, []byte("engine crashed"), false); err != nil {
		t.Fatal(err)
	}
	before, _ := r.Svc.Store.GetStep(ctx, sp.TaskID)
	err := dispatch.Invoke(ctx, r.Svc.Service, core.Message{RunID: "r1", Node: "build", Kind: compiler.KindStop,
		Error: &core.CaughtError{Error: core.ErrWorkerFailed, Cause: "engine crashed"}})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := r.Svc.Store.GetStep(ctx, sp.TaskID)
	if string(after.Value) != string(before.Value) || after.Status != stratus.StepFailed {
		t.Errorf("ended step rewritten by the stop: %s → %s", before.Value, after.Value)
	}
	if _, stopped := launcher.snapshot(); !slices.Equal(stopped, []string{"worker-" + sp.TaskID}) {
		t.Errorf("stopped %v, want the build worker", stopped)
	}
	if err := dispatch.Invoke(ctx, r.Svc.Service, core.Message{Node: "build", Kind: compiler.KindStop}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("stop without run_id: %v, want EINVALID", err)
	}
}

// A launch that failed for want of capacity or under throttling
// (launch.ErrInfrastructure) is reported as stratus.InfrastructureFailed,
// which the compiled machine parks at manual_action_required; any other
// launch error stays stratus.LaunchFailed.
func TestDispatch_InfrastructureLaunchFailureIsLabelled(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("ecs:RunTask: RESOURCE:CPU after 5 attempts: %w", launch.ErrInfrastructure), compiler.ErrInfrastructure},
		{fmt.Errorf("ecs:RunTask: ClusterNotFoundException"), core.ErrLaunchFailed},
	}
	for _, c := range cases {
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
		r.Svc.Launcher = workertest.FailingLauncher{Err: c.err}
		r.Dispatch(t, "build")
		if got := r.Tokens.Failure("tok-1"); !strings.HasPrefix(got, c.want+": ") {
			t.Errorf("launch error %q: task failure %q, want %s", c.err, got, c.want)
		}
	}
}

// The node's resolved network grant reaches the launcher (launch.Spec), which
// on AWS picks the network profile by it
// (docs/contracts.md § Per-node overrides: network_access).
func TestDispatch_SpecCarriesTheNodesNetworkAccess(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: research, kind: agent, role_file: f/research.md, permission_profile: read-only, network_access: true }
    - { id: build, kind: agent, role_file: f/build.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: research, to: build }
    - { from: build, to: publish }
`})
	r.Dispatch(t, "research")
	r.Dispatch(t, "build")
	specs := r.Launcher.Launched()
	if len(specs) != 2 || !specs[0].NetworkAccess || specs[1].NetworkAccess {
		t.Errorf("launches %+v: want research online, build offline", specs)
	}
}

// taskStopper is a launcher that can stop by dispatch task id only
// (launch.TaskStopper), as the ECS launcher of another invocation.
type taskStopper struct {
	stopLauncher
	byTask []string
}

func (l *taskStopper) StopTask(_ context.Context, tid string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byTask = append(l.byTask, tid)
	return nil
}

// On AWS the stop message reaches a dispatch invocation that did not
// launch the worker (its in-memory worker ids are empty): a launcher that
// can stop by task id (launch.TaskStopper) is asked to.
func TestDispatch_StopMessageReachesAWorkerLaunchedElsewhere(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	step := r.Dispatch(t, "build")
	other := &taskStopper{}
	fresh := worker.New(core.Config{Store: r.Svc.Store, Sink: r.Svc.Sink, Tokens: r.Tokens, Launcher: other, Minter: r.Svc.Minter, Env: r.Svc.Env})
	err := dispatch.Invoke(context.Background(), fresh.Service, core.Message{RunID: "r1", Node: "build", Kind: compiler.KindStop,
		Error: &core.CaughtError{Error: "States.Timeout"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(other.byTask, []string{step.TID}) {
		t.Errorf("StopTask calls %v, want [%s]", other.byTask, step.TID)
	}
	if st, _ := r.Svc.Store.GetStep(context.Background(), step.TID); st.Status != stratus.StepFailed {
		t.Errorf("step %s, want failed", st.Status)
	}
}

// Embedded, a step's runner keeps a report it could not deliver beside its
// log, in the state dir (the operator's alone), not in the shared
// temporary directory; on AWS (no local logs) the runner picks its own
// private directory. docs/security.md § Files under .stratus.
func TestDispatch_SpoolDirIsTheStepsLogDirInTheStateDir(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	logs := filepath.Join(t.TempDir(), ".stratus", "logs")
	r.Svc.LocalLogs = logs
	r.Dispatch(t, "build")
	specs := r.Launcher.Launched()
	if len(specs) != 1 {
		t.Fatalf("launches %+v", specs)
	}
	s := specs[0]
	if s.LogPath == "" || s.SpoolDir != filepath.Dir(s.LogPath) || !strings.HasPrefix(s.SpoolDir, logs+string(filepath.Separator)) {
		t.Errorf("SpoolDir %q, LogPath %q: want the log's directory, under %s", s.SpoolDir, s.LogPath, logs)
	}
	aws := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	aws.Dispatch(t, "build")
	if s := aws.Launcher.Launched()[0]; s.SpoolDir != "" {
		t.Errorf("without local logs SpoolDir = %q, want \"\" (the runner's own)", s.SpoolDir)
	}
}
