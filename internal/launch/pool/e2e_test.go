package pool_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/pool"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/queue/memory"
	"github.com/stratusflow/stratus/internal/runner"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// stack is a worker API (the real service and handlers over SQLite) whose
// dispatch launches through a pool launcher on a memory queue, with a
// fake cold launcher beside it: what a stack with RunnerPool=on is, in
// one process.
type stack struct {
	svc    *worker.Service
	tokens *workertest.FakeTokens
	cold   *fakeCold
	queue  *memory.Queue
	url    string
	dir    string
}

// engineScript answers the planning node's contract; while dir/hang
// exists it hangs (a step a runner is killed in the middle of).
const engineScript = `read line
touch "$SEEN.started"
while [ -f "$HANG" ]; do sleep 0.05; done
echo "$PWD $HOME $TMPDIR" > "$SEEN"
env > "$SEEN.env"
printf '{"subrun_report": "the plan"}\n'
`

func newStack(t *testing.T, pickup time.Duration) *stack {
	t.Helper()
	dir := t.TempDir()
	flows := filepath.Join(dir, "flows")
	workertest.WriteFiles(t, flows, workertest.ImplementationFlow(t))
	fl, err := flow.Load(flows, "implementation")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.Parse("task.md", []byte("---\nid: t1\ntitle: A task\n---\nDo it.\n"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine := filepath.Join(dir, "engine.sh")
	if err := os.WriteFile(engine, []byte(engineScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Supervisor.Enabled = new(bool)
	cfg.Agents.Providers["pooled"] = config.Provider{Command: "sh", Args: []string{engine},
		Env: map[string]string{"HANG": filepath.Join(dir, "hang"), "SEEN": filepath.Join(dir, "seen")}}
	cfg.Agents.Primary = "pooled"
	env := &worker.RunEnv{Flow: fl, FlowDir: flows, Task: tk, Config: cfg}
	s := &stack{tokens: &workertest.FakeTokens{}, cold: &fakeCold{}, queue: memory.New(memory.Options{MaxReceives: 3}), dir: dir}
	s.svc = worker.New(worker.Config{Store: st, Sink: fs.New(dir).Private(worker.StateDirName), Tokens: s.tokens,
		Minter: &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		Env:    func(context.Context, string) (*worker.RunEnv, error) { return env, nil }})
	l, err := pool.New(pool.Config{Offline: s.queue, Cold: s.cold, Pickup: pickup, Poll: 10 * time.Millisecond, Heartbeat: 50 * time.Millisecond,
		Taken: func(ctx context.Context, b string) (bool, error) {
			_, err := st.GetHandle(ctx, b)
			if stratus.ErrorCode(err) == stratus.ENOTFOUND {
				return true, nil
			}
			return false, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.svc.Launcher = l
	srv := httptest.NewServer(httpapi.New(s.svc))
	t.Cleanup(srv.Close)
	s.url, s.svc.APIURL = srv.URL, srv.URL
	run := stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: time.Now()}
	if err := st.CreateRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	return s
}

// dispatch sends the planning node's dispatch message, as the state
// machine's Task state would, in the background; done reports its error.
func (s *stack) dispatch(token string) (done chan error) {
	done = make(chan error, 1)
	go func() {
		done <- s.svc.Dispatch(context.Background(), worker.Message{RunID: "r1", Node: "planning", Kind: "agent", TaskToken: token})
	}()
	return done
}

// pooled starts a pooled runner on the stack's queue; stop ends it and
// waits. steps gets each assignment it took.
func (s *stack) pooled(t *testing.T, visibility time.Duration) (steps chan launch.Assignment, stop func()) {
	t.Helper()
	steps = make(chan launch.Assignment, 8)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := runner.Pool(ctx, runner.PoolOptions{Queue: s.queue, Profile: runner.ProfileOffline, WorkRoot: t.TempDir(),
			Wait: 200 * time.Millisecond, Visibility: visibility, Extend: visibility / 3,
			OnStep: func(a launch.Assignment, _ time.Duration, _ error) { steps <- a }})
		if err != nil {
			t.Error(err)
		}
	}()
	return steps, func() { cancel(); wg.Wait() }
}

func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// README.md § Warm runners (pool mode): a step dispatched to the pool is
// taken by a pooled runner and runs as a cold one would — its report
// completes the Task state — in a fresh directory (working dir, HOME, TMPDIR)
// that is gone before the runner takes the next; the engine's environment
// holds the step's handle, not the bootstrap value; no cold task is started.
func TestPool_AStepRunsOnAPooledRunner(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	steps, stop := s.pooled(t, 2*time.Second)
	defer stop()
	for i, tok := range []string{"tok-1", "tok-2"} {
		if err := <-s.dispatch(tok); err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		a := <-steps
		within(t, 10*time.Second, "the Task state completed", func() bool { return s.tokens.Success(tok) != nil })
		if !strings.Contains(string(s.tokens.Success(tok)), "planning#") {
			t.Errorf("task token %s completed with %s", tok, s.tokens.Success(tok))
		}
		seen := strings.Fields(readFile(t, filepath.Join(s.dir, "seen")))
		if len(seen) != 3 || filepath.Dir(seen[1]) != filepath.Dir(seen[0]) || filepath.Base(seen[1]) != "home" || filepath.Base(seen[2]) != "tmp" {
			t.Fatalf("engine ran in %q; want the step's work, home and tmp dirs", seen)
		}
		within(t, 5*time.Second, "the step's directory removed", func() bool {
			_, err := os.Stat(filepath.Dir(seen[0]))
			return os.IsNotExist(err)
		})
		env := readFile(t, filepath.Join(s.dir, "seen.env"))
		if strings.Contains(env, a.Handle) || !strings.Contains(env, "STRATUS_HANDLE=wh-") {
			t.Errorf("the engine's environment carries the bootstrap value or no handle:\n%s", env)
		}
	}
	if len(s.cold.specs) != 0 {
		t.Errorf("cold tasks started: %+v", s.cold.specs)
	}
	if v, f := s.queue.Counts(); v+f != 0 {
		n := v + f
		t.Errorf("%d assignments left in the queue after both steps; want each deleted", n)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// README.md § Warm runners (pool mode): no runner in the pool: dispatch
// heartbeats the task token while the assignment waits, then falls back to a
// cold task. A runner that comes late is fenced: the cold task exchanged the
// bootstrap value first, so the late runner is refused, deletes the
// assignment and takes nothing.
func TestPool_NoRunnerFallsBackToColdAndALateRunnerIsFenced(t *testing.T) {
	t.Parallel()
	s := newStack(t, 500*time.Millisecond)
	if err := <-s.dispatch("tok-cold"); err != nil {
		t.Fatal(err)
	}
	if len(s.cold.specs) != 1 {
		t.Fatalf("%d cold launches after the pickup window; want 1", len(s.cold.specs))
	}
	if s.tokens.Heartbeats("tok-cold") < 2 {
		t.Errorf("%d heartbeats while the assignment waited 500 ms (heartbeat 50 ms); want the token kept alive", s.tokens.Heartbeats("tok-cold"))
	}
	// The cold task's runner exchanges the bootstrap first.
	cold := s.cold.specs[0]
	if err := runner.Run(context.Background(), runner.Options{APIURL: cold.APIURL, Handle: cold.Handle, TaskID: cold.TaskID, EngineDir: t.TempDir()}); err != nil {
		t.Fatalf("the cold runner: %v", err)
	}
	steps, stop := s.pooled(t, time.Second)
	within(t, 5*time.Second, "the late runner deleted the assignment", func() bool { v, f := s.queue.Counts(); return v+f == 0 })
	stop()
	if len(steps) != 0 {
		t.Errorf("the late pooled runner took %d steps; want none (the bootstrap was exchanged)", len(steps))
	}
	if n := len(s.queue.DeadLetters()); n != 0 {
		t.Errorf("%d assignments dead-lettered; want the late runner to delete the one it was refused", n)
	}
	if s.tokens.Success("tok-cold") == nil {
		t.Error("the cold runner's report did not complete the Task state")
	}
}

// README.md § Warm runners (pool mode): a runner killed mid-step (SIGKILL:
// nothing of it runs on) leaves its assignment in flight, its bootstrap value
// exchanged. Once the visibility timeout lapses the assignment comes back;
// the next runner is refused the used bootstrap value and deletes it: the
// step is not run twice. (Its Task state times out on its heartbeat:
// TestDevAWS_WarmRunnerPool.)
func TestPool_ARunnerKilledMidStepIsNotRunTwice(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	done := s.dispatch("tok-killed")
	// The runner that dies: it receives the assignment, hidden for 1 s,
	// and exchanges its bootstrap value (the step is its), then is gone.
	var m queue.Message
	within(t, 5*time.Second, "the assignment was queued", func() bool {
		var ok bool
		var err error
		m, ok, err = s.queue.Receive(context.Background(), 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	a, err := launch.DecodeAssignment(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	c := &workerclient.Client{BaseURL: a.APIURL, Credential: a.Handle}
	if _, err := c.Bootstrap(context.Background()); err != nil {
		t.Fatalf("the dying runner's exchange: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	steps, stop := s.pooled(t, time.Second)
	within(t, 10*time.Second, "the assignment came back and was deleted", func() bool { v, f := s.queue.Counts(); return v+f == 0 })
	stop()
	if len(steps) != 0 {
		t.Errorf("the next runner took the killed runner's step again")
	}
	if got := s.tokens.Success("tok-killed"); got != nil {
		t.Errorf("the killed step completed (%s); want it left to its heartbeat", got)
	}
	if len(s.queue.DeadLetters()) != 0 {
		t.Errorf("the assignment reached the dead-letter queue; want it deleted once fenced")
	}
}

// README.md § Warm runners (pool mode): a runner stopped with a step under
// way and no grace left reports the step failed by the step's own handle (a
// pooled runner has no ECS task-stopped event to say it), so the run stops
// there at once, not when the step's heartbeat window lapses; the assignment
// is deleted.
func TestPool_AStoppedRunnerReportsItsStepFailed(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	if err := os.WriteFile(filepath.Join(s.dir, "hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stop := s.pooled(t, time.Second)
	if err := <-s.dispatch("tok-stopped"); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the step's engine started", func() bool {
		_, err := os.Stat(filepath.Join(s.dir, "seen.started"))
		return err == nil
	})
	stop()
	within(t, 10*time.Second, "the step reported failed", func() bool { return s.tokens.Failure("tok-stopped") != "" })
	if f := s.tokens.Failure("tok-stopped"); !strings.Contains(f, "stopped") {
		t.Errorf("the step failed with %q; want it to say the runner was stopped", f)
	}
	if v, f := s.queue.Counts(); v+f != 0 {
		t.Errorf("%d assignments left; want the stopped step's deleted", v+f)
	}
}

// README.md § Warm runners (pool mode): a message that is no assignment is
// never run: it is deleted (left in the queue it would keep the pool's
// scale-out alarm firing), and the runner goes on. An assignment of the other
// network profile means the runner polls the wrong queue: it is handed back,
// for the runners it is for, and the runner stops (ErrPoolSetup) rather than
// keep taking their work.
func TestPool_GarbageIsDeletedAndTheWrongProfileStopsTheRunner(t *testing.T) {
	t.Parallel()
	s := newStack(t, time.Second)
	for _, body := range [][]byte{[]byte(`{"v":1}`), []byte("not json")} {
		if err := s.queue.Send(context.Background(), body); err != nil {
			t.Fatal(err)
		}
	}
	ended := make(chan error, 1)
	run := func() {
		ended <- runner.Pool(context.Background(), runner.PoolOptions{Queue: s.queue, Profile: runner.ProfileOffline, WorkRoot: t.TempDir(),
			Wait: 200 * time.Millisecond, Visibility: 2 * time.Second})
	}
	go run()
	within(t, 5*time.Second, "the garbage deleted", func() bool { v, f := s.queue.Counts(); return v+f == 0 })
	online := launch.Assignment{APIURL: s.url, Handle: "wb-not-for-this-pool", TaskID: "r1.planning.9", NetworkAccess: true}.Encode()
	if err := s.queue.Send(context.Background(), online); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, runner.ErrPoolSetup) || !strings.Contains(err.Error(), "--profile offline") {
			t.Errorf("Pool on the wrong queue = %v; want ErrPoolSetup naming the profile", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner on the wrong queue did not stop")
	}
	within(t, 5*time.Second, "the other profile's assignment back in the queue", func() bool { v, _ := s.queue.Counts(); return v == 1 })
	if len(s.queue.DeadLetters()) != 0 {
		t.Errorf("dead-lettered %d; want the garbage deleted and the assignment handed back", len(s.queue.DeadLetters()))
	}
	// A work root it cannot write stops a runner before it takes anything.
	err := runner.Pool(context.Background(), runner.PoolOptions{Queue: s.queue, Profile: runner.ProfileOnline, WorkRoot: filepath.Join(t.TempDir(), "missing", "x")})
	if !errors.Is(err, runner.ErrPoolSetup) {
		t.Errorf("Pool with a missing work root = %v; want ErrPoolSetup", err)
	}
	if v, _ := s.queue.Counts(); v != 1 {
		t.Errorf("the runner without a work root took an assignment")
	}
}

// failSubmit is a transport that cannot reach the worker API's submit
// route (the API went away after the step began) and passes the rest.
type failSubmit struct{}

func (failSubmit) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/v1/worker/submit") {
		return nil, errors.New("connection refused (test)")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// README § Warm runners: a pooled runner whose report cannot be delivered
// keeps it in a spool file and stops taking steps (its worker API is out
// of reach: every further step would end the same way), with
// runner.ErrSpooled, which `stratus runner pool` exits 5 with. Before,
// it spooled the report and polled on.
func TestPool_AnUndeliverableReportStopsThePool(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	s.dispatch("tok-spooled")
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := runner.Pool(ctx, runner.PoolOptions{Queue: s.queue, Profile: runner.ProfileOffline, WorkRoot: root,
		Wait: 200 * time.Millisecond, Visibility: 5 * time.Second, HTTP: &http.Client{Transport: failSubmit{}}})
	if ctx.Err() != nil || !errors.Is(err, runner.ErrSpooled) {
		t.Fatalf("Pool: %v (deadline passed: %v); want it stopped with ErrSpooled once the report was spooled", err, ctx.Err())
	}
	// In the runner's own directory under the work root
	// (docs/security.md § Files under .stratus).
	spooled, _ := filepath.Glob(filepath.Join(runner.SpoolDirFor(root), "stratus-spool-*.report"))
	if len(spooled) != 1 || !strings.Contains(err.Error(), spooled[0]) {
		t.Errorf("spool files %v; the error %q should name the one kept", spooled, err)
	}
}
