package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/runview"
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
	for _, want := range []string{"attempt=1 duration=3s", "attempt=1 running 42s", "(running 42s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "duration=0s") {
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
	for _, want := range []string{"(ran 7m0s)", "resumed:  1 time; its time is the sum of its active spans"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}
