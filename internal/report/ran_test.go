package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// summary.md is a text file: whatever the run's end, it ends with one
// newline (POSIX: a text file's last line ends with one; tools that read
// lines — wc -l, cat, git diff — count on it).
func TestRender_SummaryMDEndsWithOneNewline(t *testing.T) {
	t.Parallel()
	noCalls := facts()
	noCalls.Steps = nil
	interrupted := facts()
	interrupted.Status, interrupted.Stop = stratus.RunInterrupted, &Stop{Interrupted: true}
	failed := withSynthesis(facts(), nil)
	failed.Status, failed.Stop = stratus.RunFailed, &Stop{Error: "States.HeartbeatTimeout"}
	ended := facts()
	ended.Run.CreatedAt, ended.Run.EndedAt = t0, t0.Add(90*time.Second)
	for name, f := range map[string]*Facts{
		"deterministic": facts(), "no step": noCalls, "interrupted": interrupted, "failed": failed, "ended": ended,
		"prose":                    withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose}),
		"prose without follow-ups": withSynthesis(func() *Facts { f := facts(); f.Steps = f.Steps[:1]; return f }(), &Synthesis{Outcome: SynthesisWritten, Prose: prose}),
	} {
		_, md := Render(f)
		if !bytes.HasSuffix(md, []byte("\n")) || bytes.HasSuffix(md, []byte("\n\n")) {
			t.Errorf("%s: summary.md does not end with one newline: %q", name, md[max(0, len(md)-60):])
		}
	}
}

// README § Durable runs: summary.md's Run cost says how long the run ran,
// the sum of its active spans, and that the idle time before a resume is
// not counted.
func TestRunCost_SaysHowLongTheRunRanInActiveSpans(t *testing.T) {
	t.Parallel()
	f := facts()
	f.Status = stratus.RunDone
	f.Run.CreatedAt, f.Run.ActiveMS, f.Run.Resumes = t0, (5 * time.Minute).Milliseconds(), 1
	f.Run.ResumedAt = t0.Add(48 * time.Hour)
	f.Run.EndedAt = f.Run.ResumedAt.Add(2 * time.Minute)
	_, md := Render(f)
	want := "The run ran 7m00s over 2 spans (its start and 1 resume, each to its stop; the time it stood stopped before a resume is not counted).\n"
	if _, cost, _ := bytes.Cut(md, []byte(FactHeadings[2])); !bytes.HasSuffix(cost, []byte(want)) {
		t.Errorf("Run cost does not end with %q:\n%s", want, cost)
	}
}
