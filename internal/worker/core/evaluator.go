package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
)

// EvaluatorPolicy is an evaluator node's gate after flow.defaults.evaluator
// fills the fields it omits (worc reference.md § defaults.evaluator, §
// evaluator node).
type EvaluatorPolicy struct {
	Gate      string // gate_severity: the least severe finding that gates (default high)
	Blocking  bool   // blocking (default true): rework loops through the named-loop budget
	MaxRework int    // max_rework_per_stage (default 1); only a non-blocking node uses it
}

// PolicyOf returns the evaluator policy of node n of flow f: the node's
// own field, else the flow's defaults.evaluator, else the built-in default.
// blocking has no flow default (reference.md lists none).
func PolicyOf(f *flow.Flow, n *flow.Node) EvaluatorPolicy {
	p := EvaluatorPolicy{Gate: n.GateSeverity, Blocking: n.Blocking == nil || *n.Blocking, MaxRework: 1}
	var d *flow.EvaluatorDefaults
	if f.Defaults != nil {
		d = f.Defaults.Evaluator
	}
	if p.Gate == "" && d != nil {
		p.Gate = d.GateSeverity
	}
	if p.Gate == "" {
		p.Gate = findings.DefaultGate
	}
	switch {
	case n.MaxReworkPerStage != nil:
		p.MaxRework = *n.MaxReworkPerStage
	case d != nil && d.MaxReworkPerStage != nil:
		p.MaxRework = *d.MaxReworkPerStage
	}
	return p
}

// evaluation is the outcome of one evaluator step.
type evaluation struct {
	Outcome   string // accept | rework | invalid
	Reason    string
	Gate      string // the gate applied
	Exhausted bool   // a non-blocking node accepted with gating findings still open
	Open      int    // gating findings
	Spent     int    // earlier rework verdicts counted against max_rework_per_stage
}

// evaluate decides an evaluator step's outcome from its folded value (worc
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
func (s *Service) evaluate(ctx context.Context, env *RunEnv, step stratus.Step, subtask int, value json.RawMessage) (evaluation, error) {
	p := PolicyOf(env.Flow, env.Flow.Node(step.Node))
	outcome, reason, fs := findings.Outcome(value, p.Gate)
	ev := evaluation{Outcome: outcome, Reason: reason, Gate: p.Gate}
	if outcome != "rework" {
		return ev, nil
	}
	ev.Open = findings.Mark(fs, p.Gate)
	if p.Blocking {
		return ev, nil
	}
	spent, err := s.reworksSpent(ctx, step, subtask)
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
// ended with a rework verdict, only those of subtask when it is not 0.
func (s *Service) reworksSpent(ctx context.Context, step stratus.Step, subtask int) (int, error) {
	steps, err := s.Store.ListSteps(ctx, step.RunID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range steps {
		if st.TID == step.TID || st.Node != step.Node || st.Verdict != "rework" {
			continue
		}
		if subtask != 0 {
			if v, err := DecodeStepValue(st.Value); err != nil || v.SubtaskOrder != subtask {
				continue
			}
		}
		n++
	}
	return n, nil
}

// exhaustedWarning is the warning of an evaluator that accepted with its
// rework budget spent (worc reference.md § evaluator node: a console
// warning, so the operator knows the stage moved on and may need follow-up).
func exhaustedWarning(stepRef string, ev evaluation) string {
	return fmt.Sprintf("%s: accept (rework budget exhausted): %s at or above %s still open; they are listed as open follow-ups",
		stepRef, english.Plural(ev.Open, "finding"), ev.Gate)
}
