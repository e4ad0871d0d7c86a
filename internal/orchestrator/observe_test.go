package orchestrator

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/worker"
)

// setupTurn records a run with one observation turn in flight: its step
// and attempt running.
func setupTurn(t *testing.T) (*sqlite.Store, stratus.Step) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "f", Status: stratus.RunRunning, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(report.SupervisorValue{StepRef: "supervisor#1", Node: worker.SupervisorNode, Job: report.JobObserve, ForRef: "write#1"})
	step, _, err := st.CreateStep(ctx, stratus.Step{TID: "r1._supervisor.1", RunID: "r1", Node: worker.SupervisorNode, Kind: report.Kind, Visit: 1,
		StepRef: "supervisor#1", DedupKey: "d1", Status: stratus.StepRunning, Value: v, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAttempt(ctx, stratus.Attempt{TID: step.TID, N: 1, Agent: "supervisor", Status: stratus.AttemptRunning, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	return st, step
}

// docs/contracts.md § What the supervisor layer does (an observation is
// best-effort): a turn still running when the run's workers
// are to be stopped is recorded cut short by the end of the run — attempt and
// step failed with that reason, one supervisor-ended event — so stopping its
// worker is no crash and warns nothing.
func TestSettleSupervisor_RecordsTurnsLeftCutShort(t *testing.T) {
	t.Parallel()
	st, step := setupTurn(t)
	ctx := context.Background()
	var events []worker.Event
	cut := settleSupervisor(ctx, st, "r1", 0, func(e worker.Event) { events = append(events, e) })
	if len(cut) != 1 || cut[0] != "supervisor#1" {
		t.Fatalf("cut = %v", cut)
	}
	got, err := st.GetStep(ctx, step.TID)
	if err != nil {
		t.Fatal(err)
	}
	var v report.SupervisorValue
	json.Unmarshal(got.Value, &v)
	if got.Status != stratus.StepFailed || v.Outcome != "failed" || v.Reason != CutShortReason || v.Job != report.JobObserve {
		t.Errorf("step = %+v, value %+v", got, v)
	}
	att, err := st.GetAttempt(ctx, step.TID, 1)
	if err != nil || att.Status != stratus.AttemptFailed || att.Reason != CutShortReason || att.EndedAt.IsZero() {
		t.Errorf("attempt = %+v (%v)", att, err)
	}
	if len(events) != 1 || events[0].Type != worker.EventSupervisorEnded || events[0].Reason != CutShortReason || events[0].Node != report.JobObserve {
		t.Errorf("events = %+v", events)
	}
	if line := progress.Line(events[0]); line != `stratus: supervisor supervisor#1 observe ended: failed reason="cut short by the end of the run"` {
		t.Errorf("progress line %q", line)
	}
	// Nothing is left running: a second settle cuts nothing.
	if again := settleSupervisor(ctx, st, "r1", 0, nil); len(again) != 0 {
		t.Errorf("second settle cut %v", again)
	}
}

// A turn that ends within the grace is waited for, not cut short.
func TestSettleSupervisor_WaitsForATurnThatEndsInTime(t *testing.T) {
	t.Parallel()
	st, step := setupTurn(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond) // the turn's worker submits a little later
		s := step
		s.Status, s.Verdict, s.EndedAt = stratus.StepCompleted, "done", time.Now().UTC()
		st.UpdateStep(ctx, s)
	}()
	cut := settleSupervisor(ctx, st, "r1", ObserveGrace, nil)
	wg.Wait()
	if len(cut) != 0 {
		t.Errorf("a turn that ended within the grace was cut short: %v", cut)
	}
	if got, _ := st.GetStep(ctx, step.TID); got.Status != stratus.StepCompleted {
		t.Errorf("step = %+v", got)
	}
}
