// Package conform checks an engine executable against the conformance
// checklist of the workflow child contract v1 (seed 003 § 9), from the
// outside, the way a runner sees it.
//
// It owns the checks and their verdicts, not the contract: a normal launch
// goes through [contract.Runner] (seed 003 §§ 1–6), and where a check needs
// what the runner deliberately hides (the raw stdout lines, a request with
// another major version) it launches the engine itself with os/exec. Every
// check is its own launch of the engine, and the launches run concurrently.
// The checks, in table order:
//
//  1. rejects-other-major (§ 8, § 9.1): a request with workflow_contract 2
//     draws a command_error event and no report;
//  2. tolerates-open-stdin (§ 2, § 9.2): with the v1 request and stdin kept
//     open, the engine reports and ends before the run's timeout, without
//     waiting for a second line;
//  3. stops-on-stdin-eof (§ 1, § 9.2): with a 1 ms wall deadline, so the
//     runner closes stdin almost at once, the engine ends on its own within
//     the cancel grace instead of being killed at its end;
//  4. json-only-stdout (§ 3, § 9.3): every stdout line of a normal run is a
//     JSON object;
//  5. one-report-last (§ 4, § 9.6): a normal run prints exactly one line
//     with a top-level subrun_report key, and it is the last non-blank line;
//  6. well-formed-usage (§ 3, § 9.4): every usage event carries all five
//     token fields as integral numbers, and cost_usd, when present, is a
//     finite non-negative number;
//  7. failure-explained (§ 5, § 9.5): always SKIP — no request provokes a
//     handled failure in every engine (check 1 exercises the command_error
//     path only).
//
// It does not: judge the report's content (that is the caller's schema,
// seed 003 § 4), check agent_step values, read the engine's stderr (it is
// inherited, § 1), or choose argv for an engine (§ 6: deployment
// configuration). A conforming engine run through these checks is launched
// five or six times, so a model-backed one spends tokens on each launch.
package conform
