package lifecycle

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
)

// builtinDef is the compiled built-in implementation flow: planning →
// implementation → review; review rework → fixing → review through
// review_fix (3 rounds); accept → publish.
func builtinDef(t *testing.T) []byte {
	t.Helper()
	f, err := flow.Load(filepath.Join("..", "builtin", "flows"), "implementation")
	if err != nil {
		t.Fatal(err)
	}
	def, err := compiler.Compile(f, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// step is a step of node at visit with the state input of a run whose
// review_fix counter stands at fixes, and value v ("" = none).
func step(node string, visit int, status string, fixes int, v string) stratus.Step {
	in := `{"run_id":"r-1","task_id":"t1","loops":{"review_fix":` + string(rune('0'+fixes)) + `},"last":{"node":"before","outcome":"done"}}`
	s := stratus.Step{Node: node, Visit: visit, StepRef: node + "#" + string(rune('0'+visit)), Status: status, Input: json.RawMessage(in)}
	if v != "" {
		s.Value = json.RawMessage(v)
	}
	return s
}

type planned struct {
	ResumeAt string         `json:"resume_at"`
	RunID    string         `json:"run_id"`
	Loops    map[string]int `json:"loops"`
	Last     map[string]any `json:"last"`
}

func decodePoint(t *testing.T, p *ResumePoint) planned {
	t.Helper()
	var got planned
	if err := json.Unmarshal(p.Input, &got); err != nil {
		t.Fatalf("resume input %s: %v", p.Input, err)
	}
	if got.ResumeAt != p.State || got.RunID != "r-1" {
		t.Errorf("resume input %s: want resume_at %q and the run id kept", p.Input, p.State)
	}
	return got
}

// README.md § Durable runs: a step that did not complete runs again, entering
// its state with the input it was dispatched with (its budget counters as
// they were).
func TestPlanResume_AStepThatDidNotCompleteRunsAgain(t *testing.T) {
	t.Parallel()
	def := builtinDef(t)
	for _, status := range []string{stratus.StepFailed, stratus.StepCanceled, stratus.StepRunning, "waiting"} {
		steps := []stratus.Step{
			step("planning", 1, stratus.StepCompleted, 0, `{"node":"planning","outcome":"done"}`),
			step("review", 1, stratus.StepCompleted, 0, `{"node":"review","outcome":"rework"}`),
			step("fixing", 1, status, 1, `{"node":"fixing","outcome":"failed","reason":"engine crashed"}`),
			{Node: "supervisor", Kind: "supervisor", StepRef: "supervisor#2", Status: stratus.StepCompleted},
		}
		p, err := PlanResume(def, "r-1", "t1", steps, ResumeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", status, err)
		}
		got := decodePoint(t, p)
		if p.State != "fixing" || !p.Rerun || p.From != "fixing#1" || got.Loops["review_fix"] != 1 || got.Last["node"] != "before" {
			t.Errorf("%s: resume %+v with %s; want fixing run again with its own input", status, p, p.Input)
		}
	}
}

// A completed step is continued after: its value goes to $.last and the
// route, budget check and counter run as the executor would.
func TestPlanResume_ACompletedStepIsContinuedAfter(t *testing.T) {
	t.Parallel()
	p, err := PlanResume(builtinDef(t), "r-1", "t1", []stratus.Step{
		step("review", 1, stratus.StepCompleted, 0, `{"node":"review","step_ref":"review#1","outcome":"rework"}`),
	}, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodePoint(t, p)
	if p.State != "fixing" || p.Rerun || got.Loops["review_fix"] != 1 || got.Last["outcome"] != "rework" {
		t.Errorf("resume %+v with %s; want fixing, the rework charged to review_fix (1), $.last the review's value", p, p.Input)
	}
}

// A run parked because its loop budget ran out resumes only when told to
// give the budget back (else it would park again at once).
func TestPlanResume_ASpentBudgetNeedsResetFixBudget(t *testing.T) {
	t.Parallel()
	def := builtinDef(t)
	steps := []stratus.Step{step("review", 4, stratus.StepCompleted, 3, `{"node":"review","outcome":"rework"}`)}
	_, err := PlanResume(def, "r-1", "t1", steps, ResumeOptions{})
	var spent *BudgetSpentError
	if !errors.As(err, &spent) || spent.Counter != "review_fix" || spent.Spent != 3 || spent.Check != "review_fix.budget" || !strings.Contains(err.Error(), "--reset-fix-budget") {
		t.Fatalf("err %v, want a BudgetSpentError for review_fix (3) naming --reset-fix-budget", err)
	}
	p, err := PlanResume(def, "r-1", "t1", steps, ResumeOptions{ResetFixBudget: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodePoint(t, p); p.State != "fixing" || got.Loops["review_fix"] != 1 || p.Reset["review_fix"] != 3 {
		t.Errorf("with the budget reset: %+v %s; want fixing with review_fix charged once from 0", p, p.Input)
	}
}

// A gate whose outcome no edge takes (an invalid evaluator report) parks
// the run; resuming runs the gate again.
func TestPlanResume_AnUndecidedGateRunsAgain(t *testing.T) {
	t.Parallel()
	p, err := PlanResume(builtinDef(t), "r-1", "t1", []stratus.Step{
		step("review", 1, stratus.StepCompleted, 0, `{"node":"review","outcome":"invalid"}`),
	}, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodePoint(t, p); p.State != "review" || !p.Rerun || got.Last["node"] != "before" {
		t.Errorf("resume %+v %s; want review again with its own input", p, p.Input)
	}
}

func TestPlanResume_EdgeCases(t *testing.T) {
	t.Parallel()
	def := builtinDef(t)
	supervisor := stratus.Step{Node: "supervisor", Kind: "supervisor", StepRef: "supervisor#1", Status: stratus.StepRunning}
	p, err := PlanResume(def, "r-1", "t1", []stratus.Step{supervisor}, ResumeOptions{})
	if err != nil || p.State != "" || string(p.Input) != `{"run_id":"r-1","task_id":"t1"}` {
		t.Errorf("no steps: %+v %v; want a fresh start", p, err)
	}
	_, err = PlanResume(def, "r-1", "t1", []stratus.Step{step("publish", 1, stratus.StepCompleted, 0, `{"node":"publish","outcome":"done"}`)}, ResumeOptions{})
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "nothing to resume") {
		t.Errorf("after publish: %v", err)
	}
	old := step("review", 1, stratus.StepFailed, 0, "")
	old.Input = nil
	if _, err = PlanResume(def, "r-1", "t1", []stratus.Step{old}, ResumeOptions{}); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "state input") {
		t.Errorf("a step without its input: %v", err)
	}
	if _, err = PlanResume(def, "r-1", "t1", []stratus.Step{step("nosuch", 1, stratus.StepFailed, 0, "")}, ResumeOptions{}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("a step of no state: %v", err)
	}
}
