package failclass

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Row is one failure message the classification recognises.
type Row struct {
	// Rule names the row: "<who>/<what>", e.g. "claude/api-529".
	Rule string
	// Who prints it: "claude" (Claude Code 2.1.328), "codex" (Codex
	// 0.169.0), "stratus" (the shims and the runner) or "any" (a generic
	// name an HTTP client, Node or the OS gives an error).
	Who string
	// Status and ErrorType are the HTTP status and API error type the
	// message means; 0 and "" when it has none (a network error).
	Status    int
	ErrorType string
	// Class is the class the message means.
	Class string
	// Pattern is the regular expression (RE2) a failure's text is
	// searched with.
	Pattern string
	// Source says where the message was seen: the recordings under
	// testdata/recorded that show it ("recorded: claude_529"), or "binary
	// strings" for a message of the pinned CLI's binary that no recording
	// here can produce.
	Source string
}

// table is the classification's table, in the order it is searched: a
// message that could match two rows matches the first (rate limits
// before server errors: a 429's text may say "server").
var table = []Row{
	// quality, first: a report refused says so whatever it quotes (an
	// older runner posted these without a class).
	{Rule: "stratus/report-refused", Who: "stratus", Class: Quality,
		Pattern: `^(?:report|result) refused: |^report: `, Source: "the runner's failure for a report the worker API refused, or an unreadable @file: report (internal/runner)"},

	// rate_limited: worc's usage-window and quota messages, and 429s.
	{Rule: "codex/usage-limit", Who: "codex", Status: 429, ErrorType: "usage_limit_reached", Class: RateLimited,
		Pattern: `You[’']ve hit your usage limit`, Source: "recorded: codex_usage_limit, codex_usage_limit_days"},
	{Rule: "codex/quota", Who: "codex", Status: 429, ErrorType: "insufficient_quota", Class: RateLimited,
		Pattern: `Quota exceeded\. Check your plan and billing details`, Source: "recorded: codex_quota"},
	{Rule: "codex/429-retries", Who: "codex", Status: 429, ErrorType: "tokens", Class: RateLimited,
		Pattern: `exceeded retry limit, last status: 429\b`, Source: "recorded: codex_429"},
	{Rule: "claude/api-429", Who: "claude", Status: 429, ErrorType: "rate_limit_error", Class: RateLimited,
		Pattern: `API Error: Request rejected \(429\)`, Source: "recorded: claude_429"},
	{Rule: "claude/credit-balance", Who: "claude", Status: 400, ErrorType: "invalid_request_error", Class: RateLimited,
		Pattern: `(?i)credit balance (?:is )?too low`, Source: "recorded: claude_credit"},
	{Rule: "claude/usage-limit", Who: "claude", Status: 429, ErrorType: "rate_limit_error", Class: RateLimited,
		Pattern: `(?i)\busage limit reached\b|You[’']ve hit your [\w’' -]*limit|out of usage credits|spend limit reached`,
		Source:  "binary strings (a claude.ai subscription's limit: no recording without a login)"},
	{Rule: "any/http-429", Who: "any", Status: 429, Class: RateLimited,
		Pattern: `(?i)\b429 Too Many Requests\b|\bstatus:? 429\b|\brate[ _-]?limit(?:ed|_error|_exceeded| reached| exceeded)\b|\btoo many requests\b`,
		Source:  "generic"},

	// network_unavailable: the provider could not be reached.
	{Rule: "claude/econnrefused", Who: "claude", Class: NetworkUnavailable,
		Pattern: `API Error: Connection refused\b.*\(ECONNREFUSED\)`, Source: "recorded: claude_refused"},
	{Rule: "claude/enotfound", Who: "claude", Class: NetworkUnavailable,
		Pattern: `API Error: Can[’']t reach the API server\b.*\(ENOTFOUND\)`, Source: "recorded: claude_dns"},
	{Rule: "claude/unable-to-connect", Who: "claude", Class: NetworkUnavailable,
		Pattern: `API Error: Unable to connect to API \(E[A-Z_]+\)`, Source: "recorded: claude_tls"},
	{Rule: "codex/waiting-for-network", Who: "codex", Class: NetworkUnavailable,
		Pattern: `Reconnecting\.\.\. waiting for network`, Source: "recorded: codex_refused, codex_dns"},
	{Rule: "any/network", Who: "any", Class: NetworkUnavailable,
		Pattern: `(?i)\b(?:ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|ETIMEDOUT|EPROTO)\b|connection refused|no route to host|network is unreachable|no such host|temporary failure in name resolution|tls handshake|x509: `,
		Source:  "generic"},

	// provider_unavailable: 5xx, overloaded, a dropped connection.
	{Rule: "claude/api-529", Who: "claude", Status: 529, ErrorType: "overloaded_error", Class: ProviderUnavailable,
		Pattern: `API Error: 529\b`, Source: "recorded: claude_529"},
	{Rule: "claude/api-5xx", Who: "claude", Status: 500, ErrorType: "api_error", Class: ProviderUnavailable,
		Pattern: `API Error: 5\d\d\b`, Source: "recorded: claude_500, claude_503"},
	{Rule: "claude/econnreset", Who: "claude", Class: ProviderUnavailable,
		Pattern: `API Error: Connection dropped \(ECONNRESET\)`, Source: "recorded: claude_reset"},
	{Rule: "codex/high-demand", Who: "codex", Status: 500, ErrorType: "server_error", Class: ProviderUnavailable,
		Pattern: `We[’']re currently experiencing high demand`, Source: "recorded: codex_500"},
	{Rule: "codex/status-5xx", Who: "codex", Status: 503, ErrorType: "server_error", Class: ProviderUnavailable,
		Pattern: `unexpected status 5\d\d\b`, Source: "recorded: codex_503, codex_529"},
	{Rule: "codex/stream-disconnected", Who: "codex", Class: ProviderUnavailable,
		Pattern: `stream disconnected before completion`, Source: "recorded: codex_reset"},
	{Rule: "any/http-5xx", Who: "any", Status: 500, Class: ProviderUnavailable,
		Pattern: `(?i)\bstatus:? 5\d\d\b|\b(?:overloaded_error|api_error|server_error)\b|\boverloaded\b|\bECONNRESET\b|connection reset|internal server error|service unavailable|bad gateway|gateway timeout`,
		Source:  "generic"},

	// infrastructure: the provider refused the credentials or the
	// request, or the engine could not be launched or crashed.
	{Rule: "claude/auth", Who: "claude", Status: 401, ErrorType: "authentication_error", Class: Infrastructure,
		Pattern: `(?i)Invalid API key|Please run /login|Not logged in|OAuth token (?:has )?(?:expired|revoked)`, Source: "recorded: claude_401"},
	{Rule: "claude/api-4xx", Who: "claude", Status: 400, ErrorType: "invalid_request_error", Class: Infrastructure,
		Pattern: `API Error: 4\d\d\b`, Source: "recorded: claude_400"},
	{Rule: "codex/status-4xx", Who: "codex", Status: 401, ErrorType: "invalid_request_error", Class: Infrastructure,
		Pattern: `unexpected status 4\d\d\b`, Source: "recorded: codex_401"},
	{Rule: "any/api-4xx", Who: "any", Status: 400, Class: Infrastructure,
		Pattern: `\b(?:invalid_request_error|authentication_error|permission_error|not_found_error|request_too_large)\b`,
		Source:  "recorded: codex_400 (Codex passes a 400's body on; the shim reads it as \"message (type)\")"},
	{Rule: "stratus/cli-missing", Who: "stratus", Class: Infrastructure,
		Pattern: `CLI not found: |CLI "[^"]*" cannot be run: `, Source: "the shims' agent_setup_failed (internal/engine)"},
	{Rule: "stratus/spawn", Who: "stratus", Class: Infrastructure,
		Pattern: `^(?:spawn: |start (?:claude|codex): )`, Source: "the runner's and the shims' spawn errors (internal/contract, internal/engine)"},
	{Rule: "stratus/pipe", Who: "stratus", Class: Infrastructure,
		Pattern: `^(?:read stdout|write request): `, Source: "the runner's pipe errors (internal/contract)"},
	{Rule: "stratus/cli-exited", Who: "stratus", Class: Infrastructure,
		Pattern: `^(?:claude|codex) exited without a result\b`, Source: "the shims' turn_failed when the CLI printed no result (internal/engine)"},
}

// compiled is the table with its patterns compiled, on first use.
type compiled struct {
	Row
	Match *regexp.Regexp
}

var rows = sync.OnceValue(func() []compiled {
	out := make([]compiled, len(table))
	for i, r := range table {
		out[i] = compiled{Row: r, Match: regexp.MustCompile(r.Pattern)}
	}
	return out
})

// Table returns the classification's rows, in the order they are
// searched (package doc, rule 4).
func Table() []Row { return append([]Row(nil), table...) }

// Reset-time patterns (package doc § Reset times).
var (
	codexAt = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i:try again at) (?:([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th), (\d{4}) )?(\d{1,2}:\d{2} [AP]M)`)
	})
	againInDur = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)\b`)
	})
	againInWords = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:try again|retry) (?:in|after) (\d+(?:\.\d+)?) ?(seconds?|secs?|minutes?|mins?|hours?)\b`)
	})
	resetsAt = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)resets?(?: at)? (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))`)
	})
)

// retryAt is the reset time text gives, zero when it gives none.
func retryAt(text string, now time.Time) time.Time {
	if m := codexAt().FindStringSubmatch(text); m != nil {
		clock, err := time.ParseInLocation("3:04 PM", m[4], now.Location())
		if err != nil {
			return time.Time{}
		}
		y, mo, d := now.Date()
		if m[1] != "" {
			day, err := time.ParseInLocation("Jan 2 2006", m[1]+" "+m[2]+" "+m[3], now.Location())
			if err != nil {
				return time.Time{}
			}
			y, mo, d = day.Date()
		}
		at := time.Date(y, mo, d, clock.Hour(), clock.Minute(), 0, 0, now.Location())
		if m[1] == "" && at.Before(now) {
			// A time of day alone that has passed today is tomorrow's:
			// a reset is never in the past.
			at = at.AddDate(0, 0, 1)
		}
		return at
	}
	if m := resetsAt().FindStringSubmatch(text); m != nil {
		if t, err := time.Parse(time.RFC3339, m[1]); err == nil {
			return t
		}
	}
	if m := againInDur().FindStringSubmatch(text); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil && d >= 0 {
			return now.Add(d)
		}
	}
	if m := againInWords().FindStringSubmatch(text); m != nil {
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return time.Time{}
		}
		unit := time.Second
		switch u := strings.ToLower(m[2]); {
		case strings.HasPrefix(u, "min"):
			unit = time.Minute
		case strings.HasPrefix(u, "hour"):
			unit = time.Hour
		}
		return now.Add(time.Duration(n * float64(unit)))
	}
	return time.Time{}
}
