package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
)

// Ports are what Finish reads and writes through: the run's store, the
// sink its files and summary go to, and the executor that ran it.
type Ports struct {
	Store store.Store
	Sink  sink.Sink
	Exec  executor.Executor
}

// Result is how a run ended, the same on both runtimes.
type Result struct {
	Run    stratus.Run
	Status string // done, failed, manual_action_required, interrupted
	// Error and Cause are the execution's, Cause rewritten to say why the
	// run stopped when it did not end done (report.Why: the summary's
	// "Why the run stopped").
	Error, Cause string
	// Budgets is what the run spent of each budget, whatever its terminal
	// (SpentBudgets of the execution's history; a resumed run's counters
	// carry over).
	Budgets  map[string]int
	Overhead []time.Duration // per step transition: report -> next engine start
	// Summary holds the sink keys of summary.json and summary.md, CtxDir
	// the sink key of the ctx dir ("" when its placement cannot resolve).
	// Summary is empty when the summary could not be written (SummaryErr).
	Summary []string
	CtxDir  string
	// SummaryErr, when set, says the summary could not be written and
	// where it would have been (docs/security.md § Output that did not
	// persist).
	SummaryErr *SummaryError
	// RecordErr, when set, is why the run's end could not be recorded
	// (the store refused it): its records read running until a reader
	// reconciles it (Reconcile: interrupted, resumable).
	RecordErr error
}

// SummaryError is Finish's error when the sink refused the run's summary
// (a full disk, an unreachable bucket). Keys are the sink keys it would
// have been written to.
type SummaryError struct {
	Keys []string
	Err  error
}

func (e *SummaryError) Error() string {
	return fmt.Sprintf("the summary could not be written (%v); it would have been %s", e.Err, strings.Join(e.Keys, " and "))
}

func (e *SummaryError) Unwrap() error { return e.Err }

// Finish records the end of run's ended execution x, as every runtime
// does once a run's execution ends (docs/architecture.md § The run lifecycle:
// one owner of a run's end): the run's status (ExecutionStatus), what it
// spent of each budget and why it stopped (SpentBudgets and ReadStop over the
// execution's history, def its compiled definition; nil def: the stop line
// names the error only), and its summary, written to the sink from the final
// records whatever the terminal (docs/contracts.md § The summary artifacts) —
// before the run is recorded terminal, so a Finish that fails part-way can be
// run again. env is the run's environment (zero when its bundle is gone). A
// history that cannot be read is not fatal: the budgets and the stop line are
// then left out.
//
// Errors: a store read's, with a nil Result. Once the records are read,
// the Result is returned whatever fails after, with the run's true status
// and why it stopped, so that a caller can say how the run ended even when
// that end did not persist (docs/security.md § Output that did not
// persist): the store's error when the open steps or the run could not be
// recorded (the run is then not recorded terminal), or *SummaryError when
// the sink refused the summary (the run is then not recorded terminal
// either: a runtime that runs Finish again on an error does so; one that
// does not records it with RecordEnd).
func Finish(ctx context.Context, p Ports, run stratus.Run, env report.Env, def []byte, x executor.Execution) (*Result, error) {
	res := &Result{Error: x.Error, Cause: x.Cause, Status: ExecutionStatus(x)}
	if run.Status == stratus.RunInterrupted && res.Status != stratus.RunDone {
		// The operator's cancel recorded it interrupted before its
		// execution ended; how the stop ended the execution (ABORTED, or a
		// task failed by it) does not change that.
		res.Status = stratus.RunInterrupted
	}
	// No step runs past its execution's end: one still recorded running
	// (an aborted or timed-out execution ran no Catch) is canceled. Its
	// worker is the caller's to stop (the events function stops every
	// canceled step's; a worker also stops when its stats are refused).
	end := x.StopDate.UTC()
	if x.StopDate.IsZero() {
		end = time.Now().UTC()
	}
	hist, _ := p.Exec.GetExecutionHistory(ctx, x.ARN)
	_, cancelErr := CancelOpenWith(ctx, p.Store, run.ID, EndedUnder(x, hist, def), end, false)
	if cur, err := p.Store.GetRun(ctx, run.ID); err == nil {
		run.Workspace = cur.Workspace     // its head moved while it ran
		run.Publication = cur.Publication // its publish step pushed while it ran
	}
	res.Budgets = SpentBudgets(hist)
	run.Status, run.EndedAt = res.Status, end
	f, err := report.Collect(ctx, p.Store, run, res.Status, env)
	if err != nil {
		if cancelErr != nil {
			return nil, cancelErr
		}
		return nil, err
	}
	res.Run = run
	res.Overhead = report.Overhead(f)
	switch {
	case res.Status == stratus.RunInterrupted:
		f.Stop = &report.Stop{Interrupted: true}
	case res.Status != stratus.RunDone:
		f.Stop = ReadStop(hist, def, env.Flow, x.Error, x.Cause)
	}
	if res.Status != stratus.RunDone {
		if why := report.Why(f); why != "" {
			res.Cause = why // the summary's "Why the run stopped" says the same
		}
	}
	if env.Config != nil {
		if cd, err := projection.RunCtxDir(env.Config.Projection.Placement, run); err == nil {
			res.CtxDir = cd
		}
	}
	if cancelErr != nil {
		// The summary would list a step still running that is not: it
		// waits for the records (the next Finish, or a reader's Reconcile).
		res.RecordErr = cancelErr
		res.SummaryErr = &SummaryError{Keys: report.Keys(run.TaskID), Err: fmt.Errorf("the run's open steps could not be recorded first: %w", cancelErr)}
		return res, fmt.Errorf("record the end of run %s: %w", run.ID, cancelErr)
	}
	keys, err := report.Write(ctx, p.Sink, f)
	if err != nil {
		res.SummaryErr = &SummaryError{Keys: report.Keys(run.TaskID), Err: err}
		return res, fmt.Errorf("run %s: %w", run.ID, res.SummaryErr)
	}
	res.Summary = keys
	if err := p.Store.UpdateRun(ctx, run); err != nil {
		res.RecordErr = err
		return res, fmt.Errorf("record the end of run %s: %w", run.ID, err)
	}
	return res, nil
}

// RecordEnd records the end Finish returned with a *SummaryError: the
// run's status stands without its summary. A runtime that runs Finish
// again on an error (the AWS events function, retried) does not call it;
// one that does not (an embedded run: nothing else would end it, and it
// would read interrupted) does. A store error is kept in res.RecordErr
// and returned.
func RecordEnd(ctx context.Context, st store.Store, res *Result) error {
	if err := st.UpdateRun(ctx, res.Run); err != nil {
		res.RecordErr = err
		return err
	}
	return nil
}

// EndedUnder returns the terminal and the reason each step still open when
// execution x ended is canceled with (CancelOpenWith). A step whose own Task
// state timed out — the state's last task event in hist is TaskTimedOut — ends
// TimedOut and says how: no heartbeat within the state's HeartbeatSeconds
// (States.HeartbeatTimeout; on AWS States.Timeout before the state's
// TimeoutSeconds), or past its TimeoutSeconds, each window read from def, the
// run's compiled definition (docs/architecture.md § The compiled state
// machines). Any other step was cancelled because the execution ended under it.
// hist and def may be empty (not readable): the reason then says less.
func EndedUnder(x executor.Execution, hist []executor.HistoryEvent, def []byte) func(stratus.Step) (terminal, reason string) {
	type lapse struct {
		err string
		ran time.Duration // TaskStarted to TaskTimedOut; 0 unknown
	}
	lapsed := map[string]lapse{} // by state
	began := map[string]time.Time{}
	for _, e := range hist {
		switch e.Type {
		case executor.EventTaskScheduled, executor.EventTaskStarted:
			delete(lapsed, e.State)
			began[e.State] = e.Timestamp
		case executor.EventTaskSucceeded, executor.EventTaskFailed:
			delete(lapsed, e.State)
		case executor.EventTaskTimedOut:
			l := lapse{err: e.Error}
			if b := began[e.State]; !b.IsZero() && !e.Timestamp.IsZero() {
				l.ran = e.Timestamp.Sub(b)
			}
			lapsed[e.State] = l
		}
	}
	var d struct {
		States map[string]struct {
			TimeoutSeconds, HeartbeatSeconds int
		}
	}
	json.Unmarshal(def, &d)
	ended := fmt.Sprintf("the run's execution ended %s while this step ran", x.Status)
	return func(s stratus.Step) (string, string) {
		l, ok := lapsed[s.Node]
		if !ok {
			return TerminalCancelled, ended
		}
		w := d.States[s.Node]
		heartbeat := fmt.Sprintf("the state's HeartbeatSeconds (%s)", l.err)
		if w.HeartbeatSeconds > 0 {
			heartbeat = fmt.Sprintf("HeartbeatSeconds %d s (%s)", w.HeartbeatSeconds, l.err)
		}
		deadline := fmt.Sprintf("its state's TimeoutSeconds (%s)", l.err)
		if w.TimeoutSeconds > 0 {
			deadline = fmt.Sprintf("its TimeoutSeconds %d s (%s)", w.TimeoutSeconds, l.err)
		}
		var why string
		switch {
		case l.err == asl.ErrHeartbeatTimeout,
			l.err == asl.ErrTimeout && w.HeartbeatSeconds > 0 && l.ran > 0 && l.ran < time.Duration(w.TimeoutSeconds)*time.Second:
			why = "timed out on its heartbeat: its worker sent none within " + heartbeat
		case l.err == asl.ErrTimeout && w.HeartbeatSeconds > 0 && l.ran == 0:
			why = fmt.Sprintf("timed out: no heartbeat from its worker within HeartbeatSeconds %d s, or it ran past %s", w.HeartbeatSeconds, deadline)
		default:
			why = "timed out: it ran past " + deadline
		}
		return TerminalTimedOut, fmt.Sprintf("%s; the run's execution then ended %s", why, x.Status)
	}
}

// TerminalTimedOut is the terminal of an attempt whose Task state timed
// out (EndedUnder) before its worker reported.
const TerminalTimedOut = "TimedOut"
