package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// A step still running shows the time it has run so far (`running 42s`),
// never `duration=0s`; one that ended shows its duration.
func TestStatus_ARunningStepShowsItsTimeSoFar(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(42 * time.Second)
	running := stepStatus(runview.StepView{Step: stratus.Step{StepRef: "implementation#1", Node: "implementation", Kind: "agent", Status: stratus.StepRunning},
		Attempt: &stratus.Attempt{N: 1, Status: stratus.AttemptRunning, StartedAt: t0}}, now)
	ended := stepStatus(runview.StepView{Step: stratus.Step{StepRef: "planning#1", Node: "planning", Kind: "agent", Status: stratus.StepCompleted}, Outcome: "done",
		Attempt: &stratus.Attempt{N: 1, Status: stratus.AttemptSubmitted, StartedAt: t0, EndedAt: t0.Add(3 * time.Second)}}, now)
	if running.ElapsedMS != 42_000 || running.DurationMS != 0 || ended.DurationMS != 3000 || ended.ElapsedMS != 0 {
		t.Fatalf("running %+v, ended %+v", running, ended)
	}
	var out bytes.Buffer
	printStatus(IO{Out: &out}, StatusResult{RunID: "r-1", Status: stratus.RunRunning, CreatedAt: t0, DurationMS: 42_000, Steps: []StepStatus{ended, running}})
	for _, want := range []string{"attempt=1 duration=3.0s", "attempt=1 running 42s", "(running 42s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "duration=0") {
		t.Errorf("a running step shows duration=0s:\n%s", out.String())
	}
}

// README § Durable runs: status shows a run's duration as the sum of its
// active spans and says so when it was resumed.
func TestStatus_ARunsDurationIsItsActiveSpans(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printStatus(IO{Out: &out}, StatusResult{RunID: "r-1", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(48 * time.Hour),
		DurationMS: (7 * time.Minute).Milliseconds(), Resumes: 1})
	for _, want := range []string{"(ran 7m00s)", "resumed:  1 time; its time is the sum of its active spans"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// A duration under a second prints in ms (english.Duration): a 333 ms run
// once read "ran 0s", a 57 ms step "duration=57.123456ms".
func TestStatus_DurationsUnderASecondInMilliseconds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	step := stepStatus(runview.StepView{Step: stratus.Step{StepRef: "planning#1", Node: "planning", Kind: "agent", Status: stratus.StepCompleted, CreatedAt: t0, EndedAt: t0.Add(112 * time.Millisecond)},
		Outcome: "done", Attempt: &stratus.Attempt{N: 1, Status: stratus.AttemptSubmitted, StartedAt: t0.Add(55 * time.Millisecond), EndedAt: t0.Add(112*time.Millisecond + 123*time.Microsecond)}}, t0.Add(time.Second))
	var out bytes.Buffer
	printStatus(IO{Out: &out}, StatusResult{RunID: "r-1", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(333 * time.Millisecond), DurationMS: 333, Steps: []StepStatus{step}})
	for _, want := range []string{"(ran 333ms)", "attempt=1 duration=57ms "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// A step's duration is runview.StepView.Span's, the one the viewer's step
// table and timeline show: its latest attempt's start to its end, not the
// step's creation (before its worker was dispatched) to its end; a step
// no worker ran, its own span.
func TestStatus_AStepsDurationIsItsSpan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	worker := runview.StepView{Step: stratus.Step{StepRef: "planning#1", Kind: "agent", Status: stratus.StepCompleted, CreatedAt: t0, EndedAt: t0.Add(112 * time.Millisecond)},
		Attempt: &stratus.Attempt{N: 1, Status: stratus.AttemptSubmitted, StartedAt: t0.Add(55 * time.Millisecond), EndedAt: t0.Add(112 * time.Millisecond)}}
	gate := runview.StepView{Step: stratus.Step{StepRef: "gate#1", Kind: "hitl", Status: stratus.StepCompleted, CreatedAt: t0, EndedAt: t0.Add(3 * time.Second)}}
	for _, sv := range []runview.StepView{worker, gate} {
		if got, want := stepStatus(sv, t0.Add(time.Hour)).DurationMS, sv.Took(t0.Add(time.Hour)).Milliseconds(); got != want {
			t.Errorf("%s: duration_ms %d, want the span's %d", sv.Step.StepRef, got, want)
		}
	}
	if got := stepStatus(worker, t0).DurationMS; got != 57 {
		t.Errorf("planning#1: duration_ms %d, want 57 (the attempt's)", got)
	}
}

// README § Cost and token caps: a run whose engines reported tokens and no
// cost has an unknown cost, never $0. runs says "unknown (N attempts
// reporting none)" as the viewer does, and runs --json and status --json
// give cost_usd null beside unpriced_attempts (runs --json printed 0).
func TestRuns_AnUnpricedRunsCostIsUnknown(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t) // the script engine reports tokens, no cost
	r := runCLI(t, "runs", "--dir", dir)
	if r.code != 0 || !regexp.MustCompile(`unknown \(\d+ attempts reporting none\)\n$`).MatchString(r.stdout) || strings.Contains(r.stdout, "$0.0000") {
		t.Errorf("runs: exit %d, want the cost unknown:\n%s", r.code, r.stdout)
	}
	for _, args := range [][]string{{"runs", "--dir", dir, "--json"}, {"status", runID, "--dir", dir, "--json"}} {
		r := runCLI(t, args...)
		out := strings.TrimPrefix(strings.TrimSpace(r.stdout), "[")
		var got map[string]any
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&got); err != nil || r.code != 0 {
			t.Fatalf("%v: exit %d %v\n%s", args, r.code, err, r.stdout)
		}
		cost, has := got["cost_usd"]
		if !has || cost != nil || got["unpriced_attempts"] == nil || got["tokens"] == float64(0) {
			t.Errorf("%v: cost_usd %v (present %v), unpriced_attempts %v, tokens %v; want null beside the unpriced attempts", args, cost, has, got["unpriced_attempts"], got["tokens"])
		}
	}
}

// internal/failclass: status shows each attempt of a step with its
// failure class and the reset its failure named — the latest on the
// step's line (and the step's class and retry_at in --json), the earlier
// ones under it, and every one in the step's attempts in --json.
func TestStatus_EachAttemptShowsItsFailureClass(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	reset := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	run := stratus.Run{ID: "r-1", TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunFailed, WorkDir: dir, CreatedAt: t0, EndedAt: t0.Add(time.Hour)}
	step := stratus.Step{TID: "r-1.implementation.1", RunID: "r-1", Node: "implementation", Kind: "agent", Visit: 1, StepRef: "implementation#1",
		DedupKey: "k", Status: stratus.StepFailed, Verdict: "failed", CreatedAt: t0}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateStep(ctx, step); err != nil {
		t.Fatal(err)
	}
	for _, a := range []stratus.Attempt{
		{TID: step.TID, N: 1, Agent: "implementation", Status: stratus.AttemptFailed, Terminal: "Failed", Reason: "codex turn failed: You’ve hit your usage limit.",
			Class: "rate_limited", RetryAt: reset, StartedAt: t0, EndedAt: t0.Add(time.Minute), Resolved: stratus.Resolved{Provider: "codex"}},
		{TID: step.TID, N: 2, Agent: "implementation", Status: stratus.AttemptFailed, Terminal: "Failed", Reason: "claude: API Error: 529 Overloaded.",
			Class: "provider_unavailable", StartedAt: t0.Add(2 * time.Minute), EndedAt: t0.Add(3 * time.Minute), Resolved: stratus.Resolved{Provider: "claude"}},
	} {
		if err := st.CreateAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	var out bytes.Buffer
	if err := runStatus(&StatusOptions{IO: IO{Out: &out, Err: io.Discard}, RunID: "r-1", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"attempt=2 duration=1m00s tokens=0/0 class=provider_unavailable",
		`      attempt 1: failed provider=codex class=rate_limited retry_at=2026-12-04T21:00:00Z reason="codex turn failed: You’ve hit your usage limit."`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runStatus(&StatusOptions{IO: IO{Out: &out, Err: io.Discard}, RunID: "r-1", Dir: dir, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var res StatusResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 {
		t.Fatalf("steps %+v", res.Steps)
	}
	s := res.Steps[0]
	if s.Class != "provider_unavailable" || !s.RetryAt.IsZero() || len(s.Attempts) != 2 ||
		s.Attempts[0].Class != "rate_limited" || !s.Attempts[0].RetryAt.Equal(reset) || s.Attempts[0].Provider != "codex" ||
		s.Attempts[1].Class != "provider_unavailable" || s.Attempts[1].Attempt != 2 {
		t.Errorf("step %+v; want class provider_unavailable, attempt 1 rate_limited until %v on codex, attempt 2 provider_unavailable", s, reset)
	}
	if !strings.Contains(out.String(), `"retry_at": "2026-12-04T21:00:00Z"`) {
		t.Errorf("--json has no RFC 3339 retry_at:\n%s", out.String())
	}
}

// A step that has not ended shows its time so far whatever it waits on: a
// hitl gate no worker runs reads `waiting  for 42s`, never nothing or 0s.
func TestStatus_AWaitingGateShowsItsTimeSoFar(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	gate := stepStatus(runview.StepView{Step: stratus.Step{StepRef: "gate#1", Node: "gate", Kind: "hitl", Status: stratus.StepWaiting, CreatedAt: t0}}, t0.Add(42*time.Second))
	if gate.ElapsedMS != 42_000 || gate.DurationMS != 0 {
		t.Fatalf("gate %+v", gate)
	}
	var out bytes.Buffer
	printStatus(IO{Out: &out}, StatusResult{RunID: "r-1", Status: StatusWaiting, CreatedAt: t0, Steps: []StepStatus{gate}})
	if !regexp.MustCompile(`gate#1 +gate +waiting +for 42s`).MatchString(out.String()) || strings.Contains(out.String(), "0s") {
		t.Errorf("status:\n%s", out.String())
	}
}
