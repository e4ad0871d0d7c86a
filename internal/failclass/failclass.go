package failclass

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// The six failure classes (package doc). Untyped, so they compare with
// stratus.Attempt.Class, a string.
const (
	ProviderUnavailable = "provider_unavailable"
	RateLimited         = "rate_limited"
	NetworkUnavailable  = "network_unavailable"
	Timeout             = "timeout"
	Quality             = "quality"
	Infrastructure      = "infrastructure"
)

// Classes are the six classes, transient ones first.
var Classes = []string{ProviderUnavailable, RateLimited, NetworkUnavailable, Timeout, Quality, Infrastructure}

// Valid reports whether class is one of Classes.
func Valid(class string) bool { return slices.Contains(Classes, class) }

// Transient reports whether an attempt that failed with class may succeed
// when tried again later or elsewhere: provider_unavailable, rate_limited
// and network_unavailable (worc configuration.md § agents.retry).
func Transient(class string) bool {
	switch class {
	case ProviderUnavailable, RateLimited, NetworkUnavailable:
		return true
	}
	return false
}

// The terminals of docs/contracts.md § Terminal classification, as the
// runner reports them (contract.Terminal's values; this package imports nothing of
// the runner's).
const (
	TerminalCaptured     = "Captured"
	TerminalFailed       = "Failed"
	TerminalTimedOut     = "TimedOut"
	TerminalMaxSteps     = "MaxSteps"
	TerminalContextYield = "ContextYield"
	TerminalNoReport     = "NoReport"
)

// Evidence is what is known of a failed attempt: what the child contract
// gives the runner
// (docs/contracts.md § The event stream, § The report line, § Terminal classification)
// and what the runner adds.
type Evidence struct {
	// Terminal is the terminal (docs/contracts.md § Terminal classification;
	// "" is read as Failed).
	Terminal string
	// ExitCode is the engine's exit code when it exited on its own; nil
	// when unknown. A nonzero code the engine explained nothing of is also
	// the reason ("exit status N",
	// docs/contracts.md § Terminal classification), which the rules read.
	ExitCode *int
	// Reason is the failure's text: the failure event's error (the
	// shims' turn_failed carries the CLI's own message), the spawn or
	// pipe error, "exit status N", or why a report was refused.
	Reason string
	// Stderr is a bounded tail of the engine's stderr (the runner keeps
	// its last StderrTailBytes); "" when none was kept.
	Stderr string
	// Report is true when the engine did report and the report was
	// refused (its schema, the verdict contract, an unreadable @file:).
	Report bool
	// Now is when the failure was seen: the base of a relative reset
	// ("try again in 20s") and the day and zone of a bare clock time.
	// Zero means time.Now().
	Now time.Time
}

// StderrTailBytes is how much of an engine's stderr the runner keeps as
// evidence, in bytes: the last lines, where a CLI says why it stopped.
const StderrTailBytes = 4 << 10

// Verdict is a classification.
type Verdict struct {
	// Class is one of Classes.
	Class string
	// RetryAt is when the provider takes requests again, when the failure
	// said so; zero means unknown.
	RetryAt time.Time
	// Rule names what decided: a table row's Rule, or one of the rules of
	// the package doc ("report-refused", "terminal-timed-out", ...).
	Rule string
}

// Rules that are not table rows.
const (
	RuleReportRefused = "report-refused"      // a report came, and was refused
	RuleNoReport      = "terminal-no-report"  // MaxSteps, ContextYield, NoReport
	RuleTimedOut      = "terminal-timed-out"  // TimedOut, nothing else known
	RuleCrash         = "crash"               // an exit status or signal, no words
	RuleEngineFailure = "engine-said-failure" // the engine's own words, no row
)

// stderrLines is how many of the stderr tail's last lines rules 3 and 4
// read: the CLI's last words, not a log of the whole attempt.
const stderrLines = 3

// Classify classifies a failed attempt by the rules of the package doc.
// It never fails: evidence that says nothing is an engine failure
// (quality) or a crash (infrastructure).
func Classify(e Evidence) Verdict {
	now := e.Now
	if now.IsZero() {
		now = time.Now()
	}
	switch {
	case e.Report:
		return Verdict{Class: Quality, Rule: RuleReportRefused}
	}
	switch e.Terminal {
	case TerminalMaxSteps, TerminalContextYield, TerminalNoReport:
		return Verdict{Class: Quality, Rule: RuleNoReport}
	case TerminalTimedOut:
		if v, ok := match(lastLines(e.Stderr, stderrLines), now); ok && Transient(v.Class) {
			return v
		}
		return Verdict{Class: Timeout, Rule: RuleTimedOut}
	}
	if reason := strings.TrimSpace(e.Reason); reason == "" || crash().MatchString(reason) {
		// Only how the process ended: its stderr may say why.
		if v, ok := match(lastLines(e.Stderr, stderrLines), now); ok {
			return v
		}
		return Verdict{Class: Infrastructure, Rule: RuleCrash}
	}
	if v, ok := match(e.Reason, now); ok {
		return v
	}
	return Verdict{Class: Quality, Rule: RuleEngineFailure}
}

// crash is a reason that is only how the process ended (contract's
// ProcessState text, or the shims' "claude exited without a result: exit
// status 1" with no stderr after it).
var crash = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:(?:claude|codex) exited without a result(?:: )?)?(?:exit status -?\d+|signal: [a-z ]+(?: \(core dumped\))?)?$`)
})

// match returns the verdict of the first row matching text.
func match(text string, now time.Time) (Verdict, bool) {
	if strings.TrimSpace(text) == "" {
		return Verdict{}, false
	}
	for _, r := range rows() {
		if r.Match.MatchString(text) {
			v := Verdict{Class: r.Class, Rule: r.Rule}
			if Transient(r.Class) {
				v.RetryAt = retryAt(text, now)
			}
			return v, true
		}
	}
	return Verdict{}, false
}

// lastLines is the last n non-blank lines of s but the shims' own log
// lines ("stratus engine codex: ..."), which say what the shim did, not
// why the CLI stopped.
func lastLines(s string, n int) string {
	var keep []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "stratus engine ") {
			continue
		}
		keep = append(keep, l)
	}
	slices.Reverse(keep)
	return strings.Join(keep, "\n")
}
