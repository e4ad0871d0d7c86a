// Package verify is the evaluator's verification, a rule the submit
// operation applies: an evaluator step's folded findings decide accept or
// rework against the node's gate_severity; a blocking node's rework loops
// through the flow's named budget, and a non-blocking node's counts against
// its max_rework_per_stage (per subtask in a decomposed task), after which
// it accepts with the findings still open (docs/contracts.md § Per-node
// overrides, § The fold and submit_format; worc reference.md § evaluator
// node).
package verify
