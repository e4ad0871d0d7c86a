package verify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// Evaluation is the outcome of one evaluator step.
type Evaluation struct {
	Outcome   string // accept | rework | invalid
	Reason    string
	Gate      string // the gate applied
	Exhausted bool   // a non-blocking node accepted with gating findings still open
	Open      int    // gating findings
	Spent     int    // earlier rework verdicts counted against max_rework_per_stage
}

// Evaluate decides an evaluator step's outcome from its folded value (worc
// reference.md § evaluator node; internal/findings.Outcome):
//
//   - the findings contract is fail-closed: a missing or malformed report is
//     "invalid", which no edge takes, so the compiled Choice parks the run
//     at manual_action_required;
//   - a finding at least as severe as the gate makes it "rework", else
//     "accept";
//   - a blocking node's rework loops through the named-loop budget (the
//     compiled machine counts it);
//   - a non-blocking node counts its own earlier rework verdicts in the run
//     (within the same subtask when the task is decomposed); once they
//     reach max_rework_per_stage, a gating finding no longer reworks: the
//     outcome is "accept", Exhausted is set and the reason starts with
//     "accept (rework budget exhausted)".
func Evaluate(ctx context.Context, s *core.Service, env *core.RunEnv, step stratus.Step, subtask int, value json.RawMessage) (Evaluation, error) {
	p := core.PolicyOf(env.Flow, env.Flow.Node(step.Node))
	outcome, reason, fs := findings.Outcome(value, p.Gate)
	ev := Evaluation{Outcome: outcome, Reason: reason, Gate: p.Gate}
	if outcome != "rework" {
		return ev, nil
	}
	ev.Open = findings.Mark(fs, p.Gate)
	if p.Blocking {
		return ev, nil
	}
	spent, err := reworksSpent(ctx, s, step, subtask)
	if err != nil {
		return ev, err
	}
	ev.Spent = spent
	if spent >= p.MaxRework {
		ev.Outcome, ev.Exhausted = "accept", true
		ev.Reason = fmt.Sprintf("accept (rework budget exhausted): %s still open after %s (max_rework_per_stage %d)",
			reason, english.Plural(spent, "rework"), p.MaxRework)
	}
	return ev, nil
}

// reworksSpent counts the earlier steps of step's node in its run that
// ended with a rework verdict, only those of subtask when it is not 0. It
// reads every step of the node — as many as its visits, which the flow's
// loop budget bounds — and none of the run's other steps (README.md §
// Performance).
func reworksSpent(ctx context.Context, s *core.Service, step stratus.Step, subtask int) (int, error) {
	steps, err := s.Store.NodeSteps(ctx, step.RunID, step.Node, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range steps {
		if st.TID == step.TID || st.Verdict != "rework" {
			continue
		}
		if subtask != 0 {
			if v, err := core.DecodeStepValue(st.Value); err != nil || v.SubtaskOrder != subtask {
				continue
			}
		}
		n++
	}
	return n, nil
}

// ExhaustedWarning is the warning of an evaluator that accepted with its
// rework budget spent (worc reference.md § evaluator node: a console
// warning, so the operator knows the stage moved on and may need follow-up).
func ExhaustedWarning(stepRef string, ev Evaluation) string {
	return fmt.Sprintf("%s: accept (rework budget exhausted): %s at or above %s still open; they are listed as open follow-ups",
		stepRef, english.Plural(ev.Open, "finding"), ev.Gate)
}
