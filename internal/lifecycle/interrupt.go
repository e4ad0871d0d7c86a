package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
		var att *stratus.Attempt
		if a, err := st.LatestAttempt(ctx, s.TID); err == nil {
			att = &a
		} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
			return canceled, err
		}
		s, a := CanceledStep(s, att, terminal, reason, now)
		if a != nil && att.Status == stratus.AttemptRunning {
			if err := st.UpdateAttempt(ctx, *a); err != nil {
				return canceled, err
			}
		}
		if err := st.UpdateStep(ctx, s); err != nil {
			return canceled, err
		}
		canceled = append(canceled, s)
	}
	return canceled, nil
}

// CanceledStep returns open step s and its latest attempt a (nil: none)
// as CancelOpenWith records them canceled at now with terminal and
// reason: the step canceled, its value saying why (canceledValue), a
// running attempt failed. It writes nothing: a reader that cannot record
// a reconcile shows what it would have recorded (ReconciledSteps). An
// attempt that began after now ends when it is canceled, never before it
// began.
func CanceledStep(s stratus.Step, a *stratus.Attempt, terminal, reason string, now time.Time) (stratus.Step, *stratus.Attempt) {
	end, n := now, 0
	if a != nil {
		c := *a
		n = c.N
		if c.Status == stratus.AttemptRunning {
			if end.Before(c.StartedAt) {
				end = later(time.Now().UTC(), c.StartedAt)
			}
			c.Status, c.Terminal, c.Reason, c.EndedAt = stratus.AttemptFailed, terminal, reason, end
			if terminal == TerminalTimedOut {
				// Its Task state timed out before its worker reported
				// (internal/failclass: a deadline or heartbeat lapse); a
				// step canceled with its run failed of nothing itself: no
				// class.
				c.Class = failclass.Timeout
			}
		}
		a = &c
	}
	if end.Before(s.CreatedAt) {
		end = later(time.Now().UTC(), s.CreatedAt)
	}
	s.Status, s.Verdict, s.Value, s.EndedAt = stratus.StepCanceled, stratus.StepCanceled, canceledValue(s, n, reason), end
	return s, a
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

// ErrNotRecorded is wrapped by Reconcile's error when the run it found
// interrupted could not be recorded so (docs/security.md § Output that did
// not persist).
var ErrNotRecorded = errors.New("the run's owner is gone, but its interruption could not be recorded")

// Reconcile returns run as it truly stands: a run recorded running whose
// owner is known dead (OwnerAlive) is recorded interrupted first (OwnerGone).
// A run without an owner this machine can check is returned unchanged.
//
// When the store refuses the record (a full disk, any write error), the
// run is returned as it truly stands all the same — interrupted, ended now
// — with an error wrapping ErrNotRecorded and the store's: a command that
// only reads shows it so (ReconciledSteps gives its steps), one that would
// go on from the record stops. Nothing is lost: Interrupt records the
// run's status last, so the run still reads running, and the next reader
// reconciles it again.
func Reconcile(ctx context.Context, st store.Store, run stratus.Run) (stratus.Run, error) {
	if !OwnerGoneOf(run) {
		return run, nil
	}
	now := time.Now().UTC()
	r, err := Interrupt(ctx, st, run, OwnerGone, now)
	if err != nil {
		run.Status, run.EndedAt = stratus.RunInterrupted, now
		return run, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return r, nil
}

// OwnerGoneOf reports whether run is recorded running (or waiting) while
// its owner is known dead: Reconcile records such a run interrupted.
func OwnerGoneOf(run stratus.Run) bool {
	if stratus.RunTerminal(run.Status) {
		return false
	}
	alive, known := OwnerAlive(run.Owner)
	return known && !alive
}

// ReconciledSteps returns steps (each with its latest attempt, attempts[i]
// for steps[i], nil when it has none) as Reconcile records them for a run
// whose owner is gone, interrupted at end: each step still running or
// waiting canceled (CanceledStep, reason OwnerGone), the others as they
// are. It writes nothing: it is what a reader shows when Reconcile could
// not record it (ErrNotRecorded).
func ReconciledSteps(steps []stratus.Step, attempts []*stratus.Attempt, end time.Time) ([]stratus.Step, []*stratus.Attempt) {
	outS, outA := slices.Clone(steps), slices.Clone(attempts)
	for i, s := range steps {
		if s.Status == stratus.StepRunning || s.Status == stratus.StepWaiting {
			outS[i], outA[i] = CanceledStep(s, attempts[i], TerminalCancelled, OwnerGone, end)
		}
	}
	return outS, outA
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
