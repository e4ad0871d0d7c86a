package supervise_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// recordingQueue keeps what was sent, for the test to deliver.
type recordingQueue struct {
	mu   sync.Mutex
	sent [][]byte
}

func (q *recordingQueue) Send(_ context.Context, body []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, append([]byte(nil), body...))
	return nil
}

func (q *recordingQueue) messages() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([][]byte(nil), q.sent...)
}

// blockingLauncher holds every supervisor launch until released, as a
// RunTask retrying through throttling would.
type blockingLauncher struct {
	launch.Launcher
	release chan struct{}
}

func (l *blockingLauncher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	if strings.Contains(s.TaskID, "."+core.SupervisorNode+".") {
		<-l.release
	}
	return l.Launcher.Launch(ctx, s)
}

// docs/architecture.md § The path of one step, 2: the submit that ends a step
// returns as soon as the attempt is recorded; the observation turn it earns
// leaves through the queue as a dispatch message, and only its handling (the
// dispatch function's) launches — once, however often the queue delivers it.
// Before, the worker API ran the launch, retries and all, inside the request
// (and the Lambda drained it before answering).
func TestObserve_GoesThroughTheQueueNotTheRequest(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	q := &recordingQueue{}
	r.Svc.Queue = q
	bl := &blockingLauncher{Launcher: r.Svc.Launcher, release: make(chan struct{})}
	r.Svc.Launcher = bl
	r.Visit(t, "implementation", "did it")

	done := make(chan error, 1)
	go func() { _, err := submitAfterDispatch(t, r, "review", workertest.FindingsOneHigh); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(bl.release)
		t.Fatal("the submit waited for the observation's launch")
	}
	r.Svc.Drain() // nothing of the request's is left running
	msgs := q.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages queued; want the one observation of review#1", len(msgs))
	}
	var m core.Message
	if err := json.Unmarshal(msgs[0], &m); err != nil || m.Kind != core.KindObserve || m.StepRef != "review#1" || m.RunID != "r1" || !strings.Contains(m.Why, "rework") {
		t.Fatalf("queued %s (%v); want a %s message for review#1 saying why", msgs[0], err, core.KindObserve)
	}
	if n := len(supervisorLaunches(r)); n != 0 {
		t.Fatalf("%d supervisor turns launched before the message was handled", n)
	}

	close(bl.release)
	for range 2 { // at-least-once delivery: the second finds the turn made
		if err := r.Svc.Dispatch(context.Background(), m); err != nil {
			t.Fatalf("Dispatch(%s): %v", msgs[0], err)
		}
	}
	if n := len(supervisorLaunches(r)); n != 1 {
		t.Errorf("two deliveries launched %d observation turns; want 1", n)
	}
	for _, bad := range []core.Message{{Kind: core.KindObserve, RunID: "r1"}, {Kind: core.KindObserve, RunID: "r1", StepRef: "nosuch#9"}} {
		if err := r.Svc.Dispatch(context.Background(), bad); err == nil {
			t.Errorf("Dispatch(%+v) = nil; want the message refused", bad)
		}
	}
}

// submitAfterDispatch dispatches node and submits body for it.
func submitAfterDispatch(t *testing.T, r *workertest.Rig, node, body string) (*core.StepValue, error) {
	r.Dispatch(t, node)
	return r.Submit(t, body)
}

// An observation message finds its step among the step's node's steps,
// and a turn's job ordinal follows the job's latest turn (store.Store
// NodeSteps), without reading the run's whole step list (README.md §
// Performance): two reworks, two observe turns, the second observe#2.
func TestObserve_ReadsOnlyTheNodesSteps(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	q := &recordingQueue{}
	r.Svc.Queue = q
	for range 2 {
		r.Visit(t, "implementation", "did it")
		r.Visit(t, "review", workertest.FindingsOneHigh)
	}
	r.Svc.Drain()
	msgs := q.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages queued; want the observations of review#1 and review#2", len(msgs))
	}
	r.Svc.Store = workertest.ListlessStore{Store: r.Svc.Store}
	for _, raw := range msgs {
		var m core.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if err := r.Svc.Dispatch(context.Background(), m); err != nil {
			t.Fatalf("Dispatch(%s): %v", raw, err)
		}
	}
	sups := supervisorLaunches(r)
	if len(sups) != 2 {
		t.Fatalf("%d observation turns launched; want 2", len(sups))
	}
	for i, sp := range sups {
		p, err := r.Svc.FetchPrompt(context.Background(), "Bearer "+sp.Handle, sp.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		json.Unmarshal(p.Engine.Input, &in)
		if in["node"] != "supervisor.observe" || in["visit"] != float64(i+1) || !strings.Contains(p.Prompt, fmt.Sprintf("review#%d", i+1)) {
			t.Errorf("turn %d: input node %v visit %v; want supervisor.observe, %d, observing review#%d", i+1, in["node"], in["visit"], i+1, i+1)
		}
	}
}

// degradationless is a store whose ListDegradations fails.
type degradationless struct{ store.Store }

func (degradationless) ListDegradations(_ context.Context, runID string) ([]stratus.Degradation, error) {
	return nil, fmt.Errorf("ListDegradations(%q): this path reads the run's degradations", runID)
}

// Observing every step, the decision needs no degradation (only the
// events mode's fallback trigger does), so a step's end reads none of the
// run's (README.md § Performance).
func TestObserve_AllModeReadsNoDegradations(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	r.Env.Config.Supervisor.Observe.Mode = supervisor.ModeAll
	if fs := r.Env.Flow.Supervisor; fs != nil && fs.Observe != nil {
		fs.Observe.Mode = supervisor.ModeAll
	}
	q := &recordingQueue{}
	r.Svc.Queue = q
	r.Svc.Store = degradationless{r.Svc.Store}
	r.Visit(t, "implementation", "did it")
	r.Svc.Drain()
	if n := len(q.messages()); n != 1 {
		t.Errorf("%d observation messages queued for implementation#1; want 1", n)
	}
}
