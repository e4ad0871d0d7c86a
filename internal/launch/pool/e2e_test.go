package pool_test

import (
	"context"
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
	"github.com/stratusflow/stratus/internal/queue/memory"
	"github.com/stratusflow/stratus/internal/runner"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
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
	s.svc = &worker.Service{Store: st, Sink: fs.New(dir).Private(worker.StateDirName), Tokens: s.tokens,
		Minter: &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		Env:    func(context.Context, string) (*worker.RunEnv, error) { return env, nil }}
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

// Issue 17 § 1, § 4: a step dispatched to the pool is taken by a pooled
// runner and runs as a cold one would — its report completes the Task
// state — in a fresh directory (working dir, HOME, TMPDIR) that is gone
// before the runner takes the next; the engine's environment holds the
// step's handle, not the bootstrap value; no cold task is started.
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

// Issue 17 § 2: no runner in the pool: dispatch heartbeats the task token
// while the assignment waits, then falls back to a cold task. A runner
// that comes late is fenced: the cold task exchanged the bootstrap value
// first, so the late runner is refused, deletes the assignment and takes
// nothing.
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

// Issue 17 § 2: a runner killed mid-step (its context ended: the process
// gone) leaves its assignment in flight; once the visibility timeout
// lapses the assignment comes back, and the next runner, refused by the
// single-use bootstrap, deletes it: the step is not run twice. (Its Task
// state then times out on its heartbeat and is retried, as a cold task's
// would be.)
func TestPool_ARunnerKilledMidStepIsNotRunTwice(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	if err := os.WriteFile(filepath.Join(s.dir, "hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, kill := s.pooled(t, time.Second)
	done := s.dispatch("tok-killed")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the step's engine started", func() bool {
		_, err := os.Stat(filepath.Join(s.dir, "seen.started"))
		_, f := s.queue.Counts()
		return err == nil && f == 1
	})
	kill() // the runner dies with the step under way
	os.Remove(filepath.Join(s.dir, "hang"))
	steps, stop := s.pooled(t, time.Second)
	within(t, 10*time.Second, "the assignment came back and was deleted", func() bool { v, f := s.queue.Counts(); return v+f == 0 })
	stop()
	if len(steps) != 0 {
		t.Errorf("the second runner took the killed step again")
	}
	if got := s.tokens.Success("tok-killed"); got != nil {
		t.Errorf("the killed step completed (%s); want it left to its heartbeat", got)
	}
	if len(s.queue.DeadLetters()) != 0 {
		t.Errorf("the assignment reached the dead-letter queue; want it deleted once fenced")
	}
}

// Issue 17 § 4: a pool runs only assignments of its own network profile,
// and a message that is no assignment is never run: both are deleted (left
// in the queue they would keep the pool's scale-out alarm firing), and
// their steps, never exchanged, go cold when dispatch's window ends.
func TestPool_OtherProfilesAndGarbageAreDeletedNotRun(t *testing.T) {
	t.Parallel()
	s := newStack(t, time.Second)
	online := launch.Assignment{APIURL: s.url, Handle: "wb-not-for-this-pool", TaskID: "r1.planning.9", NetworkAccess: true}.Encode()
	for _, body := range [][]byte{online, []byte(`{"v":1}`), []byte("not json")} {
		if err := s.queue.Send(context.Background(), body); err != nil {
			t.Fatal(err)
		}
	}
	steps, stop := s.pooled(t, time.Second)
	within(t, 5*time.Second, "the three messages deleted", func() bool { v, f := s.queue.Counts(); return v+f == 0 })
	stop()
	if len(steps) != 0 || len(s.queue.DeadLetters()) != 0 {
		t.Errorf("took %d steps, dead-lettered %d; want nothing run and all three deleted", len(steps), len(s.queue.DeadLetters()))
	}
}

// A runner told to stop (SIGTERM: a scale-in, a deployment) takes no more
// assignments but lets the step under way end within its grace: the
// step's report completes its Task state; the next assignment waits for
// another runner.
func TestPool_AStoppedRunnerFinishesItsStepWithinGrace(t *testing.T) {
	t.Parallel()
	s := newStack(t, 10*time.Second)
	hang := filepath.Join(s.dir, "hang")
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		ended <- runner.Pool(ctx, runner.PoolOptions{Queue: s.queue, Profile: runner.ProfileOffline, WorkRoot: t.TempDir(),
			Wait: 200 * time.Millisecond, Visibility: time.Second, Extend: 300 * time.Millisecond, Grace: 30 * time.Second})
	}()
	if err := <-s.dispatch("tok-graceful"); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the step's engine started", func() bool {
		_, err := os.Stat(filepath.Join(s.dir, "seen.started"))
		return err == nil
	})
	stop()
	time.Sleep(300 * time.Millisecond)
	os.Remove(hang) // the step ends after the stop, within the grace
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stopped runner did not end once its step did")
	}
	if s.tokens.Success("tok-graceful") == nil {
		t.Error("the step under way at the stop did not complete its Task state")
	}
	if v, f := s.queue.Counts(); v+f != 0 {
		t.Errorf("%d assignments left; want the finished step's deleted", v+f)
	}
}
