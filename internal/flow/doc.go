// Package flow reads and validates worc flow files, the YAML graphs an
// operator writes: `<flows-dir>/<task_type>.yaml`, one `flow:` mapping of
// header fields, nodes (agent, evaluator, checks, tool, hitl, publish),
// outcome-labelled edges, loop budgets, and the optional defaults,
// supervisor and decomposition blocks. Stratus reads worc's format
// unchanged: worc's own flow files (its flows/ directory) load as they are.
//
// What it owns:
//
//   - Parse: strict reading. Every mapping is an allowlist (node keys
//     depend on the kind), so an unknown key anywhere fails closed with
//     "file:line:col: unknown key "x" in <where>; allowed: ...". Values of
//     the wrong type and keys given twice fail the same way. Every node,
//     edge and key keeps its source position. Parsing goes on after a
//     problem: the ParseError carries what did parse, so Validate still
//     runs on it (WithoutCascades drops what restates a parse problem). As
//     in PyYAML (worc), a UTF-8 byte order mark is skipped and merge keys
//     `<<: *anchor` merge; bytes that are not UTF-8 are refused by byte
//     offset, and a flow file or role file over 1 MiB (MaxFlowBytes,
//     MaxRoleFileBytes; ReadRoleFile) is refused naming its size.
//   - Load: the flow named by a task's task_type, which must equal the file
//     stem; a missing file is ENOTFOUND "flow not found" (never a fallback).
//   - Validate: worc's fatal validation, every problem collected and
//     sorted by position: graph integrity and the security ceiling
//     (including the forbidden-args screen on extra_args, ScreenArgs)
//     always; config consistency with ValidateOptions.Config (providers
//     allowed and launchable, reasoning supported by the provider that runs
//     the node, no Codex workspace-write node with network, skills only
//     without strict isolation, supervisor.observe.mode only narrowing);
//     the tool registry with ValidateOptions.ToolsDir (ResolveTool). And
//     the warnings: the anti-drift lint of every role file, a missing role
//     file (MissingRoleFiles gives a run's preflight the fatal form), an
//     unknown when.fact, loop budgets clamped by agents.max_fix_cycles or
//     shorter than a non-blocking evaluator's max_rework_per_stage.
//
// Rules: docs/contracts.md § Flows and task types, § Fatal validation; the
// reserved node ids that would shadow {<name>_path} and the anti-drift lint:
// docs/contracts.md § Template variables, § Fatal validation; the per-node
// fields read here: docs/contracts.md § Per-node overrides; the narrowing
// rule: docs/contracts.md § The supervisor, § What observe.mode costs; the
// registry: docs/contracts.md § Tools. Field semantics follow
// peers/worc/guide/flows/reference.md, the authority on fields.
//
// What it deliberately does not do:
//
//   - Resolve defaults into nodes (defaults.evaluator, the ceiling as a
//     node's permission profile): the Flow is the file as written.
//   - Render prompts (internal/prompt) or compile the graph to a state
//     machine (internal/compiler); evaluate `when` facts at run time.
//   - Check that the permission_ceiling is reachable by some provider's
//     permission_profile: Stratus providers carry no permission profile.
//   - Check that skills exist in the repository (a run-time check), or that
//     a model id exists (models pass through unverified, as in worc).
package flow
