package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/verify"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// evalFlow is implementation → review, rework looping back; the review
// node's extra fields and the flow's defaults are spliced in.
func evalFlow(reviewFields, defaults string) string {
	return `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
` + defaults + `  nodes:
    - { id: implementation, kind: agent, role_file: r/impl.md }
    - { id: review, kind: evaluator, role: review, role_file: r/review.md` + reviewFields + ` }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: implementation, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: implementation, outcome: rework, loop: fix }
  budgets: { fix: 5 }
`
}

// oneMedium gates only below the default gate_severity (high).
const oneMedium = `{"findings": [{"severity": "medium", "path": "a.go", "what": "naming", "fix": "rename"}]}`

// worc reference.md § defaults.evaluator, § evaluator node: a node's own
// field wins, then flow.defaults.evaluator, then the built-in default
// (gate high, blocking, max_rework_per_stage 1).
func TestPolicyOf_NodeThenFlowDefaultsThenBuiltin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fields, defaults string
		want                   core.EvaluatorPolicy
	}{
		{"built-in", "", "", core.EvaluatorPolicy{Gate: "high", Blocking: true, MaxRework: 1}},
		{"flow defaults", "", "  defaults: { evaluator: { gate_severity: medium, max_rework_per_stage: 3 } }\n", core.EvaluatorPolicy{Gate: "medium", Blocking: true, MaxRework: 3}},
		{"node wins", ", gate_severity: low, max_rework_per_stage: 0, blocking: false", "  defaults: { evaluator: { gate_severity: medium, max_rework_per_stage: 3 } }\n", core.EvaluatorPolicy{Gate: "low", Blocking: false, MaxRework: 0}},
	} {
		fl, err := flow.Parse("f.yaml", []byte(evalFlow(tc.fields, tc.defaults)))
		if err != nil {
			t.Fatal(err)
		}
		if got := core.PolicyOf(fl, fl.Node("review")); got != tc.want {
			t.Errorf("%s: PolicyOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// worc reference.md § evaluator node: gate_severity decides which findings
// gate — the flow default applies to a node that omits it.
func TestEvaluator_GateSeverityFromFlowDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fields, defaults, body, want string
	}{
		{"default high: a medium finding accepts", "", "", oneMedium, "accept"},
		{"default high: a high finding reworks", "", "", workertest.FindingsOneHigh, "rework"},
		{"flow default medium gates a medium finding", "", "  defaults: { evaluator: { gate_severity: medium } }\n", oneMedium, "rework"},
		{"node gate beats flow default", ", gate_severity: critical", "  defaults: { evaluator: { gate_severity: medium } }\n", workertest.FindingsOneHigh, "accept"},
		{"a clean pass accepts", "", "", workertest.FindingsClean, "accept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: evalFlow(tc.fields, tc.defaults)})
			sv := r.Visit(t, "review", tc.body)
			if sv.Outcome != tc.want {
				t.Errorf("outcome = %q (%s), want %q", sv.Outcome, sv.Reason, tc.want)
			}
			if want := core.PolicyOf(r.Env.Flow, r.Env.Flow.Node("review")).Gate; sv.Gate != want {
				t.Errorf("StepValue.Gate = %q, want %q", sv.Gate, want)
			}
		})
	}
}

// worc flow-authoring.md § What a node returns: the findings contract is
// fail-closed — a missing or malformed report is "invalid" (no edge takes it:
// the compiled Choice parks the run), never a silent accept, blocking or not.
func TestEvaluator_FindingsContractFailsClosed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"Looks good to me.", `{"verdict": "pass"}`, `{"findings": [{"severity": "urgent", "what": "x"}]}`, `{"findings": null}`} {
		for _, fields := range []string{"", ", blocking: false, max_rework_per_stage: 0"} {
			r := workertest.NewRig(t, workertest.RigOptions{Flow: evalFlow(fields, "")})
			if sv := r.Visit(t, "review", body); sv.Outcome != "invalid" || sv.Exhausted {
				t.Errorf("review%s of %q: outcome %q exhausted %v, want invalid", fields, body, sv.Outcome, sv.Exhausted)
			}
		}
	}
}

// worc reference.md § evaluator node: blocking: true reworks on every
// gating report — the loop's budget, not the node, ends it.
func TestEvaluator_BlockingReworksThroughTheBudget(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: evalFlow(", max_rework_per_stage: 1", "")})
	for i := range 4 {
		if sv := r.Visit(t, "review", workertest.FindingsOneHigh); sv.Outcome != "rework" || sv.Exhausted {
			t.Fatalf("visit %d: outcome %q exhausted %v, want rework", i+1, sv.Outcome, sv.Exhausted)
		}
	}
}

// worc reference.md § evaluator node: a non-blocking evaluator reworks at
// most max_rework_per_stage times; then a gating finding accepts, with a
// warning, reason "accept (rework budget exhausted)" and the step marked
// exhausted so the report lists the findings as still open.
func TestEvaluator_NonBlockingAcceptsWhenReworkBudgetExhausted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fields, defaults string
		reworks                int
	}{
		{"default budget 1", ", blocking: false", "", 1},
		{"node budget 2", ", blocking: false, max_rework_per_stage: 2", "", 2},
		{"flow default budget 3", ", blocking: false", "  defaults: { evaluator: { max_rework_per_stage: 3 } }\n", 3},
		{"budget 0 never reworks", ", blocking: false, max_rework_per_stage: 0", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: evalFlow(tc.fields, tc.defaults)})
			for i := range tc.reworks {
				if sv := r.Visit(t, "review", workertest.FindingsOneHigh); sv.Outcome != "rework" {
					t.Fatalf("visit %d: outcome %q, want rework", i+1, sv.Outcome)
				}
				if r.Warned("rework budget exhausted") {
					t.Fatalf("visit %d warned before the budget was spent", i+1)
				}
			}
			sv := r.Visit(t, "review", workertest.FindingsOneHigh)
			if sv.Outcome != "accept" || !sv.Exhausted || !strings.HasPrefix(sv.Reason, "accept (rework budget exhausted)") {
				t.Errorf("after %d reworks: outcome %q exhausted %v reason %q", tc.reworks, sv.Outcome, sv.Exhausted, sv.Reason)
			}
			if !r.Warned("review#") || !r.Warned("accept (rework budget exhausted): 1 finding at or above high still open") {
				t.Errorf("no exhaustion warning: %q", r.Warnings.Messages())
			}
			// A clean report after exhaustion is an ordinary accept.
			if sv := r.Visit(t, "review", workertest.FindingsClean); sv.Outcome != "accept" || sv.Exhausted {
				t.Errorf("clean report: outcome %q exhausted %v", sv.Outcome, sv.Exhausted)
			}
		})
	}
}

// worc reference.md § evaluator node: a non-blocking evaluator's rework
// budget is counted per subtask when the task is decomposed.
func TestEvaluator_ReworkBudgetCountedPerSubtask(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.DecompositionFlow, Config: workertest.EnableDecomposition})
	r.Visit(t, "planning", workertest.TwoSubtasks)
	r.Visit(t, "implementation", "one")
	if sv := r.Visit(t, "review", workertest.FindingsOneHigh); sv.Outcome != "rework" || sv.SubtaskOrder != 1 {
		t.Fatalf("subtask 1 first review: %q order %d", sv.Outcome, sv.SubtaskOrder)
	}
	r.Visit(t, "fixing", "fixed")
	if sv := r.Visit(t, "review", workertest.FindingsOneHigh); sv.Outcome != "accept" || !sv.Exhausted {
		t.Fatalf("subtask 1 second review: %q exhausted %v", sv.Outcome, sv.Exhausted)
	}
	r.Visit(t, "implementation", "two")
	if sv := r.Visit(t, "review", workertest.FindingsOneHigh); sv.Outcome != "rework" || sv.SubtaskOrder != 2 {
		t.Errorf("subtask 2 first review: %q order %d; the budget is per subtask", sv.Outcome, sv.SubtaskOrder)
	}
}

// The rework budget is counted from the node's steps (store.Store
// NodeSteps), without reading the run's whole step list (README.md §
// Performance).
func TestReworksSpent_ReadsOnlyTheNodesSteps(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: evalFlow(", blocking: false, max_rework_per_stage: 5", "")})
	for range 2 {
		r.Visit(t, "implementation", "done")
		r.Visit(t, "review", workertest.FindingsOneHigh)
	}
	r.Visit(t, "implementation", "done")
	r.Visit(t, "review", workertest.FindingsClean)
	steps, err := r.Svc.Store.ListSteps(context.Background(), r.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := steps[len(steps)-1]
	r.Svc.Store = workertest.ListlessStore{Store: r.Svc.Store}
	if n, err := verify.ReworksSpent(context.Background(), r.Svc.Service, last, 0); err != nil || n != 2 {
		t.Errorf("reworks spent before %s = %d, %v; want 2", last.StepRef, n, err)
	}
}
