// Package failclass classifies a failed attempt: what went wrong, in one
// of six classes, and — for a rate limit whose reset the CLI printed —
// when the provider takes requests again. It is the one place that reads
// an engine's failure text; the runner classifies what its engine left
// (internal/runner), the worker API classifies what it sees itself and
// what an older runner sent without a class (internal/worker), and both
// call [Classify] or use the class constants.
//
// # The classes
//
// The names are worc's (its configuration reference, § agents.retry: the
// workflow Stratus runs):
//
//   - provider_unavailable: the provider answered 5xx or overloaded (529),
//     or dropped the connection (reset) — transient;
//   - rate_limited: 429, or a usage-window / quota / credit message of
//     Claude Code or Codex — transient, but worc's rule is that it is not
//     tight-retried on the same provider: it is fallback-eligible and,
//     when every provider is rate-limited, the run parks until the reset;
//   - network_unavailable: the provider could not be reached — DNS
//     failure, connection refused, no route, a TLS handshake that failed —
//     transient;
//   - timeout: the attempt ran past its deadline
//     (terminal TimedOut, docs/contracts.md § Terminal classification) or its
//     heartbeat window — not transient (worc: "never a timeout");
//   - quality: the engine ended with a bad or refused report, broke the
//     verdict contract, ran out of steps, or said in its own words that
//     it failed — never retried as transient (worc: "never a quality
//     failure");
//   - infrastructure: the worker died or its task stopped, the launch
//     failed (a missing CLI), the CLI crashed without a word, the provider
//     refused the credentials or the request (401, 403, other 4xx: worc §
//     Provider routing counts "missing binaries, authentication errors,
//     ... process crashes" as infrastructure errors), or the runner could
//     not reach the worker API.
//
// [Transient] is true for the first three only.
//
// # The rules, in order (Classify)
//
//  1. A report came (Evidence.Report) but was refused (schema, verdict
//     contract, an unreadable @file: body, a write into the operator's
//     work dir): quality, whatever its text quotes — an engine does not
//     make its failure transient by naming a file "ECONNREFUSED". (An
//     older runner's "report refused: ..." without a class is the table's
//     first row, to the same effect.)
//  2. Terminal MaxSteps, ContextYield or NoReport
//     (docs/contracts.md § Terminal classification): the engine ended without
//     the report it owed: quality.
//  3. Terminal TimedOut: timeout — unless the last lines of the engine's
//     stderr match a transient row of the table: Codex 0.169 waits for an
//     unreachable provider forever ("Reconnecting... waiting for
//     network"), so its attempt ends at its deadline, and the cause is the
//     network, not the work.
//  4. Terminal Failed (or any other, or none) whose reason is only how the
//     process ended — an exit status or a signal, nothing else said (a
//     crash): the table's rows against the last lines of its stderr, where
//     a CLI says why; no row: infrastructure (worc counts process crashes
//     as infrastructure errors).
//  5. Any other reason (the failure event's text: the Claude and Codex
//     shims put the CLI's own message in turn_failed): the table's rows,
//     in order; the first that matches decides. No row: the engine's own
//     account of its failure: quality.
//
// The table ([Table]) lists each message the classification recognises:
// the real CLIs' (Claude Code 2.1.328 and Codex 0.169.0, as package.json
// pins them), Stratus's own launch and shim messages, and a few generic
// ones (the names an HTTP client or the OS gives an error). Each row says
// the HTTP status and API error type it means and where it comes from: a
// recording under testdata/recorded (what the runner saw when the real
// CLI met the scripted model server answering that error), or, for the
// messages a recording cannot produce here (a Claude subscription's usage
// limit needs a claude.ai login), the CLI binary's own strings.
//
// # Reset times (Verdict.RetryAt)
//
// Read from the same text, for a transient class only:
//
//   - Codex's usage limit: "... or try again at 5:00 PM." (its next
//     occurrence: today, or tomorrow once it has passed, in the engine's
//     local time) or "... try again at Dec 7th, 2026 5:00 PM.";
//   - a provider message that says "try again in 2.5s" (a Go-style
//     duration, as OpenAI's 429 bodies give it) or "try again in 20
//     seconds" (seconds, minutes or hours), from Evidence.Now.
//
// A wall-clock time without a zone is read in Evidence.Now's location:
// the runner passes its own local time, which is its engine's. Neither
// CLI prints the reset headers of a plain 429 (retry-after,
// anthropic-ratelimit-*-reset, x-ratelimit-reset-*): they use them for
// their own retries, so RetryAt is then zero (unknown).
//
// # What the CLIs do before they fail
//
// Both retry on their own, so a failure that reaches the runner is one
// they gave up on (measured against the scripted model server):
//
//   - Claude Code 2.1.328 retries an API error 10 times by default
//     (CLAUDE_CODE_MAX_RETRIES, clamped to 15), from about 0.6 s doubling
//     to about 35 s between tries, honouring retry-after: some 3 minutes
//     against a provider that keeps answering 503. Each retry is a
//     {"type":"system","subtype":"api_retry"} line (attempt, retry_delay_ms,
//     error_status); the result line carries api_error_status and
//     api_error_type beside its text.
//   - Codex 0.169.0 retries a request request_max_retries times (default
//     4) and reconnects a stream stream_max_retries times (default 5), both
//     settings of its model provider in config.toml: 30 requests in about
//     25 s against a provider answering 503 ("Reconnecting... 1/5 (...)"),
//     6 against one answering 429. A provider it cannot reach (connection
//     refused, a host that does not resolve) it waits for without end,
//     whatever those settings ("Reconnecting... waiting for network",
//     every 5, 10, 20, ... s): the attempt ends at its deadline (rule 3).
//
// The recordings are made with both set to 1 (CLAUDE_CODE_MAX_RETRIES=1;
// request_max_retries = 1, stream_max_retries = 1), so each takes seconds.
//
// It does not decide what a failure leads to (retry, provider fallback,
// parking): that is the retry policy's (internal/retry), over the classes
// recorded on the attempts.
package failclass
