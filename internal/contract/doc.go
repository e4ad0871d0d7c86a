// Package contract is the runner side of the workflow child contract v1
// (docs/contracts.md § Child contract v1).
//
// The package owns one thing: launching an engine executable for a single
// agent call and resolving that launch into exactly one [Terminal] with its
// [Attempt] accounting. Concretely it implements these sections:
//
//   - § Process lifecycle: spawn with the parent environment plus an
//     overlay, a working directory, stdin/stdout pipes and inherited stderr,
//     in its own process group; the bounded exit-status wait after stdout
//     EOF; the wall deadline (close stdin, drain for the cancel grace, then
//     kill the group); caller cancellation (kill the group, return
//     ctx.Err(), never a terminal);
//   - § The request line: the single request line ([Envelope]), with stdin
//     kept open;
//   - § The event stream: JSON lines, integral-number and usage validity
//     rules, optional cost_usd, steps as a maximum, noise skipped;
//   - § The report line (the last one wins);
//   - § Terminal classification: by precedence, with the attempt attached
//     on every terminal;
//   - § Timing, environment and argv: timing defaults and the request write
//     inside the deadline.
//
// It does not: map terminals to workflow outcomes, validate report content
// against a schema, journal anything, choose argv for a particular engine
// (§ The reference engine: deployment configuration), or read the child's
// stderr.
//
// Interpretations where the contract is silent, fixed here so they are
// testable:
//   - a known event whose read fields have the wrong JSON type (a non-string
//     error, a non-integral step or to_sequence) is ignored like any invalid
//     line;
//   - when several failure events arrive, the first one's reason is kept
//     (it names the root cause);
//   - a present "cost_usd": null is a present value that is not a number, so
//     it voids the whole usage line;
//   - an EPIPE while writing the request (the child closed stdin without
//     reading) is not a pipe failure: the child's output and exit status
//     classify the run.
package contract
