package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// ended turns facts() into a run that ended status with last as its last
// step.
func ended(status string, last StepLine, stop *Stop) *Facts {
	f := facts()
	f.Status = status
	f.Steps = append(f.Steps[:len(f.Steps)-1], last)
	f.Stop = stop
	return f
}

// The summary of a run that did not end done says why, right after the lead,
// and tells a spent budget from an outcome no edge takes; the same sentence
// is what `stratus run` prints (Why).
func TestWhy_SaysWhyARunStoppedAndTellsBudgetFromUnrouted(t *testing.T) {
	t.Parallel()
	review := func(verdict, reason string) StepLine {
		return StepLine{Step: stratus.Step{StepRef: "review#4", Node: "review", Kind: flow.KindEvaluator, Status: stratus.StepCompleted, Verdict: verdict}, Reason: reason}
	}
	for _, tc := range []struct {
		name string
		f    *Facts
		want string
	}{
		{"failed step says its reason", ended(stratus.RunFailed,
			StepLine{Step: stratus.Step{StepRef: "implementation#1", Node: "implementation", Kind: flow.KindAgent, Status: stratus.StepFailed}, Reason: "model refused"}, nil),
			"implementation#1 failed: model refused"},
		{"hitl timeout", ended(stratus.RunManualActionRequired,
			StepLine{Step: stratus.Step{StepRef: "gate#1", Node: "gate", Kind: flow.KindHITL, Status: stratus.StepFailed}, Reason: "no human reply within 1 s (hitl timeout)"}, nil),
			"gate#1: no human reply within 1 s (hitl timeout)"},
		{"invalid evaluator report", ended(stratus.RunManualActionRequired, review("invalid", "the report is not a findings list"),
			&Stop{StepRef: "review#4", Outcome: "invalid", Node: "review"}),
			"review#4: the evaluator's report is invalid: the report is not a findings list"},
		{"budget spent names the loop and its budget", ended(stratus.RunManualActionRequired, review("rework", ""),
			&Stop{StepRef: "review#4", Outcome: "rework", Budget: `loop "review_fix"`, Limit: 3}),
			`review#4 returned "rework", and loop "review_fix" has spent its budget of 3`},
		{"no edge takes the outcome names the outcome and the node", ended(stratus.RunManualActionRequired, review("maybe", ""),
			&Stop{StepRef: "review#4", Outcome: "maybe", Node: "review"}),
			`review#4 returned outcome "maybe", and no edge of node review takes it`},
		{"interrupted while a human was awaited", ended(stratus.RunFailed,
			StepLine{Step: stratus.Step{StepRef: "ask#1", Node: "ask", Kind: flow.KindHITL, Status: "waiting"}}, &Stop{Interrupted: true}),
			"interrupted (SIGINT or SIGTERM) while ask#1 was waiting for a human"},
		{"execution error as the last resort", ended(stratus.RunFailed, review("accept", ""), &Stop{Error: "States.Timeout", Cause: "the execution timed out"}),
			"States.Timeout: the execution timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Why(tc.f); got != tc.want {
				t.Errorf("Why =\n %s\nwant\n %s", got, tc.want)
			}
			if strings.Contains(Why(tc.f), "(or ") {
				t.Errorf("Why hedges between two causes: %s", Why(tc.f))
			}
			_, md := Render(tc.f)
			lead := strings.Index(string(md), "run `r1`: ")
			sec := strings.Index(string(md), "\n"+WhyHeading+"\n\n")
			changes := strings.Index(string(md), "\n## Changes\n")
			if lead < 0 || sec < lead || changes < sec {
				t.Fatalf("the why section does not follow the lead:\n%s", md)
			}
			if !strings.Contains(string(md), capitalize(tc.want)+".\n") {
				t.Errorf("the why section does not say %q:\n%s", tc.want, md)
			}
		})
	}
	// An interrupted run says so in its lead, not just "failed".
	_, md := Render(ended(stratus.RunFailed, review("accept", ""), &Stop{Interrupted: true}))
	if !bytes.Contains(md, []byte("**failed** (interrupted).")) {
		t.Errorf("interrupted lead:\n%s", md)
	}
	// A done run has no why section.
	if _, md := Render(facts()); bytes.Contains(md, []byte(WhyHeading)) || Why(facts()) != "" {
		t.Errorf("a done run says why it stopped:\n%s", md)
	}
}

// README.md § Publishing: the summary's Publishing section names the pushed
// branch and the pull request, and says what was not done; a run that
// published nothing has none. summary.json carries the publication.
func TestRender_PublishingSectionSaysTheBranchAndThePullRequest(t *testing.T) {
	t.Parallel()
	head := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name string
		pub  *stratus.Publication
		want []string
	}{
		{"not published", nil, nil},
		{"pull request", &stratus.Publication{Remote: "origin", URL: "https://github.com/o/n.git", Branch: "stratus/t1", Head: head,
			PullRequest: &stratus.PullRequest{Number: 7, URL: "https://github.com/o/n/pull/7", State: "open", AutoMerge: "squash"}},
			[]string{"- Branch `stratus/t1` pushed to origin (https://github.com/o/n.git) at aaaaaaaaaaaa.\n", "- Pull request #7: https://github.com/o/n/pull/7 (open, auto-merge squash armed).\n"}},
		{"no pull request", &stratus.Publication{Remote: "origin", URL: "/srv/git/n.git", Branch: "stratus/t1", Head: head,
			Note: "remote origin (/srv/git/n.git) is not a GitHub repository: branch stratus/t1 was pushed and no pull request was opened"},
			[]string{"- Remote origin (/srv/git/n.git) is not a GitHub repository", "no pull request was opened.\n"}},
	} {
		for _, withProse := range []bool{false, true} {
			f := facts()
			if withProse {
				f = withSynthesis(f, &Synthesis{Outcome: SynthesisWritten, Prose: prose})
			}
			f.Run.Publication = tc.pub
			f.Publishing = publishingNotes(f.Run)
			js, md := Render(f)
			has := bytes.Contains(md, []byte("\n"+PublishingHeading+"\n\n"))
			if has != (tc.want != nil) {
				t.Errorf("%s (prose %v): Publishing section present %v:\n%s", tc.name, withProse, has, md)
			}
			for _, w := range tc.want {
				if !bytes.Contains(md, []byte(w)) {
					t.Errorf("%s (prose %v): summary.md lacks %q:\n%s", tc.name, withProse, w, md)
				}
			}
			if tc.want != nil && bytes.Index(md, []byte(PublishingHeading)) > bytes.Index(md, []byte(FactHeadings[0])) {
				t.Errorf("the Publishing section is not among the closing fact sections:\n%s", md)
			}
			var sum Summary
			if err := json.Unmarshal(js, &sum); err != nil {
				t.Fatal(err)
			}
			if (sum.Publication == nil) != (tc.pub == nil) || (tc.pub != nil && sum.Publication.Branch != tc.pub.Branch) {
				t.Errorf("%s: summary.json publication = %+v, want %+v", tc.name, sum.Publication, tc.pub)
			}
		}
	}
}

// A human's reply time is not orchestration overhead; a hitl step that waited
// shows how long it waited.
func TestOverhead_ExcludesHITLWaitsAndHITLShowsItsWait(t *testing.T) {
	t.Parallel()
	f := facts()
	f.Steps[1].Attempts[0].EngineStartedAt = t0.Add(1500 * time.Millisecond)
	// planning#1 ends at t0+1s; a hitl wait of 3 s; review#1's engine starts at t0+1.5s.
	hitl := StepLine{Step: stratus.Step{StepRef: "gate#1", Node: "gate", Kind: flow.KindHITL, Status: stratus.StepFailed,
		CreatedAt: t0.Add(time.Second), EndedAt: t0.Add(4 * time.Second)}, Reason: "no human reply within 3 s (hitl timeout)"}
	f.Steps = append(f.Steps[:1], append([]StepLine{hitl}, f.Steps[1:]...)...)
	if got := Overhead(f); len(got) != 0 {
		t.Errorf("Overhead = %v, want no transition across the hitl wait", got)
	}
	_, md := Render(f)
	if !bytes.Contains(md, []byte("| gate#1 | failed | 0 | - | 3.0s | 0/0 |")) {
		t.Errorf("the hitl step does not show its wait:\n%s", md)
	}
	// A skipped hitl node waited for nobody: the transition counts.
	f.Steps[1].Step.Status, f.Steps[1].Step.Verdict = stratus.StepCompleted, "skipped"
	if got := Overhead(f); len(got) != 1 || got[0] != 500*time.Millisecond {
		t.Errorf("Overhead across a skipped hitl = %v", got)
	}
}
