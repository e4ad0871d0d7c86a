// Package builtin carries Stratus's built-in flows and their role files,
// embedded in the binary. They are delivery-only: `stratus install` copies
// them into DIR/.stratus/flows/ as editable copies, and the orchestrator
// reads only those copies at run time
// (docs/contracts.md § Flows and task types: "Built-ins are delivered, not
// resolved from the package").
package builtin

import "embed"

// Flows is the flows tree: <task_type>.yaml plus a <task_type>/ directory of
// role files per flow, rooted at "flows".
//
//go:embed flows
var Flows embed.FS

// Names lists the built-in flows a task runs (by task_type), each compiled
// into statemachine/ for template.yaml. Flows holds one more: merge, the
// flow `stratus merge-task` runs on a conflicting base merge (config
// git.merge_flow), embedded on the operator's machine for both targets.
var Names = []string{"implementation"}
