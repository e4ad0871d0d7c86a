// Package verify is the evaluator's verification, a rule the submit
// operation applies: an evaluator step's folded value decides accept or
// rework, within the node's rework budget counted per subtask
// (docs/contracts.md § The fold and submit_format; worc's flow format,
// loops and budgets: docs/contracts.md § Flows and task types).
package verify
