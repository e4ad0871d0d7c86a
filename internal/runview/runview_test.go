package runview_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/worker"
)

// recorder writes records the way worker.Service does, for one run.
type recorder struct {
	t   *testing.T
	ctx context.Context
	st  store.Store
	run stratus.Run
	t0  time.Time
}

func setup(t *testing.T) *recorder {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &recorder{t: t, ctx: context.Background(), st: st, t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r.run = stratus.Run{ID: "r-1", TaskID: "t1", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: r.t0}
	if err := st.CreateRun(r.ctx, r.run); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *recorder) step(node, kind string, visit int) stratus.Step {
	r.t.Helper()
	s := stratus.Step{TID: r.run.ID + "." + node + "." + string(rune('0'+visit)), RunID: r.run.ID, Node: node, Kind: kind, Visit: visit,
		StepRef: node + "#" + string(rune('0'+visit)), Status: stratus.StepRunning, CreatedAt: r.t0}
	if _, _, err := r.st.CreateStep(r.ctx, s); err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *recorder) attempt(s stratus.Step, n int) stratus.Attempt {
	r.t.Helper()
	a := stratus.Attempt{TID: s.TID, N: n, Agent: s.Node, Status: stratus.AttemptRunning, StartedAt: r.t0.Add(time.Duration(n) * time.Second)}
	if err := r.st.CreateAttempt(r.ctx, a); err != nil {
		r.t.Fatal(err)
	}
	return a
}

func (r *recorder) end(s stratus.Step, status, verdict string, value any) {
	r.t.Helper()
	raw, _ := json.Marshal(value)
	s.Status, s.Verdict, s.Value, s.EndedAt = status, verdict, raw, r.t0.Add(time.Minute)
	if err := r.st.UpdateStep(r.ctx, s); err != nil {
		r.t.Fatal(err)
	}
}

func (r *recorder) submit(a stratus.Attempt, d time.Duration, in, out int64) {
	r.t.Helper()
	a.Status, a.Terminal, a.EndedAt, a.PromptTokens, a.CompletionTokens = stratus.AttemptSubmitted, "Captured", a.StartedAt.Add(d), in, out
	if err := r.st.UpdateAttempt(r.ctx, a); err != nil {
		r.t.Fatal(err)
	}
}

func lines(t *testing.T, tr *runview.Tracker) []string {
	t.Helper()
	evs, err := tr.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, progress.Line(e))
	}
	return out
}

// The lines a follower prints are the lines the worker service's events
// print (progress.Line), each once, in step order: a start per
// attempt of a worker step, its end with the attempt's terminal, duration
// and tokens; a publish step's start and end; a skipped node's end alone;
// a supervisor turn's start and end.
func TestTracker_SameProgressLinesAsTheWorkerService(t *testing.T) {
	r := setup(t)
	tr := runview.NewTracker(r.st, r.run.ID)

	plan := r.step("planning", "agent", 1)
	a1 := r.attempt(plan, 1)
	if got, want := lines(t, tr), []string{progress.Line(worker.Event{Type: worker.EventStepStarted, StepRef: "planning#1", Node: "planning", Attempt: 1})}; !slices.Equal(got, want) {
		t.Fatalf("after the first attempt:\n got %q\nwant %q", got, want)
	}
	if got := lines(t, tr); len(got) != 0 {
		t.Fatalf("a second poll with nothing new returned %q", got)
	}
	r.submit(a1, 1500*time.Millisecond, 1200, 300)
	r.end(plan, stratus.StepCompleted, "done", worker.StepValue{StepRef: "planning#1", Node: "planning", Attempt: 1, Outcome: "done"})

	review := r.step("review", "evaluator", 1)
	r.attempt(review, 1)
	a2 := r.attempt(review, 2) // a rekick: both starts are reported
	r.submit(a2, 2*time.Second, 1800, 200)
	r.end(review, stratus.StepCompleted, "rework", worker.StepValue{StepRef: "review#1", Node: "review", Attempt: 2, Outcome: "rework", Reason: "1 high finding"})

	skipped := r.step("docs", "agent", 1)
	r.end(skipped, stratus.StepCompleted, worker.OutcomeSkipped, worker.StepValue{StepRef: "docs#1", Node: "docs", Outcome: "skipped", Reason: "disabled by the task"})

	pub := r.step("publish", "publish", 1)
	sup := r.step("supervisor", report.Kind, 1)
	r.end(sup, stratus.StepRunning, "", report.SupervisorValue{StepRef: "supervisor#1", Job: report.JobFinalize, ForRef: "publish#1"})
	sa := r.attempt(sup, 1)
	r.submit(sa, time.Second, 600, 100)
	r.end(sup, stratus.StepCompleted, "done", report.SupervisorValue{StepRef: "supervisor#1", Job: report.JobFinalize, ForRef: "publish#1", Attempt: 1, Outcome: "done"})
	r.end(pub, stratus.StepCompleted, "done", worker.StepValue{StepRef: "publish#1", Node: "publish", Outcome: "done"})

	want := []string{
		progress.Line(worker.Event{Type: worker.EventStepEnded, StepRef: "planning#1", Node: "planning", Attempt: 1, Terminal: "Captured", Outcome: "done", Duration: 1500 * time.Millisecond, PromptTokens: 1200, CompletionTokens: 300}),
		progress.Line(worker.Event{Type: worker.EventStepStarted, StepRef: "review#1", Node: "review", Attempt: 1}),
		progress.Line(worker.Event{Type: worker.EventStepStarted, StepRef: "review#1", Node: "review", Attempt: 2}),
		progress.Line(worker.Event{Type: worker.EventStepEnded, StepRef: "review#1", Node: "review", Attempt: 2, Terminal: "Captured", Outcome: "rework", Reason: "1 high finding", Duration: 2 * time.Second, PromptTokens: 1800, CompletionTokens: 200}),
		progress.Line(worker.Event{Type: worker.EventStepEnded, StepRef: "docs#1", Node: "docs", Outcome: "skipped", Reason: "disabled by the task"}),
		progress.Line(worker.Event{Type: worker.EventStepStarted, StepRef: "publish#1", Node: "publish"}),
		progress.Line(worker.Event{Type: worker.EventStepEnded, StepRef: "publish#1", Node: "publish", Outcome: "done"}),
		progress.Line(worker.Event{Type: worker.EventSupervisorStarted, StepRef: "supervisor#1", Node: report.JobFinalize, Attempt: 1, Reason: "publish#1"}),
		progress.Line(worker.Event{Type: worker.EventSupervisorEnded, StepRef: "supervisor#1", Node: report.JobFinalize, Attempt: 1, Terminal: "Captured", Outcome: "done"}),
	}
	if got := lines(t, tr); !slices.Equal(got, want) {
		t.Fatalf("lines:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if got := lines(t, tr); len(got) != 0 {
		t.Fatalf("ended steps were reported again: %q", got)
	}
}

// A step whose dispatch failed before any attempt ends with its reason;
// a hitl step prints its wait, then its end with the answer.
func TestTracker_FailedDispatchAndHITLWait(t *testing.T) {
	r := setup(t)
	tr := runview.NewTracker(r.st, r.run.ID)
	bad := r.step("build", "agent", 1)
	r.end(bad, stratus.StepFailed, "", worker.StepValue{StepRef: "build#1", Node: "build", Outcome: "failed", Reason: "no provider x"})
	gate := r.step("approve", "hitl", 1)
	deadline := r.t0.Add(time.Hour)
	gate.Status = worker.StepWaiting
	gate.Value, _ = json.Marshal(worker.HITLValue{StepRef: "approve#1", Node: "approve", Signal: worker.SignalApproval, Request: "Ship it?", Deadline: deadline})
	if err := r.st.UpdateStep(r.ctx, gate); err != nil {
		t.Fatal(err)
	}
	got := lines(t, tr)
	want := []string{
		`stratus: end   build#1          node=build attempt=0 terminal=- verdict=failed duration=0ms tokens=0/0 reason="no provider x"`,
		"stratus: wait  approve#1        node=approve approval: Ship it? — reply with: stratus approve r-1 approve | stratus reject r-1 approve --reason TEXT (before " + deadline.Format(time.RFC3339) + ")",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lines:\n got %q\nwant %q", got, want)
	}
	r.end(gate, stratus.StepCompleted, "approved", worker.HITLValue{StepRef: "approve#1", Node: "approve", Signal: worker.SignalApproval, Outcome: "approved", Answer: "yes,\n  ship"})
	got = lines(t, tr)
	if len(got) != 1 || !strings.HasPrefix(got[0], "stratus: end   approve#1        node=approve attempt=0 terminal=- verdict=approved duration=1m00s") ||
		!strings.HasSuffix(got[0], `reason="yes, ship"`) {
		t.Fatalf("hitl end = %q", got)
	}
}

// Load shows each step with its verdict, its latest attempt and, for a
// supervisor turn, its job; an unknown run is ENOTFOUND.
func TestLoad_StepsWithVerdicts(t *testing.T) {
	r := setup(t)
	s := r.step("review", "evaluator", 1)
	a := r.attempt(s, 1)
	r.submit(a, time.Second, 10, 5)
	r.end(s, stratus.StepCompleted, "accept", worker.StepValue{StepRef: "review#1", Node: "review", Attempt: 1, Outcome: "accept"})
	p := r.step("publish", "publish", 1)
	r.end(p, stratus.StepFailed, "", worker.StepValue{StepRef: "publish#1", Node: "publish", Outcome: "failed", Reason: "disk full"})
	sup := r.step("supervisor", report.Kind, 1)
	r.end(sup, stratus.StepRunning, "", report.SupervisorValue{Job: report.JobObserve, ForRef: "review#1"})

	v, err := runview.Load(r.ctx, r.st, r.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Steps) != 3 {
		t.Fatalf("%d steps", len(v.Steps))
	}
	if s := v.Steps[0]; s.Outcome != "accept" || s.Attempt == nil || s.Attempt.PromptTokens != 10 || !s.Ended() {
		t.Errorf("review: %+v", s)
	}
	if s := v.Steps[1]; s.Outcome != "failed" || s.Reason != "disk full" || s.Attempt != nil {
		t.Errorf("publish: %+v", s)
	}
	if s := v.Steps[2]; s.Job != report.JobObserve || s.For != "review#1" || s.Outcome != "" || s.Ended() {
		t.Errorf("supervisor: %+v", s)
	}
	if _, err := runview.Load(r.ctx, r.st, "r-none"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("unknown run: %v, want ENOTFOUND", err)
	}
}

// README.md § Live progress: a follower sees a running attempt's counters as
// its runner posts them: a step_progress event each time they move, none
// while they stay, none before the first post or after the end.
func TestTracker_ProgressWhenARunningAttemptsCountersMove(t *testing.T) {
	r := setup(t)
	tr := runview.NewTracker(r.st, r.run.ID)
	impl := r.step("implementation", "agent", 1)
	a := r.attempt(impl, 1)
	poll := func() []worker.Event {
		t.Helper()
		evs, err := tr.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []worker.Event
		for _, e := range evs {
			if e.Type == worker.EventStepProgress {
				out = append(out, e)
			}
		}
		return out
	}
	if got := poll(); len(got) != 0 {
		t.Fatalf("progress before any stats: %+v", got)
	}
	cost := 0.5
	a.Steps, a.PromptTokens, a.CompletionTokens, a.CostUSD = 4, 9000, 700, &cost
	if err := r.st.UpdateAttempt(r.ctx, a); err != nil {
		t.Fatal(err)
	}
	got := poll()
	if len(got) != 1 || got[0].Steps != 4 || got[0].PromptTokens != 9000 || got[0].CompletionTokens != 700 || got[0].CostUSD == nil || *got[0].CostUSD != 0.5 ||
		got[0].StepRef != "implementation#1" || got[0].Attempt != 1 || got[0].Duration <= 0 {
		t.Fatalf("progress %+v; want one event with the posted counters", got)
	}
	if got := poll(); len(got) != 0 {
		t.Fatalf("unchanged counters reported again: %+v", got)
	}
	a.Steps = 5
	r.st.UpdateAttempt(r.ctx, a)
	if got := poll(); len(got) != 1 || got[0].Steps != 5 {
		t.Fatalf("progress %+v; want steps 5", got)
	}
	r.submit(a, time.Minute, 9500, 800)
	r.end(impl, stratus.StepCompleted, "done", worker.StepValue{StepRef: "implementation#1", Node: "implementation", Attempt: 1, Outcome: "done"})
	if got := poll(); len(got) != 0 {
		t.Fatalf("progress of an ended step: %+v", got)
	}
}

// README § Durable runs: `stratus runs` (List) shows a run's duration as
// the sum of its active spans: a run resumed two days after it failed ran
// its first span and its second, not the two days between.
func TestList_DurationIsTheRunsActiveSpans(t *testing.T) {
	t.Parallel()
	r := setup(t)
	run := r.run
	run.Status, run.ActiveMS = stratus.RunDone, (5 * time.Minute).Milliseconds()
	run.ResumedAt = r.t0.Add(48 * time.Hour)
	run.EndedAt = run.ResumedAt.Add(2 * time.Minute)
	run.Resumes = 1
	if err := r.st.UpdateRun(r.ctx, run); err != nil {
		t.Fatal(err)
	}
	ls, err := runview.List(r.ctx, r.st, 0)
	if err != nil || len(ls) != 1 {
		t.Fatalf("List: %v %v", ls, err)
	}
	if got := ls[0].Duration(); got != 7*time.Minute {
		t.Errorf("duration %s, want 7m0s (5m, then 2m after the resume)", got)
	}
}

// README § Cost and token caps: a cost no attempt reported, while some
// used a provider, is unknown, never free. runs --json gives it as
// cost_usd null (it printed 0); a known cost, 0 included, as a number,
// with unpriced_attempts beside a partial one.
func TestRunLine_JSONCostNullWhenUnknown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		spend lifecycle.Spend
		want  string
	}{
		{"none reported", lifecycle.Spend{Tokens: 12310, Unpriced: 4}, `"cost_usd":null`},
		{"all reported", lifecycle.Spend{CostUSD: 0.75, Tokens: 24}, `"cost_usd":0.75`},
		{"nothing used", lifecycle.Spend{}, `"cost_usd":0`},
		{"some reported", lifecycle.Spend{CostUSD: 0.5, Tokens: 30, Unpriced: 1}, `"cost_usd":0.5`},
	} {
		b, err := json.Marshal(runview.RunLine{RunID: "r-1", Spend: c.spend})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) || strings.Count(string(b), `"cost_usd"`) != 1 {
			t.Errorf("%s: %s; want one %s", c.name, b, c.want)
		}
		if c.spend.Unpriced > 0 && !strings.Contains(string(b), fmt.Sprintf(`"unpriced_attempts":%d`, c.spend.Unpriced)) {
			t.Errorf("%s: %s; want unpriced_attempts", c.name, b)
		}
	}
}

// fullStore is a store on a disk that filled up: it reads, and refuses
// every update as SQLite then does.
type fullStore struct{ store.Store }

var errStoreFull = errors.New("database or disk is full (13)")

func (fullStore) UpdateRun(context.Context, stratus.Run) error         { return errStoreFull }
func (fullStore) UpdateStep(context.Context, stratus.Step) error       { return errStoreFull }
func (fullStore) UpdateAttempt(context.Context, stratus.Attempt) error { return errStoreFull }

// deadOwner is the owner of a process that has exited (lifecycle.Owner's
// form: host/pid/start).
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to outlive: %v", err)
	}
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d/", host, cmd.Process.Pid)
	if alive, known := lifecycle.OwnerAlive(owner); alive || !known {
		t.Skipf("cannot tell that owner %s is gone on this machine", owner)
	}
	return owner
}

// docs/security.md § Output that did not persist: a reader shows a run
// whose owner is gone as it truly stands — interrupted, its open step
// canceled, its running attempt failed — even when the store refuses to
// record that (a full disk): LoadReconciled and List say so (NotRecorded,
// Note) rather than fail, and leave the records as they were; the next
// reader whose store takes the record records it, and says nothing more.
func TestLoadReconciled_AKilledRunReadsInterruptedWhenItsRecordIsRefused(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.run.Owner = deadOwner(t)
	if err := r.st.UpdateRun(r.ctx, r.run); err != nil {
		t.Fatal(err)
	}
	first := r.step("first", "agent", 1)
	r.submit(r.attempt(first, 1), time.Second, 1, 1)
	r.end(first, stratus.StepCompleted, "done", worker.StepValue{StepRef: "first#1", Outcome: "done"})
	answer := r.step("answer", "agent", 1)
	r.attempt(answer, 1)
	full := fullStore{r.st}

	v, err := runview.LoadReconciled(r.ctx, full, r.run.ID, runview.All)
	if err != nil {
		t.Fatalf("LoadReconciled on a full store: %v; want the run shown", err)
	}
	if v.Run.Status != stratus.RunInterrupted || v.Run.EndedAt.IsZero() || !errors.Is(v.NotRecorded, lifecycle.ErrNotRecorded) || !stratus.StorageFull(v.NotRecorded) {
		t.Errorf("the run reads %s (ended %v), NotRecorded %v; want interrupted, ended, not recorded because the store is full", v.Run.Status, v.Run.EndedAt, v.NotRecorded)
	}
	var got []string
	for _, s := range v.Steps {
		a := "-"
		if s.Attempt != nil {
			a = s.Attempt.Status
		}
		got = append(got, s.Step.StepRef+":"+s.Step.Status+"/"+a)
	}
	if want := "first#1:completed/submitted answer#1:canceled/failed"; strings.Join(got, " ") != want {
		t.Errorf("steps %s; want %s", strings.Join(got, " "), want)
	}
	ls, err := runview.List(r.ctx, full, 0)
	if err != nil || len(ls) != 1 {
		t.Fatalf("List on a full store: %v, %v; want the run listed", ls, err)
	}
	if ls[0].Status != stratus.RunInterrupted || !strings.Contains(ls[0].Note, "could not be recorded") || !strings.Contains(ls[0].Note, "database or disk is full") {
		t.Errorf("List: %s, note %q; want interrupted, the note saying it could not be recorded and why", ls[0].Status, ls[0].Note)
	}
	if run, _ := r.st.GetRun(r.ctx, r.run.ID); run.Status != stratus.RunRunning {
		t.Errorf("the refused record reads %s; want it left running for the next reader", run.Status)
	}

	v, err = runview.LoadReconciled(r.ctx, r.st, r.run.ID, runview.All)
	if err != nil || v.Run.Status != stratus.RunInterrupted || v.NotRecorded != nil {
		t.Fatalf("LoadReconciled once the store takes it: %v, %v, NotRecorded %v; want interrupted, recorded", err, v.Run.Status, v.NotRecorded)
	}
	if run, _ := r.st.GetRun(r.ctx, r.run.ID); run.Status != stratus.RunInterrupted {
		t.Errorf("the record reads %s once the store takes it; want interrupted", run.Status)
	}
	if ls, _ := runview.List(r.ctx, r.st, 0); len(ls) != 1 || ls[0].Note != "" {
		t.Errorf("List once recorded: %+v; want no note", ls)
	}
}

// README § Transient failures: a follower prints a retried attempt's
// retry line between its start and the next attempt's (even when both
// happened between two polls), a park once per park, and the end.
func TestTracker_RetryAndParkLinesAsTheWorkerService(t *testing.T) {
	r := setup(t)
	tr := runview.NewTracker(r.st, r.run.ID)
	s := r.step("impl", "agent", 1)
	fail := func(a stratus.Attempt) stratus.Attempt {
		a.Status, a.Terminal, a.EndedAt, a.Class = stratus.AttemptFailed, "Failed", a.StartedAt.Add(time.Second), "rate_limited"
		if err := r.st.UpdateAttempt(r.ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	value := func(status, outcome string, n int, reason string) {
		raw, _ := json.Marshal(worker.StepValue{StepRef: "impl#1", Node: "impl", Attempt: n, Outcome: outcome, Reason: reason})
		s.Status, s.Value = status, raw
		if err := r.st.UpdateStep(r.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ev := func(typ string, n int, reason string) string {
		e := worker.Event{Type: typ, StepRef: "impl#1", Node: "impl", Attempt: n, Reason: reason}
		if typ != worker.EventStepStarted {
			e.Terminal = "Failed"
		}
		if typ == worker.EventStepRetrying {
			e.Outcome, e.Duration = "retrying", time.Second
		}
		return progress.Line(e)
	}
	fail(r.attempt(s, 1))
	value(stratus.StepRunning, "retrying", 1, "attempt 1 on a failed (rate_limited): attempt 2 runs on b in 1s")
	r.attempt(s, 2) // started before the follower polled
	want := []string{ev(worker.EventStepStarted, 1, ""), ev(worker.EventStepRetrying, 1, "attempt 1 on a failed (rate_limited): attempt 2 runs on b in 1s"), ev(worker.EventStepStarted, 2, "")}
	if got := lines(t, tr); !slices.Equal(got, want) {
		t.Fatalf("a retry:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	a2, _ := r.st.GetAttempt(r.ctx, s.TID, 2)
	fail(a2)
	value(stratus.StepParked, "parked", 2, "every provider rate-limited")
	if got, want := lines(t, tr), []string{ev(worker.EventStepParked, 2, "every provider rate-limited")}; !slices.Equal(got, want) {
		t.Fatalf("a park:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if got := lines(t, tr); len(got) != 0 {
		t.Fatalf("a park was reported again: %q", got)
	}
}
