package compiler_test

import (
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
)

func ExampleCompile() {
	f, err := flow.Parse("review.yaml", []byte(`flow:
  name: review
  task_type: review
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: implementation, kind: agent, role_file: review/implementation.md }
    - { id: review, kind: evaluator, role: review, role_file: review/review.md }
    - { id: fixing, kind: agent, role_file: review/fixing.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: implementation, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: fixing, outcome: rework, loop: review_fix }
    - { from: fixing, to: review }
  budgets: { review_fix: 3 }
`))
	if err != nil {
		panic(err)
	}
	def, err := compiler.Compile(f, compiler.Options{})
	if err != nil {
		panic(err)
	}
	var m struct {
		States map[string]struct{ Type, Next, Default string }
	}
	if err := json.Unmarshal(def, &m); err != nil {
		panic(err)
	}
	for _, name := range []string{"init", "implementation", "review", "review.route", "review_fix.budget", "review_fix.count", "fixing", "publish"} {
		s := m.States[name]
		fmt.Printf("%-18s %-7s -> %s%s\n", name, s.Type, s.Next, s.Default)
	}
	// Output:
	// init               Pass    -> implementation
	// implementation     Task    -> review
	// review             Task    -> review.route
	// review.route       Choice  -> manual_action_required
	// review_fix.budget  Choice  -> review_fix.count
	// review_fix.count   Pass    -> fixing
	// fixing             Task    -> review
	// publish            Task    -> done
}
