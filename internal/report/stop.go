package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// WhyHeading heads the section that says why a run did not end done; it
// follows the title and the lead line of the deterministic report.
const WhyHeading = "## Why the run stopped"

// PublishingHeading heads the fact section naming the run's pushed branch
// and pull request (README.md § Publishing).
const PublishingHeading = "## Publishing"

// Stop is how a run that did not end done stopped, as its driver read it
// from the execution (the terminal state and the state that routed there).
// The embedded orchestrator fills it from the executor's history; a driver
// that cannot leaves it nil and Why falls back to the recorded steps.
type Stop struct {
	// Interrupted: the run was stopped from outside (SIGINT, SIGTERM).
	Interrupted bool
	// Error and Cause are the execution's error name and cause, or the
	// error a Catch caught on the way to the terminal.
	Error, Cause string
	// StepRef and Outcome are the step whose outcome the last routing
	// state read (a budget or route Choice), and that outcome.
	StepRef, Outcome string
	// Budget names the budget that ran out, when a budget state parked the
	// run: `loop "review_fix"`, `the global backstop "global_fix_iterations"`,
	// `the inline budget of edge a -> b (fail)`, `the hitl rounds of node
	// "draft"`. Limit is that budget.
	Budget string
	Limit  int
	// Node is set when a route state parked the run because no edge of
	// Node takes Outcome (fail closed).
	Node string
}

// Why says in one line why a run that did not end done stopped ("" for a
// done run): the interruption, the reason of the failed step (a hitl
// timeout included), an evaluator's invalid report, the budget that ran out
// (naming it and its size), or the outcome no edge takes (naming the outcome
// and the node) — never one of the last two "or" the other. The summary's
// "Why the run stopped" section and `stratus run`'s why line both say it.
func Why(f *Facts) string {
	if f.Status == stratus.RunDone {
		return ""
	}
	s := f.Stop
	if s == nil {
		s = &Stop{}
	}
	var last *StepLine
	if n := len(f.Steps); n > 0 {
		last = &f.Steps[n-1]
	}
	switch {
	case s.Interrupted:
		var doing []string
		for _, l := range f.Steps {
			// An interrupted run's open steps are canceled
			// (internal/lifecycle.Interrupt); a hitl step waited.
			switch {
			case l.Step.Status == "waiting", // worker.StepWaiting
				l.Step.Status == stratus.StepCanceled && l.Step.Kind == flow.KindHITL:
				doing = append(doing, l.Step.StepRef+" was waiting for a human")
			case l.Step.Status == stratus.StepParked:
				doing = append(doing, l.Step.StepRef+" was parked (every provider unavailable or rate-limited)")
			case l.Step.Status == stratus.StepRunning, l.Step.Status == stratus.StepCanceled:
				doing = append(doing, l.Step.StepRef+" was running")
			}
		}
		if len(doing) == 0 {
			return "interrupted (SIGINT or SIGTERM)"
		}
		return "interrupted (SIGINT or SIGTERM) while " + strings.Join(doing, ", ")
	case last != nil && last.Step.Status == stratus.StepFailed && last.Reason != "":
		if last.Step.Kind == flow.KindHITL {
			return fmt.Sprintf("%s: %s", last.Step.StepRef, oneLine(last.Reason)) // e.g. a hitl timeout
		}
		if last.Step.Kind == flow.KindPublish && last.Step.Verdict == stratus.RunManualActionRequired {
			// The publish did its work; what it parked on (a blocked merge)
			// is no failure of it (README.md § Publishing).
			return fmt.Sprintf("%s: %s", last.Step.StepRef, oneLine(last.Reason))
		}
		return fmt.Sprintf("%s failed: %s", last.Step.StepRef, oneLine(last.Reason))
	case last != nil && last.Step.Verdict == "invalid":
		why := last.Reason
		if why == "" {
			why = last.FindingsErr
		}
		if why == "" {
			why = "it could not be read"
		}
		return fmt.Sprintf("%s: the evaluator's report is invalid: %s", last.Step.StepRef, oneLine(why))
	case s.Budget != "":
		return fmt.Sprintf("%s returned %q, and %s has spent its budget of %d", orStep(s.StepRef, last), s.Outcome, s.Budget, s.Limit)
	case s.Node != "":
		return fmt.Sprintf("%s returned outcome %q, and no edge of node %s takes it", orStep(s.StepRef, last), s.Outcome, s.Node)
	case last != nil && last.Step.Status == stratus.StepRunning && s.Cause == "":
		// A step still recorded running whose state failed with a cause
		// (its end refused by a full store) is said by that cause, below.
		return fmt.Sprintf("%s was still running: its state timed out or lost its worker", last.Step.StepRef)
	case s.Error != "":
		if s.Cause != "" {
			return fmt.Sprintf("%s: %s", s.Error, oneLine(s.Cause))
		}
		return s.Error
	}
	return ""
}

func orStep(ref string, last *StepLine) string {
	switch {
	case ref != "":
		return ref
	case last != nil:
		return last.Step.StepRef
	}
	return "the last step"
}

// whySection writes the "Why the run stopped" section of a run that did
// not end done.
func (f *Facts) whySection(b *bytes.Buffer) {
	why := Why(f)
	if why == "" {
		return
	}
	fmt.Fprintf(b, "\n%s\n\n%s.\n", WhyHeading, capitalize(strings.TrimSuffix(why, ".")))
}

// PullRequestPolicies are the publishing policies that would open a pull
// request (worc reference.md § publishing).
var PullRequestPolicies = []string{"pull_request", "documentation_pull_request"}

// PullRequestPolicy is the pull-request publishing policy a publish node
// runs under — its own policy, else the flow's publishing — or "" when it
// publishes no pull request.
func PullRequestPolicy(fl *flow.Flow, n *flow.Node) string {
	if fl == nil || n == nil || n.Kind != flow.KindPublish {
		return ""
	}
	for _, p := range []string{n.Policy, fl.Publishing} {
		for _, pr := range PullRequestPolicies {
			if p == pr {
				return p
			}
		}
	}
	return ""
}

// PublishingNote says what Stratus does with a pull-request publishing
// policy in a repository without the remote it pushes to: it writes the
// report and keeps the run's commits in a local branch, and opens no pull
// request (worc reference.md § Validation: "a PR-publishing flow with no
// git configured (runs local-commit mode)" is non-fatal). validate says
// it at the policy.
func PublishingNote(policy, remote string) string {
	return fmt.Sprintf("publishing %s: the repository has no git remote %q (git.remote), so Stratus keeps the run's commits in a local branch (stratus pull) and opens no pull request; add the remote (git remote add %s URL) to publish", policy, remote, remote)
}

// publishingNotes are the lines of the summary's Publishing section: the
// run's pushed branch and pull request (docs/architecture.md §
// Publishing); none before its publish step pushed.
func publishingNotes(run stratus.Run) []string {
	p := run.Publication
	if p == nil {
		return nil
	}
	out := []string{fmt.Sprintf("Branch `%s` pushed to %s (%s) at %s.", p.Branch, p.Remote, p.URL, shortSHA(p.Head))}
	if pr := p.PullRequest; pr != nil {
		line := fmt.Sprintf("Pull request #%d: %s (%s", pr.Number, pr.URL, pr.State)
		if pr.AutoMerge != "" && pr.State == "open" {
			line += ", auto-merge " + pr.AutoMerge + " armed"
		}
		out = append(out, line+").")
	}
	if p.Note != "" {
		out = append(out, capitalize(strings.TrimSuffix(p.Note, "."))+".")
	}
	return out
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func (f *Facts) publishing(b *bytes.Buffer) {
	if len(f.Publishing) == 0 {
		return
	}
	b.WriteString("\n" + PublishingHeading + "\n\n")
	for _, n := range f.Publishing {
		fmt.Fprintf(b, "- %s\n", n)
	}
}
