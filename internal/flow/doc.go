// Package flow reads and validates worc flow files, the YAML graphs an
// operator writes: `<flows-dir>/<task_type>.yaml`, one `flow:` mapping of
// header fields, nodes (agent, evaluator, checks, tool, hitl, publish),
// outcome-labelled edges, loop budgets, and the optional defaults,
// supervisor and decomposition blocks. Stratus reads worc's format
// unchanged: the files under ../shared/peers/worc/flows/ load as they are.
//
// What it owns:
//
//   - Parse: strict reading. Every mapping is an allowlist (node keys
//     depend on the kind), so an unknown key anywhere fails closed with
//     "file:line:col: unknown key "x" in <where>; allowed: ...". Values of
//     the wrong type fail the same way. Every node, edge and key keeps its
//     source position.
//   - Load: the flow named by a task's task_type, which must equal the file
//     stem; a missing file is ENOTFOUND "flow not found" (never a fallback).
//   - Validate: the graph-integrity and security-ceiling layers of worc's
//     fatal validation, collected (every problem, sorted by position).
//
// Seed sections: 004 § Flows (task_type dispatch and operator flows) —
// "Fatal validation"; 004 § Prompt templates — the reserved node ids that
// would shadow {<name>_path}; 004 § Per-node overrides in flows — the
// per-node fields read here. Field semantics follow
// peers/worc/guide/flows/reference.md, the authority on fields.
//
// What it deliberately does not do:
//
//   - The config-aware layer (provider in agents.allowed, reasoning sets,
//     observe.mode narrowing, tool executables present, the extra_args
//     forbidden-args screen): Stratus has no worc config; engines replace
//     providers.
//   - Resolve defaults into nodes (defaults.evaluator, the ceiling as a
//     node's permission profile): the Flow is the file as written.
//   - Render prompts (internal/prompt) or compile the graph to a state
//     machine (internal/compiler); evaluate `when` facts at run time.
//   - Check that decomposition.sub_flow is a connected region.
package flow
