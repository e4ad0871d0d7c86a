// Package resolve is the rule that decides which engine a step runs on and
// how: provider, model, reasoning effort, permission profile and timeout,
// from the node's own fields, the task's per-node overrides, the flow's
// defaults and config.yaml's, in that order (docs/contracts.md § Per-node
// overrides, § Flows and task types). It is a pure function of the
// configuration: the dispatch, fetch and attempt layers and the
// supervisor's turns all resolve the same way.
package resolve
