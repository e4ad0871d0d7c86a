package orchestrator

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
)

// ObserveGrace bounds how long a run whose execution ended waits for the
// supervisor's observation turns still in flight
// (docs/contracts.md § What the supervisor layer does: an observation is
// best-effort and never blocks routing, but one launched for the failure that
// ends the run is paid for, so it is let finish) before their workers are
// stopped.
const ObserveGrace = 30 * time.Second

// CutShortReason is what a supervisor turn still running when its run's
// workers are stopped records as its reason.
const CutShortReason = "cut short by the end of the run"

// settlePoll is how often settleSupervisor looks at the store.
const settlePoll = 100 * time.Millisecond

// settleSupervisor waits, up to grace (0: not at all), until no supervisor
// turn of the run is running, then records every turn still running as cut
// short: its running attempt and its step failed with CutShortReason,
// before its worker is stopped — so the stop is not taken for a crash
// (worker.Service skips an attempt no longer running) and no warning
// follows — and one supervisor-ended event per turn goes to onEvent. It
// returns the step refs of the turns cut short.
func settleSupervisor(ctx context.Context, st store.Store, runID string, grace time.Duration, onEvent func(worker.Event)) []string {
	wait := ctx.Done() // a cancelled caller ends the wait, not the recording
	ctx = context.WithoutCancel(ctx)
	running := func() []stratus.Step {
		steps, err := st.ListSteps(ctx, runID)
		if err != nil {
			return nil
		}
		var out []stratus.Step
		for _, s := range steps {
			if s.Kind == report.Kind && s.Status == stratus.StepRunning {
				out = append(out, s)
			}
		}
		return out
	}
	deadline := time.Now().Add(grace)
	left := running()
	for len(left) > 0 && time.Now().Before(deadline) {
		select {
		case <-wait:
			deadline = time.Now()
		case <-time.After(settlePoll):
		}
		left = running()
	}
	var cut []string
	for _, s := range left {
		att, err := st.LatestAttempt(ctx, s.TID)
		if err == nil && att.Status == stratus.AttemptRunning {
			att.Status, att.Terminal, att.Reason, att.EndedAt = stratus.AttemptFailed, "Failed", CutShortReason, time.Now().UTC()
			if st.UpdateAttempt(ctx, att) != nil {
				continue
			}
		}
		var v report.SupervisorValue
		json.Unmarshal(s.Value, &v)
		v.Attempt, v.Outcome, v.Reason = att.N, "failed", CutShortReason
		raw, _ := json.Marshal(v)
		s.Status, s.Verdict, s.Value, s.EndedAt = stratus.StepFailed, "failed", raw, time.Now().UTC()
		if st.UpdateStep(ctx, s) != nil {
			continue
		}
		cut = append(cut, s.StepRef)
		if onEvent != nil {
			onEvent(worker.Event{Type: worker.EventSupervisorEnded, RunID: runID, Node: v.Job, StepRef: s.StepRef, Attempt: att.N,
				Terminal: "Failed", Outcome: "failed", Reason: CutShortReason})
		}
	}
	return cut
}
