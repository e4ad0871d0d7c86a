// Package conform checks an engine executable against the conformance
// checklist of the workflow child contract v1
// (docs/contracts.md § Conformance checklist), from the outside, the way a
// runner sees it.
//
// It owns the checks and their verdicts, not the contract: a normal launch
// goes through [contract.Runner] (docs/contracts.md § Child contract v1), and
// where a check needs what the runner deliberately hides (the raw stdout
// lines, a request with another major version) it launches the engine itself
// with os/exec, timing the engine's exit and its stdout EOF apart (a
// grandchild holding stdout open is named as such). The launches run
// concurrently; the checks that read a normal run's stdout share one. The
// checks, in table order, each with the section of docs/contracts.md it
// enforces and its item of § Conformance checklist:
//
//  1. rejects-other-major (§ Versioning, item 1): a request with
//     workflow_contract 2 draws a command_error event and no report;
//  2. tolerates-open-stdin (§ The request line, item 2): with the v1 request
//     and stdin kept open, the engine reports and ends before the run's
//     timeout, without waiting for a second line;
//  3. stops-on-stdin-eof (§ Process lifecycle, item 2): once the engine has
//     had its request (written, then 300 ms or its first stdout line), stdin
//     is closed and the engine must exit within the cancel grace, report or
//     not, instead of being killed at its end;
//  4. json-only-stdout (§ The event stream, item 3): every stdout line of a
//     normal run is a JSON object;
//  5. one-report-last (§ The report line, item 6): a normal run prints
//     exactly one line with a top-level subrun_report key, and it is the last
//     non-blank line;
//  6. well-formed-usage (§ The event stream, item 4): every usage event
//     carries all five token fields as integral numbers, and cost_usd, when
//     present, is a finite non-negative number;
//  7. failure-explained (§ Terminal classification, item 5): FAIL when any
//     launch's stdout has a failure event and a report; otherwise SKIP — no
//     request provokes a handled failure in every engine.
//
// A normal run that ends with a failure event and no report (the engine
// refused the input) fails checks 2 and 5 with a detail saying so.
//
// Every launch runs in a fresh scratch directory of its own (Target.Dir),
// removed when Run returns, never in the caller's working directory
// (docs/child-contract.md § Checking an engine).
//
// It does not: judge the report's content (that is the caller's schema,
// docs/contracts.md § The report line), check agent_step values, read the
// engine's stderr (it is inherited, docs/contracts.md § Process lifecycle),
// or choose argv for an engine (docs/contracts.md § Timing, environment and
// argv: deployment configuration). An engine run through these checks is
// launched four times, so a model-backed one spends tokens on each launch.
package conform
