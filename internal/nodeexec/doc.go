// Package nodeexec runs the two node kinds that are not an engine call —
// `checks` and `tool` — and decides their outcome (README.md § Node kinds;
// worc configuration.md § checks, § tools; flow-authoring.md § Custom tool
// nodes; reference.md § checks node, § tool node).
//
// It owns three things, each usable on its own:
//
//   - the wire shapes: Spec (what the server tells the runner to run, the
//     `exec` field of GET /v1/worker/prompt) and Result (what the runner
//     submits to POST /v1/worker/submit);
//   - execution, on the runner (the ECS task or the local `stratus runner`,
//     the one process that has the repository checked out): RunChecks
//     selects the configured command sets by the work tree's diff and runs
//     every selected command as a bounded argv process (no shell, a
//     timeout, the allowlisted environment only, the output tail kept);
//     RunTool runs one contained executable from <work dir>/.stratus/tools
//     with the JSON context on stdin; both with CommandEnv's environment:
//     the allowlisted variables, config checks.env, and a writable HOME,
//     TMPDIR and XDG_CACHE_HOME on every runtime (docs/runner-image.md §
//     The environment of checks and tools);
//   - the outcome rules, pure functions the server applies to a Result:
//     ChecksVerdict (with EnvironmentFailure: a check that could not run
//     for its environment parks the run, docs/runner-image.md § When a
//     check cannot run), ToolOutcome, RepeatedFail, and the Markdown
//     reports.
//
// It does not write artifacts, complete task tokens or route: the server
// (internal/worker) does. It never applies a tool's findings or data to
// anything; they are recorded only. It is not a sandbox: a tool or a check
// command can do whatever the runner's user can, within its timeout and
// without the environment's secrets (worc flow-authoring.md § The honest v1
// boundary).
package nodeexec
