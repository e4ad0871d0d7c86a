// Package engine holds Stratus's bundled child engines, each a conforming
// engine of the workflow child contract v1
// (docs/contracts.md § Conformance checklist):
//
//   - Echo mirrors openseek's `echo` kind
//     (docs/contracts.md § The reference engine): one agent_step (step 1),
//     one usage (7/3/10 tokens, all five fields), then the input echoed as
//     the report.
//
//   - Script answers deterministically per node id and visit from a scenario
//     file, staging parts through the worker API, so whole flows (rework
//     loops included) run without a model.
//
//   - Claude and Codex wrap those CLIs
//     (docs/contracts.md § The reference engine, § Conformance checklist:
//     "the shim/claude and shim/codex executables ... two further conforming
//     engines"): they read kind, max_steps and schema from the envelope,
//     enforce max_steps themselves, and translate the CLI's JSON events.
//
// They are run as `stratus engine echo|script|claude|codex`.
package engine
