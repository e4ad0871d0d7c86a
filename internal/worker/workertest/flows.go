package workertest

import "github.com/stratusflow/stratus/internal/config"

// The flows (RigOptions.Flow) that tests of several operation packages
// share; a flow one package alone uses stays beside its tests.

// ChainFlow has one node of every kind whose output a variable exposes:
// planning (slot plan) → scan → implementation → testing (checks) → lint
// (tool) → review (evaluator; rework loops to implementation) → wrap
// (slot summary) → publish.
const ChainFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: planning, kind: agent, role_file: r/planning.md, output_artifact: plan }
    - { id: scan, kind: agent, role_file: r/scan.md }
    - { id: implementation, kind: agent, role_file: r/impl.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: lint, kind: tool, tool: lint }
    - { id: review, kind: evaluator, role: review, role_file: r/review.md }
    - { id: wrap, kind: agent, role_file: r/wrap.md, output_artifact: summary }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: planning, to: scan }
    - { from: scan, to: implementation }
    - { from: implementation, to: testing }
    - { from: testing, to: lint }
    - { from: lint, to: review }
    - { from: review, to: wrap, outcome: accept }
    - { from: review, to: implementation, outcome: rework, loop: fix }
    - { from: wrap, to: publish }
  budgets: { fix: 3 }
`

// BuildPublishFlow is one agent node, build, then a publish node.
const BuildPublishFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: build, kind: agent, role_file: f/build.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: publish }
`

// WorkspaceFlow is a workspace-write agent (impl), a read-only evaluator
// (rev) and a publish node (p); with RigOptions.Workspace, impl's attempt
// may advance the run's head.
const WorkspaceFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - {id: impl, kind: agent, role_file: f/impl.md, permission_profile: workspace-write}
    - {id: rev, kind: evaluator, role_file: f/rev.md, permission_profile: read-only}
    - {id: p, kind: publish, policy: none}
  edges:
    - {from: impl, to: rev}
    - {from: rev, to: p, outcome: accept}
`

// PersistFlow is an agent (draft), a checks node (testing) and a publish.
const PersistFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: draft, kind: agent, role_file: r/a.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: draft, to: testing }
    - { from: testing, to: publish }
`

// OnePlanFlow is one agent node, planning, then a publish node.
const OnePlanFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: planning, kind: agent, role_file: r/a.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: planning, to: publish }
`

// SupervisorFlow is implementation → review → publish, rework looping
// back, with a flow supervisor block spliced in ("" for none).
func SupervisorFlow(supervisorBlock string) string {
	return `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: implementation, kind: agent, role_file: r/impl.md }
    - { id: review, kind: evaluator, role: review, role_file: r/review.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: implementation, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: implementation, outcome: rework, loop: fix }
  budgets: { fix: 5 }
` + supervisorBlock
}

// DecompositionFlow is worc's implementation shape with a decomposition
// region (implementation, review, fixing), proposed by planning, and a
// non-blocking review inside it.
const DecompositionFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: planning, kind: agent, role_file: r/planning.md, output_artifact: plan }
    - { id: implementation, kind: agent, role_file: r/impl.md }
    - { id: review, kind: evaluator, role: review, role_file: r/review.md, blocking: false }
    - { id: fixing, kind: agent, role_file: r/fixing.md }
    - { id: documentation, kind: agent, role_file: r/doc.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: planning, to: implementation }
    - { from: implementation, to: review }
    - { from: review, to: documentation, outcome: accept }
    - { from: review, to: fixing, outcome: rework, loop: fix }
    - { from: fixing, to: review }
    - { from: documentation, to: publish }
  budgets: { fix: 5 }
  decomposition:
    proposed_by: planning
    sub_flow: [implementation, review, fixing]
`

// TwoSubtasks is a planning result that splits the task in two, the
// second depending on the first.
const TwoSubtasks = `{"content": "The plan.", "decompose": true, "subtasks": [
  {"title": "Store the counter", "spec": "Add an attempts column.", "acceptance_criteria": ["a failed delivery increments attempts"]},
  {"title": "Stop retrying", "spec": "Stop after 5.\n\n## Acceptance criteria\n\n- [ ] stops after 5\n", "depends_on": ["1"]}]}`

// EnableDecomposition opens the decomposition gate in config
// (agents.decomposition.enabled); a RigOptions.Config.
func EnableDecomposition(c *config.Config) { c.Agents.Decomposition.Enabled = true }

// Evaluator reports in the findings contract.
const (
	// FindingsOneHigh gates at the default gate_severity, high.
	FindingsOneHigh = `{"findings": [{"severity": "high", "path": "a.go", "what": "bug", "fix": "fix it"}, {"severity": "low", "what": "nit"}]}`
	// FindingsClean is a clean pass.
	FindingsClean = `{"findings": []}`
)
