package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// A worker that goes silent has its Task state time out on its heartbeat
// (docs/architecture.md § The compiled state machines: HeartbeatSeconds catches
// a dead worker); the state's Catch fails the run. The step, still recorded
// running, must say it timed out on its heartbeat and name the window —
// not that it was Cancelled because the run's execution ended FAILED. A
// supervisor turn still running then, begun after the execution stopped,
// keeps its job and the step it is about, and a duration that is not
// negative.
func TestFinish_AStepWhoseHeartbeatLapsedSaysSo(t *testing.T) {
	t.Parallel()
	src := strings.Replace(loopFlow, "budgets: BUDGETS", "budgets: { fix: 2 }", 1)
	x, hist, def, _ := executeWith(t, src, compiler.Options{HeartbeatSeconds: 1}, func(node string, _ int) string {
		if node == "write" {
			return silent
		}
		return "done"
	})
	if x.Status != "FAILED" {
		t.Fatalf("execution %s %s: %s; want FAILED", x.Status, x.Error, x.Cause)
	}

	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	started := x.StartDate.UTC()
	run := stratus.Run{ID: "r-1", TaskID: "t1", Flow: "f", Status: stratus.RunRunning, Execution: x.ARN, CreatedAt: started}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	open := func(node, kind string, visit int, value any, at time.Time) stratus.Step {
		t.Helper()
		s := stratus.Step{TID: "r-1." + node + "." + string(rune('0'+visit)), RunID: "r-1", Node: node, Kind: kind, Visit: visit,
			StepRef: node + "#1", DedupKey: node, Status: stratus.StepRunning, CreatedAt: at}
		if value != nil {
			s.Value, _ = json.Marshal(value)
		}
		if _, _, err := st.CreateStep(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateAttempt(ctx, stratus.Attempt{TID: s.TID, N: 1, Agent: node, Status: stratus.AttemptRunning, StartedAt: at}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	write := open("write", "agent", 1, nil, started)
	late := x.StopDate.UTC().Add(time.Minute) // the turn began after the execution had stopped
	turn := open("_supervisor", report.Kind, 1, report.SupervisorValue{StepRef: "supervisor#1", Node: "_supervisor", Job: "observe", For: write.TID, ForRef: "write#1"}, late)

	ex := historyExec{hist: hist}
	if _, err := Finish(ctx, Ports{Store: st, Sink: fs.New(t.TempDir()), Exec: ex}, run, report.Env{}, def, x); err != nil {
		t.Fatal(err)
	}

	a, _ := st.LatestAttempt(ctx, write.TID)
	if a.Terminal != TerminalTimedOut || !strings.Contains(a.Reason, "timed out on its heartbeat") || !strings.Contains(a.Reason, "HeartbeatSeconds 1 s") {
		t.Errorf("the silent step's attempt: %s %q; want TimedOut, on its heartbeat, naming HeartbeatSeconds 1 s", a.Terminal, a.Reason)
	}
	// internal/failclass: a lapsed heartbeat is a timeout.
	if a.Class != failclass.Timeout {
		t.Errorf("the silent step's attempt has class %q, want %s", a.Class, failclass.Timeout)
	}
	if s, _ := st.GetStep(ctx, write.TID); !strings.Contains(string(s.Value), "heartbeat") {
		t.Errorf("the silent step's value %s does not say why", s.Value)
	}

	s, _ := st.GetStep(ctx, turn.TID)
	var sv report.SupervisorValue
	json.Unmarshal(s.Value, &sv)
	if sv.Job != "observe" || sv.ForRef != "write#1" || sv.Outcome != stratus.StepCanceled || sv.Reason == "" {
		t.Errorf("the canceled turn's value %s: want its job and for_ref kept, outcome canceled with a reason", s.Value)
	}
	ta, _ := st.LatestAttempt(ctx, turn.TID)
	if ta.EndedAt.Before(ta.StartedAt) || s.EndedAt.Before(s.CreatedAt) {
		t.Errorf("the turn ends before it began: attempt %s..%s, step %s..%s", ta.StartedAt, ta.EndedAt, s.CreatedAt, s.EndedAt)
	}
	if ta.Terminal != TerminalCancelled || !strings.Contains(ta.Reason, "execution ended FAILED") {
		t.Errorf("the turn's attempt: %s %q; want Cancelled because the execution ended", ta.Terminal, ta.Reason)
	}
	if ta.Class != "" {
		t.Errorf("the canceled turn's attempt has class %q; a step canceled with its run failed of nothing itself", ta.Class)
	}
}

// historyExec is an executor that knows one execution's history.
type historyExec struct {
	executor.Executor
	hist []executor.HistoryEvent
}

func (h historyExec) GetExecutionHistory(context.Context, string) ([]executor.HistoryEvent, error) {
	return h.hist, nil
}

// README § Durable runs: a run's duration is the sum of its active spans.
// A resume adds the span that ended at the stop to what the run ran and
// begins a new one, so the days a run stood stopped before its resume
// are not counted.
func TestPrepareResume_TheIdleTimeBeforeAResumeIsNotTheRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Millisecond)
	run := stratus.Run{ID: "r-1", TaskID: "t1", Flow: "implementation", Status: stratus.RunFailed, CreatedAt: start, EndedAt: start.Add(10 * time.Minute)}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	for i, s := range []stratus.Step{
		step("planning", 1, stratus.StepCompleted, 0, `{"node":"planning","outcome":"done"}`),
		step("implementation", 1, stratus.StepFailed, 0, `{"node":"implementation","outcome":"failed"}`),
	} {
		s.TID, s.RunID, s.DedupKey, s.CreatedAt = "r-1.s"+string(rune('0'+i)), "r-1", s.Node, start
		if _, _, err := st.CreateStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	resumed, _, err := PrepareResume(ctx, st, run, builtinDef(t), Resume{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ActiveMS != (10*time.Minute).Milliseconds() || got.ResumedAt.IsZero() || !got.EndedAt.IsZero() || resumed.ActiveMS != got.ActiveMS {
		t.Fatalf("resumed run: active %d ms, resumed at %s, ended %s; want the first span's 600000 ms kept, a new span begun", got.ActiveMS, got.ResumedAt, got.EndedAt)
	}
	// It stops again after a minute: 11 minutes, not three days.
	got.Status, got.EndedAt = stratus.RunFailed, got.ResumedAt.Add(time.Minute)
	if d := got.Duration(time.Now()); d != 11*time.Minute {
		t.Errorf("duration %s, want 11m0s (10m, then 1m after the resume)", d)
	}
}

// fullSink is a sink on a disk that filled up: every Put is refused.
type fullSink struct{ sink.Sink }

func (fullSink) Put(_ context.Context, key string, _ []byte) error {
	return fmt.Errorf("fs sink: write /work/%s: %w", key, syscall.ENOSPC)
}

// docs/security.md § Output that did not persist: a summary the disk
// refuses does not lose how the run ended. Finish returns its Result all
// the same — the execution's status, its ctx dir — with a SummaryError
// naming where the summary would have been, and leaves the run unrecorded
// so that a runtime that runs Finish again can; RecordEnd records that
// end without the summary, so the run does not stay recorded running.
func TestFinish_ASummaryTheDiskRefusedStillEndsTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now().UTC().Add(-time.Minute)
	run := stratus.Run{ID: "r-1", TaskID: "t1", Flow: "f", Status: stratus.RunRunning, Execution: "x-1", CreatedAt: start}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	x := executor.Execution{ARN: "x-1", Status: executor.StatusFailed, Error: "stratus.Failed", Cause: "answer#1 failed", StartDate: start, StopDate: start.Add(time.Second)}
	res, err := Finish(ctx, Ports{Store: st, Sink: fullSink{fs.New(t.TempDir())}, Exec: historyExec{}}, run, report.Env{Config: cfg}, nil, x)
	var sum *SummaryError
	if !errors.As(err, &sum) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Finish: %v; want a *SummaryError wrapping ENOSPC", err)
	}
	if res == nil || res.Status != stratus.RunFailed || res.Run.Status != stratus.RunFailed || res.CtxDir == "" || len(res.Summary) != 0 {
		t.Fatalf("Finish's Result %+v; want the run failed, its ctx dir, no summary", res)
	}
	if res.SummaryErr == nil || strings.Join(res.SummaryErr.Keys, " ") != ".stratus/logs/t1/summary.json .stratus/logs/t1/summary.md" {
		t.Errorf("SummaryErr %+v; want it naming summary.json and summary.md", res.SummaryErr)
	}
	if got, _ := st.GetRun(ctx, run.ID); got.Status != stratus.RunRunning {
		t.Errorf("after Finish the run reads %s; want it not yet recorded (Finish can run again)", got.Status)
	}
	if err := RecordEnd(ctx, st, res); err != nil || res.RecordErr != nil {
		t.Fatalf("RecordEnd: %v (RecordErr %v)", err, res.RecordErr)
	}
	if got, _ := st.GetRun(ctx, run.ID); got.Status != stratus.RunFailed || got.EndedAt.IsZero() {
		t.Errorf("after RecordEnd the run reads %s (ended %v); want failed, ended", got.Status, got.EndedAt)
	}
}
