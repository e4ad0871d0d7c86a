package failclass_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/failclass"
)

// now is the time of the examples: the base of their relative resets.
var now = time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)

// rowExamples are, for each row of the table, failure texts it must
// match: the reason as the runner posts it (a shim's turn_failed), each
// with the class and the reset time it means. A row's recordings
// (TestClassify_Recordings) are its examples too.
var rowExamples = map[string][]struct {
	reason  string
	retryAt time.Time
}{
	"codex/usage-limit": {
		{reason: "codex turn failed: You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 5:00 PM.", retryAt: time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)},
		{reason: "codex turn failed: You've hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at Dec 7th, 2026 5:00 PM.", retryAt: time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC)},
		{reason: "codex turn failed: You’ve hit your usage limit."},
	},
	"stratus/report-refused": {
		{reason: "report refused: verdict contract: ENGINE said 429 Too Many Requests (report kept at /tmp/stratus-spool-t1-1.report)"},
		{reason: "result refused: checks result: unknown status"},
		{reason: "report: @file:/tmp/out.md: open /tmp/out.md: no such file or directory"},
	},
	"codex/quota":           {{reason: "codex turn failed: Quota exceeded. Check your plan and billing details."}},
	"codex/429-retries":     {{reason: "codex turn failed: exceeded retry limit, last status: 429 Too Many Requests"}},
	"claude/api-429":        {{reason: "claude: API Error: Request rejected (429) · This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}},
	"claude/credit-balance": {{reason: "claude: Credit balance is too low"}, {reason: "claude: API Error: 400 Your credit balance is too low to access the Anthropic API."}},
	// From the 2.1.328 binary's strings: a claude.ai subscription's limits.
	"claude/usage-limit": {
		{reason: "claude: Usage limit reached"},
		{reason: "claude: You've hit your weekly limit · resets Dec 8"},
		{reason: "claude: You're out of usage credits · resets Jan 1"},
		{reason: "claude: spend limit reached · resets Aug 8 · request an increase at https://go.corp.example.com/claude-limits"},
	},
	"any/http-429": {
		{reason: "engine: HTTP 429 Too Many Requests"},
		{reason: "request failed: rate_limit_exceeded: Please try again in 2.5s", retryAt: now.Add(2500 * time.Millisecond)},
		{reason: "the provider is rate limited; retry after 30 seconds", retryAt: now.Add(30 * time.Second)},
		{reason: "rate limit reached: try again in 6m0s", retryAt: now.Add(6 * time.Minute)},
		{reason: "rate_limit_error: the limit resets at 2026-12-04T18:00:00Z", retryAt: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)},
	},
	"claude/econnrefused":       {{reason: "claude: API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"}},
	"claude/enotfound":          {{reason: "claude: API Error: Can't reach the API server — check your internet or DNS (ENOTFOUND)"}},
	"claude/unable-to-connect":  {{reason: "claude: API Error: Unable to connect to API (EPROTO)"}, {reason: "claude: API Error: Unable to connect to API (ECONNREFUSED)"}},
	"codex/waiting-for-network": {{reason: "codex error: Reconnecting... waiting for network (Connection failed: error sending request)"}},
	"any/network": {
		{reason: "dial tcp 10.0.0.1:443: connect: connection refused"},
		{reason: "dial tcp: lookup api.example.com: no such host"},
		{reason: "getaddrinfo EAI_AGAIN api.anthropic.com"},
		{reason: "dial tcp 10.0.0.1:443: connect: no route to host"},
		{reason: "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{reason: "net/http: TLS handshake timeout"},
	},
	"claude/api-529":            {{reason: "claude: API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment."}},
	"claude/api-5xx":            {{reason: "claude: API Error: 500 Internal server error."}, {reason: "claude: API Error: 503 Service Unavailable."}},
	"claude/econnreset":         {{reason: "claude: API Error: Connection dropped (ECONNRESET). Check the gateway set in ANTHROPIC_BASE_URL, then try again."}},
	"codex/high-demand":         {{reason: "codex turn failed: We’re currently experiencing high demand, which may cause temporary errors."}},
	"codex/status-5xx":          {{reason: "codex turn failed: unexpected status 503 Service Unavailable: Service Unavailable, url: https://api.openai.com/v1/responses"}},
	"codex/stream-disconnected": {{reason: "codex turn failed: stream disconnected before completion: error sending request"}},
	"any/http-5xx": {
		{reason: "upstream answered status 502"},
		{reason: "overloaded_error: Overloaded"},
		{reason: "read tcp 10.0.0.2:51234->10.0.0.1:443: read: connection reset by peer"},
		{reason: "the provider is overloaded, try again in 20 seconds", retryAt: now.Add(20 * time.Second)},
	},
	"claude/auth":         {{reason: "claude: Invalid API key · Fix external API key"}, {reason: "claude: Not logged in · Please run /login"}},
	"claude/api-4xx":      {{reason: "claude: API Error: 400 model: unknown model scripted-xl"}, {reason: "claude: API Error: 404 not found"}},
	"codex/status-4xx":    {{reason: "codex turn failed: unexpected status 401 Unauthorized: invalid x-api-key, url: https://api.openai.com/v1/responses"}},
	"any/api-4xx":         {{reason: "codex turn failed: model: unknown model scripted-xl (invalid_request_error)"}, {reason: "permission_error: this key may not use the model"}},
	"stratus/cli-missing": {{reason: `claude CLI not found: exec: "claude": executable file not found in $PATH (install it, put it on PATH, or give its path)`}, {reason: `codex CLI "/opt/codex" cannot be run: permission denied (give the path of an executable file)`}},
	"stratus/spawn":       {{reason: `spawn: fork/exec /usr/local/bin/openseek: no such file or directory`}, {reason: "start claude: fork/exec /usr/bin/claude: exec format error"}},
	"stratus/pipe":        {{reason: "read stdout: read |0: input/output error"}, {reason: "write request: write |1: bad file descriptor"}},
	"stratus/cli-exited":  {{reason: "claude exited without a result: exit status 1: node: out of memory"}, {reason: "codex exited without a result: signal: killed: Killed"}},
}

// Every row of the table matches its examples, with the row's class and
// the reset the text gives (internal/failclass doc § The rules, rule 4,
// and § Reset times); every row has an example.
func TestClassify_EveryRowMatchesItsExamples(t *testing.T) {
	t.Parallel()
	rows := failclass.Table()
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Rule] {
			t.Errorf("rule %s appears twice in the table", r.Rule)
		}
		seen[r.Rule] = true
		if !failclass.Valid(r.Class) {
			t.Errorf("rule %s: class %q is none of %v", r.Rule, r.Class, failclass.Classes)
		}
		exs := rowExamples[r.Rule]
		if len(exs) == 0 {
			t.Errorf("rule %s has no example in rowExamples: add one (a row nothing tests is a row nobody knows works)", r.Rule)
		}
		for _, ex := range exs {
			v := failclass.Classify(failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: ex.reason, Now: now})
			if v.Rule != r.Rule || v.Class != r.Class {
				t.Errorf("%q: classified %s by %s, want %s by %s", ex.reason, v.Class, v.Rule, r.Class, r.Rule)
			}
			if !v.RetryAt.Equal(ex.retryAt) {
				t.Errorf("%q: RetryAt %v, want %v", ex.reason, v.RetryAt, ex.retryAt)
			}
		}
	}
	for rule := range rowExamples {
		if !seen[rule] {
			t.Errorf("rowExamples has %s, which is no rule of the table", rule)
		}
	}
}

// A row that says it was recorded names recordings that exist and that
// are classified by that row.
func TestClassify_RecordedRowsNameTheirRecordings(t *testing.T) {
	t.Parallel()
	want := map[string]string{} // recording file -> rule
	for _, sc := range scenarios() {
		want[sc.file] = sc.wantRule
	}
	for _, r := range failclass.Table() {
		files, ok := strings.CutPrefix(r.Source, "recorded: ")
		if !ok {
			continue
		}
		files, _, _ = strings.Cut(files, " (")
		for _, f := range strings.Split(files, ", ") {
			if _, err := os.Stat(filepath.Join("testdata", "recorded", f+".json")); err != nil {
				t.Errorf("rule %s names recording %s: %v", r.Rule, f, err)
			} else if want[f] != r.Rule {
				t.Errorf("rule %s names recording %s, which its scenario classifies by %q", r.Rule, f, want[f])
			}
		}
	}
}

// The rules that read the terminal, the report and the stderr tail
// (internal/failclass doc § The rules, 1–5).
func TestClassify_TerminalReportAndStderrRules(t *testing.T) {
	t.Parallel()
	exit1 := 1
	for _, tc := range []struct {
		name      string
		e         failclass.Evidence
		wantClass string
		wantRule  string
	}{
		{"a refused report is quality, whatever its text", failclass.Evidence{Terminal: failclass.TerminalCaptured, Report: true, Reason: "report refused: verdict contract: API Error: 529"},
			failclass.Quality, failclass.RuleReportRefused},
		{"max steps is quality", failclass.Evidence{Terminal: failclass.TerminalMaxSteps, Reason: "the engine ran out of steps after 24 (max_steps_exhausted)"},
			failclass.Quality, failclass.RuleNoReport},
		{"a context yield without a report is quality", failclass.Evidence{Terminal: failclass.TerminalContextYield}, failclass.Quality, failclass.RuleNoReport},
		{"no report is quality", failclass.Evidence{Terminal: failclass.TerminalNoReport, Reason: "the engine exited without a report (no subrun_report line)"},
			failclass.Quality, failclass.RuleNoReport},
		{"a deadline is a timeout", failclass.Evidence{Terminal: failclass.TerminalTimedOut, Reason: "the engine did not finish within its deadline of 600000 ms", Stderr: "stratus engine codex: id=cr-1\nworking...\n"},
			failclass.Timeout, failclass.RuleTimedOut},
		{"a deadline while codex waits for the network is the network", failclass.Evidence{Terminal: failclass.TerminalTimedOut,
			Stderr: "stratus engine codex: id=cr-1\ncodex: Reconnecting... waiting for network (Connection failed: error sending request)\nstratus engine codex: stdin closed: the call is cancelled (docs/child-contract.md § Ending: when to exit, and what the runner concludes); stopping the CLI.\n"},
			failclass.NetworkUnavailable, "codex/waiting-for-network"},
		{"a deadline long after a network blip is a timeout", failclass.Evidence{Terminal: failclass.TerminalTimedOut,
			Stderr: "codex: Reconnecting... waiting for network (Connection failed)\ncodex: a\ncodex: b\ncodex: c\n"},
			failclass.Timeout, failclass.RuleTimedOut},
		{"a deadline after a non-transient message is a timeout", failclass.Evidence{Terminal: failclass.TerminalTimedOut, Stderr: "claude: Invalid API key\n"},
			failclass.Timeout, failclass.RuleTimedOut},
		{"an exit status alone is a crash", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "exit status 3", ExitCode: &exit1},
			failclass.Infrastructure, failclass.RuleCrash},
		{"a signal alone is a crash", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "signal: segmentation fault (core dumped)"},
			failclass.Infrastructure, failclass.RuleCrash},
		{"a crash whose stderr names the network is the network", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "exit status 1",
			Stderr: "Error: connect ECONNREFUSED 127.0.0.1:443\n    at TCPConnectWrap.afterConnect\n"}, failclass.NetworkUnavailable, "any/network"},
		{"a shim's bare CLI exit is a crash", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "claude exited without a result: exit status 1"},
			failclass.Infrastructure, failclass.RuleCrash},
		{"no reason, a nonzero exit, is a crash", failclass.Evidence{ExitCode: &exit1}, failclass.Infrastructure, failclass.RuleCrash},
		{"the engine's own words, no row, are quality", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "codex completed its turn without an agent_message"},
			failclass.Quality, failclass.RuleEngineFailure},
		{"a reason's words decide before its stderr", failclass.Evidence{Terminal: failclass.TerminalFailed, Reason: "the model refused the task", Stderr: "ECONNREFUSED\n"},
			failclass.Quality, failclass.RuleEngineFailure},
		{"no terminal is read as Failed", failclass.Evidence{Reason: "claude: API Error: 529 Overloaded."}, failclass.ProviderUnavailable, "claude/api-529"},
		{"an older runner's decorated reason still matches", failclass.Evidence{Terminal: "Failed", Reason: "claude: API Error: Request rejected (429) · limit; log: x | y (log: /tmp/runner.log)"},
			failclass.RateLimited, "claude/api-429"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.e.Now = now
			v := failclass.Classify(tc.e)
			if v.Class != tc.wantClass || v.Rule != tc.wantRule {
				t.Errorf("Classify(%+v) = %s by %s, want %s by %s", tc.e, v.Class, v.Rule, tc.wantClass, tc.wantRule)
			}
		})
	}
}

// A reset is read from the text of a transient failure only, and a bare
// clock time in Now's location (internal/failclass doc § Reset times).
func TestClassify_RetryAtOnlyForTransientAndInNowsZone(t *testing.T) {
	t.Parallel()
	if v := failclass.Classify(failclass.Evidence{Reason: "claude: Invalid API key; try again in 30s", Now: now}); !v.RetryAt.IsZero() {
		t.Errorf("a non-transient failure got RetryAt %v", v.RetryAt)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	v := failclass.Classify(failclass.Evidence{Reason: "codex turn failed: You’ve hit your usage limit. Try again at 5:00 PM.", Now: now.In(paris)})
	if want := time.Date(2026, 12, 4, 17, 0, 0, 0, paris); !v.RetryAt.Equal(want) {
		t.Errorf("RetryAt %v, want %v (5 PM in the runner's zone)", v.RetryAt, want)
	}
	// A time of day that has passed today is tomorrow's: a reset is never
	// in the past (it was read as today's 3 AM, 17 h gone, and the step
	// went back to the rate-limited provider after its park interval).
	v = failclass.Classify(failclass.Evidence{Reason: "codex turn failed: You’ve hit your usage limit. Upgrade to Pro or try again at 3:00 AM.", Now: now.In(paris)})
	if want := time.Date(2026, 12, 5, 3, 0, 0, 0, paris); !v.RetryAt.Equal(want) {
		t.Errorf("RetryAt %v, want %v (the next 3 AM)", v.RetryAt, want)
	}
}

func TestTransient_TheFirstThreeClasses(t *testing.T) {
	t.Parallel()
	var got []string
	for _, c := range failclass.Classes {
		if failclass.Transient(c) {
			got = append(got, c)
		}
	}
	if want := []string{failclass.ProviderUnavailable, failclass.RateLimited, failclass.NetworkUnavailable}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transient classes %v, want %v", got, want)
	}
	if failclass.Transient("") || failclass.Valid("") || failclass.Valid("Timeout") {
		t.Error(`"" or a mis-cased class counts as a class`)
	}
}
