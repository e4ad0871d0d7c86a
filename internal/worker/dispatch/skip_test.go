package dispatch_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// gatesFlow has one node of every kind, each entered once.
const gatesFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: build, kind: agent, role_file: r/build.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: lint, kind: tool, tool: lint }
    - { id: review, kind: evaluator, role: review, role_file: r/review.md }
    - { id: approve, kind: hitl, signal: approval }
    - { id: ask, kind: hitl, signal: question }
    - { id: last, kind: checks, checker: command_profile }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: build, to: testing }
    - { from: testing, to: lint, outcome: pass }
    - { from: testing, to: build, outcome: fail, loop: fix }
    - { from: lint, to: review }
    - { from: review, to: approve, outcome: accept }
    - { from: review, to: build, outcome: rework, loop: fix }
    - { from: approve, to: ask, outcome: route:approve }
    - { from: approve, to: publish, outcome: route:deny }
    - { from: ask, to: last }
  budgets: { fix: 3 }
`

// worc reference.md § Conditional nodes (a disabled gate does not gate): a
// node the task disables completes at dispatch with no worker; its verdict
// (and progress line) reads skipped, while the outcome the compiled
// "<node>.route" Choice routes on is the kind's pass outcome — checks and
// tool pass, evaluator accept, hitl approval route:approve, hitl question
// done, a gate without edges its pass outcome too (which ends the run done) —
// and an agent or publish node, which routes unconditionally, keeps
// "skipped".
func TestDispatch_SkippedGateCompletesWithItsPassOutcome(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"build": "skipped", "testing": "pass", "lint": "pass", "review": "accept",
		"approve": "route:approve", "ask": "done", "last": "pass", "publish": "skipped",
	}
	var disabled []string
	for id := range want {
		disabled = append(disabled, id+": { enabled: false }")
	}
	r := workertest.NewRig(t, workertest.RigOptions{Flow: gatesFlow, Task: "---\nid: t1\ntitle: T\nnodes: { " + strings.Join(disabled, ", ") + " }\n---\nDo it.\n"})
	var events []core.Event
	r.Svc.OnEvent = func(e core.Event) { events = append(events, e) }
	for _, id := range []string{"build", "testing", "lint", "review", "approve", "ask", "last", "publish"} {
		st := r.Dispatch(t, id)
		if st.Verdict != "skipped" {
			t.Errorf("%s: verdict %q, want skipped", id, st.Verdict)
		}
		tok := fmt.Sprintf("tok-%d", r.N)
		raw, ok := r.Tokens.Successes()[tok]
		if !ok {
			t.Fatalf("%s: its Task state was not completed (failures %v)", id, r.Tokens.Failures())
		}
		var v core.StepValue
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if v.Outcome != want[id] || !strings.Contains(v.Reason, "disabled by the task") {
			t.Errorf("%s: routes on %q (reason %q), want %q with the reason", id, v.Outcome, v.Reason, want[id])
		}
		if core.SkipOutcome(r.Env.Flow.Node(id)) != want[id] {
			t.Errorf("SkipOutcome(%s) = %q, want %q", id, core.SkipOutcome(r.Env.Flow.Node(id)), want[id])
		}
	}
	if len(r.Launcher.Launched()) != 0 {
		t.Errorf("%d workers launched for skipped nodes", len(r.Launcher.Launched()))
	}
	ended := 0
	for _, e := range events {
		if e.Type == core.EventStepEnded {
			ended++
			if e.Outcome != "skipped" {
				t.Errorf("progress line of %s says %q, want skipped", e.StepRef, e.Outcome)
			}
		}
	}
	if ended != len(want) {
		t.Errorf("%d step-ended events, want %d", ended, len(want))
	}
}
