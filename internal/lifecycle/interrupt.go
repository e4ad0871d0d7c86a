package lifecycle

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/store"
)

// OwnerGone is the reason the steps of a run whose owner died are canceled
// with.
const OwnerGone = "the process running the run ended before the run did"

// Interrupt records run as interrupted at now: each step still open
// (running, or waiting for a human) is canceled, its running attempt failed,
// both with reason (CancelOpen), and the run's status becomes
// stratus.RunInterrupted (resumable). A run already ended is returned as it
// is. It writes only to the store: stopping workers and executions is the
// caller's.
func Interrupt(ctx context.Context, st store.Store, run stratus.Run, reason string, now time.Time) (stratus.Run, error) {
	if stratus.RunTerminal(run.Status) {
		return run, nil
	}
	if _, err := CancelOpen(ctx, st, run.ID, reason, now, true); err != nil {
		return run, err
	}
	run.Status, run.EndedAt = stratus.RunInterrupted, now
	return run, st.UpdateRun(ctx, run)
}

// CancelOpen cancels each step of run runID still running (and, with
// waiting, each step waiting for a human) at now: the step canceled with
// reason, its running attempt failed with terminal Cancelled. It returns
// the steps it canceled, so the caller can stop their workers.
func CancelOpen(ctx context.Context, st store.Store, runID, reason string, now time.Time, waiting bool) ([]stratus.Step, error) {
	return CancelOpenWith(ctx, st, runID, func(stratus.Step) (string, string) { return TerminalCancelled, reason }, now, waiting)
}

// TerminalCancelled is the terminal of an attempt that was running when
// its step was canceled.
const TerminalCancelled = "Cancelled"

// CancelOpenWith is CancelOpen with a terminal and a reason per step
// (why): a step whose own task timed out says so (EndedUnder). The
// step's value keeps what it held (a supervisor turn's job and the step
// it is about) with its outcome and reason set. An attempt that began
// after now (a supervisor turn started once the execution had stopped)
// ends when it is canceled, never before it began.
func CancelOpenWith(ctx context.Context, st store.Store, runID string, why func(stratus.Step) (terminal, reason string), now time.Time, waiting bool) ([]stratus.Step, error) {
	steps, err := st.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	var canceled []stratus.Step
	for _, s := range steps {
		if s.Status != stratus.StepRunning && s.Status != stratus.StepParked && !(waiting && s.Status == stratus.StepWaiting) {
			continue
		}
		terminal, reason := why(s)
		end := now
		n := 0
		if a, err := st.LatestAttempt(ctx, s.TID); err == nil {
			n = a.N
			if a.Status == stratus.AttemptRunning {
				if end.Before(a.StartedAt) {
					end = later(time.Now().UTC(), a.StartedAt)
				}
				a.Status, a.Terminal, a.Reason, a.EndedAt = stratus.AttemptFailed, terminal, reason, end
				if terminal == TerminalTimedOut {
					// Its Task state timed out before its worker reported
					// (internal/failclass: a deadline or heartbeat lapse);
					// a step canceled with its run failed of nothing
					// itself: no class.
					a.Class = failclass.Timeout
				}
				if err := st.UpdateAttempt(ctx, a); err != nil {
					return canceled, err
				}
			}
		} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
			return canceled, err
		}
		if end.Before(s.CreatedAt) {
			end = later(time.Now().UTC(), s.CreatedAt)
		}
		s.Status, s.Verdict, s.Value, s.EndedAt = stratus.StepCanceled, stratus.StepCanceled, canceledValue(s, n, reason), end
		if err := st.UpdateStep(ctx, s); err != nil {
			return canceled, err
		}
		canceled = append(canceled, s)
	}
	return canceled, nil
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// canceledValue is the value of step s canceled after n attempts: the
// fields of worker.StepValue a failed step carries (this package sits
// below the worker, which reads run spend from it) over whatever else the
// value held, kept (report.SupervisorValue's job and for_ref name what a
// supervisor turn was doing).
func canceledValue(s stratus.Step, n int, reason string) json.RawMessage {
	v := map[string]any{}
	if len(s.Value) > 0 {
		var held map[string]json.RawMessage
		if json.Unmarshal(s.Value, &held) == nil {
			for k, x := range held {
				v[k] = x
			}
		}
	}
	v["step_ref"], v["node"], v["outcome"] = s.StepRef, s.Node, stratus.StepCanceled
	delete(v, "attempt")
	if n > 0 {
		v["attempt"] = n
	}
	delete(v, "reason")
	if reason != "" {
		v["reason"] = reason
	}
	b, _ := json.Marshal(v)
	return b
}

// Reconcile returns run as it truly stands: a run recorded running whose
// owner is known dead (OwnerAlive) is recorded interrupted first (OwnerGone).
// A run without an owner this machine can check is returned unchanged.
func Reconcile(ctx context.Context, st store.Store, run stratus.Run) (stratus.Run, error) {
	if stratus.RunTerminal(run.Status) {
		return run, nil
	}
	if alive, known := OwnerAlive(run.Owner); !known || alive {
		return run, nil
	}
	return Interrupt(ctx, st, run, OwnerGone, time.Now().UTC())
}

// Waiting reports whether a running run waits: for a human (a step is
// stratus.StepWaiting), or for a provider to take requests again (a step
// is stratus.StepParked: internal/retry). `stratus status` and `stratus
// runs` show such a run as "waiting".
func Waiting(steps []stratus.Step) bool {
	for _, s := range steps {
		if s.Status == stratus.StepWaiting || s.Status == stratus.StepParked {
			return true
		}
	}
	return false
}
