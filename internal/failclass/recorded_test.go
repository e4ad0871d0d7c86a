package failclass_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/engine"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/modelserver"
	"github.com/stratusflow/stratus/internal/runner"
	"github.com/stratusflow/stratus/internal/testenv"
)

// The recordings under testdata/recorded are what the runner saw when the
// real Claude Code and Codex CLIs (package.json pins them) met a provider
// that failed: the scripted model server answering an API error, a closed
// port, a host that does not resolve, a server that resets the
// connection. Each ran through the shim (`stratus engine claude|codex`:
// this test binary plays it) under the child contract (internal/contract)
// as the runner launches an engine, with the CLI's own retries set low so
// a recording takes seconds (CLAUDE_CODE_MAX_RETRIES; Codex's
// request_max_retries and stream_max_retries). `go test
// ./internal/failclass -run TestRecordings -record` records them again.

var record = flag.Bool("record", false, "re-record testdata/recorded from the real CLIs")

// shimEnv makes this test binary the engine: "claude" or "codex".
const (
	shimEnv    = "STRATUS_FAILCLASS_TEST_SHIM"
	shimCLIEnv = "STRATUS_FAILCLASS_TEST_CLI"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(shimEnv); name != "" {
		shim := engine.Claude
		if name == "codex" {
			shim = engine.Codex
		}
		if err := shim(context.Background(), engine.ShimOptions{Binary: os.Getenv(shimCLIEnv)}, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Recording is one file of testdata/recorded.
type Recording struct {
	// CLI and Scenario say what ran; Script is the model server's script
	// (none when there was no server to reach); Env the CLI's settings.
	CLI      string   `json:"cli"`
	Scenario string   `json:"scenario"`
	Script   string   `json:"script,omitempty"`
	Env      []string `json:"env"`
	// CLIStdout are the CLI's stdout lines about the failure (its init
	// and model-metadata lines left out), trimmed to the keys the shim
	// reads and the error's.
	CLIStdout []json.RawMessage `json:"cli_stdout"`
	// EngineStdout are the shim's lines (what the runner reads,
	// docs/contracts.md § The event stream); Stderr the engine's stderr (the
	// CLI's and the shim's).
	EngineStdout []json.RawMessage `json:"engine_stdout"`
	Stderr       string            `json:"stderr"`
	// Terminal, ExitCode and Reason are the runner's: the contract's
	// terminal and the reason it posts (runner.Reason).
	Terminal string `json:"terminal"`
	ExitCode *int   `json:"exit_code"`
	Reason   string `json:"reason"`
	// RecordedAt is when it ran (the base of a relative reset), in the
	// engine's time zone (TZ=UTC).
	RecordedAt time.Time `json:"recorded_at"`
	// ResetsAt is the reset the server said (Unix seconds), when it said
	// one the CLI prints.
	ResetsAt int64 `json:"resets_at,omitempty"`
}

// evidence is what the runner classifies a recording by.
func (r Recording) evidence() failclass.Evidence {
	return failclass.Evidence{Terminal: r.Terminal, ExitCode: r.ExitCode, Reason: r.Reason, Stderr: r.Stderr, Now: r.RecordedAt}
}

// scenario is one recording: what the provider does, and the class (and
// rule) it must get.
type scenario struct {
	file, cli, what string
	script          string // the model server's; "" when endpoint is set
	endpoint        string // "closed" | "dns" | "reset" | "tls": no model server answers
	retries         int
	deadlineMS      int
	resetsIn        time.Duration // the script's resets_at, from now (RESETS_AT in script)
	wantClass       string
	wantRule        string
	wantRetryAt     bool // RetryAt is the server's resets_at
}

func errorScript(turn string) string {
	return "rules:\n  - match: \"nil map write\"\n    visits:\n      - turns:\n          - " + strings.ReplaceAll(strings.TrimSpace(turn), "\n", "\n            ") + "\n"
}

func scenarios() []scenario {
	var (
		s529 = errorScript("error: 529\nerror_message: Overloaded")
		s500 = errorScript("error: 500\nerror_message: Internal server error")
		s503 = errorScript("error: 503\nerror_message: Service Unavailable")
		s401 = errorScript("error: 401\nerror_message: invalid x-api-key")
		s400 = errorScript("error: 400\nerror_message: \"model: unknown model scripted-xl\"")
		// A 429 with the headers Anthropic's API sends with one.
		s429a = errorScript(`error: 429
error_message: This request would exceed the rate limit for your organization of 50,000 input tokens per minute.
headers:
  retry-after: "1"
  anthropic-ratelimit-requests-reset: "2026-12-04T18:00:00Z"
  anthropic-ratelimit-input-tokens-reset: "2026-12-04T18:00:01Z"
  anthropic-ratelimit-tokens-reset: "2026-12-04T18:00:01Z"`)
		// A 429 with the headers OpenAI's API sends with one.
		s429o = errorScript(`error: 429
error_type: tokens
error_code: rate_limit_exceeded
error_message: "Rate limit reached for gpt-5-codex in organization org-scripted on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2.5s."
headers:
  retry-after: "1"
  x-ratelimit-limit-tokens: "30000"
  x-ratelimit-remaining-tokens: "0"
  x-ratelimit-reset-tokens: "2.5s"
  x-ratelimit-reset-requests: "120ms"`)
		sQuota  = errorScript("error: 429\nerror_type: insufficient_quota\nerror_code: insufficient_quota\nerror_message: You exceeded your current quota, please check your plan and billing details.")
		sUsage  = errorScript("error: 429\nerror_type: usage_limit_reached\nerror_message: The usage limit has been reached\nerror_fields:\n  plan_type: plus\n  resets_at: RESETS_AT")
		sCredit = errorScript("error: 400\nerror_message: Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
	)
	return []scenario{
		{file: "claude_529", cli: "claude", what: "the API answers 529 overloaded_error", script: s529, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "claude/api-529"},
		{file: "claude_500", cli: "claude", what: "the API answers 500 api_error", script: s500, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "claude/api-5xx"},
		{file: "claude_503", cli: "claude", what: "the API answers 503", script: s503, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "claude/api-5xx"},
		{file: "claude_429", cli: "claude", what: "the API answers 429 rate_limit_error with retry-after and anthropic-ratelimit-*-reset", script: s429a, retries: 1, wantClass: failclass.RateLimited, wantRule: "claude/api-429"},
		{file: "claude_credit", cli: "claude", what: "the API answers 400: the credit balance is too low", script: sCredit, retries: 1, wantClass: failclass.RateLimited, wantRule: "claude/credit-balance"},
		{file: "claude_401", cli: "claude", what: "the API answers 401 authentication_error", script: s401, retries: 1, wantClass: failclass.Infrastructure, wantRule: "claude/auth"},
		{file: "claude_400", cli: "claude", what: "the API answers 400 invalid_request_error", script: s400, retries: 1, wantClass: failclass.Infrastructure, wantRule: "claude/api-4xx"},
		{file: "claude_refused", cli: "claude", what: "nothing listens on the API's port", endpoint: "closed", retries: 1, wantClass: failclass.NetworkUnavailable, wantRule: "claude/econnrefused"},
		{file: "claude_dns", cli: "claude", what: "the API's host does not resolve", endpoint: "dns", retries: 1, wantClass: failclass.NetworkUnavailable, wantRule: "claude/enotfound"},
		{file: "claude_tls", cli: "claude", what: "the TLS handshake fails (https to a plain HTTP server)", endpoint: "tls", retries: 1, wantClass: failclass.NetworkUnavailable, wantRule: "claude/unable-to-connect"},
		{file: "claude_reset", cli: "claude", what: "the API's server resets the connection", endpoint: "reset", retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "claude/econnreset"},

		{file: "codex_529", cli: "codex", what: "the API answers 529", script: s529, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "codex/status-5xx"},
		{file: "codex_500", cli: "codex", what: "the API answers 500 server_error", script: s500, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "codex/high-demand"},
		{file: "codex_503", cli: "codex", what: "the API answers 503", script: s503, retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "codex/status-5xx"},
		{file: "codex_429", cli: "codex", what: "the API answers 429 rate_limit_exceeded with retry-after and x-ratelimit-reset-*", script: s429o, retries: 1, wantClass: failclass.RateLimited, wantRule: "codex/429-retries"},
		{file: "codex_quota", cli: "codex", what: "the API answers 429 insufficient_quota", script: sQuota, retries: 1, wantClass: failclass.RateLimited, wantRule: "codex/quota"},
		{file: "codex_usage_limit", cli: "codex", what: "the API answers 429 usage_limit_reached, resetting later today", script: sUsage, resetsIn: time.Minute, retries: 1, wantClass: failclass.RateLimited, wantRule: "codex/usage-limit", wantRetryAt: true},
		{file: "codex_usage_limit_days", cli: "codex", what: "the API answers 429 usage_limit_reached, resetting in three days", script: sUsage, resetsIn: 72 * time.Hour, retries: 1, wantClass: failclass.RateLimited, wantRule: "codex/usage-limit", wantRetryAt: true},
		{file: "codex_401", cli: "codex", what: "the API answers 401", script: s401, retries: 1, wantClass: failclass.Infrastructure, wantRule: "codex/status-4xx"},
		{file: "codex_400", cli: "codex", what: "the API answers 400 invalid_request_error", script: s400, retries: 1, wantClass: failclass.Infrastructure, wantRule: "any/api-4xx"},
		{file: "codex_reset", cli: "codex", what: "the API's server resets the connection", endpoint: "reset", retries: 1, wantClass: failclass.ProviderUnavailable, wantRule: "codex/stream-disconnected"},
		// Codex waits for an unreachable provider past any retry setting:
		// the attempt ends at its deadline.
		{file: "codex_refused", cli: "codex", what: "nothing listens on the API's port (codex waits; the deadline ends it)", endpoint: "closed", retries: 1, deadlineMS: 15000, wantClass: failclass.NetworkUnavailable, wantRule: "codex/waiting-for-network"},
		{file: "codex_dns", cli: "codex", what: "the API's host does not resolve (codex waits; the deadline ends it)", endpoint: "dns", retries: 1, deadlineMS: 15000, wantClass: failclass.NetworkUnavailable, wantRule: "codex/waiting-for-network"},
	}
}

// recordingPath is where sc's recording is.
func recordingPath(sc scenario) string {
	return filepath.Join("testdata", "recorded", sc.file+".json")
}

func loadRecording(t *testing.T, sc scenario) Recording {
	t.Helper()
	b, err := os.ReadFile(recordingPath(sc))
	if err != nil {
		t.Fatal(err)
	}
	var r Recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", recordingPath(sc), err)
	}
	return r
}

// checkVerdict checks v is what sc wants of recording r.
func checkVerdict(t *testing.T, sc scenario, r Recording, v failclass.Verdict) {
	t.Helper()
	if v.Class != sc.wantClass || v.Rule != sc.wantRule {
		t.Errorf("%s (%s): classified %s by %s, want %s by %s\nterminal %s, reason %q\nstderr %q", sc.file, sc.what, v.Class, v.Rule, sc.wantClass, sc.wantRule, r.Terminal, r.Reason, r.Stderr)
	}
	switch {
	case sc.wantRetryAt && r.ResetsAt == 0:
		t.Errorf("%s: the recording holds no resets_at to check RetryAt against", sc.file)
	case sc.wantRetryAt && !v.RetryAt.Equal(time.Unix(r.ResetsAt, 0).Truncate(time.Minute)):
		// The CLI prints the reset to the minute.
		t.Errorf("%s: RetryAt %v, want the server's reset %v (to the minute)", sc.file, v.RetryAt, time.Unix(r.ResetsAt, 0).UTC())
	case !sc.wantRetryAt && !v.RetryAt.IsZero():
		t.Errorf("%s: RetryAt %v; the CLI printed no reset", sc.file, v.RetryAt)
	}
}

// Each recording of a real CLI's failure is classified as the provider's
// error means (internal/failclass doc: the classes; the table's rows).
func TestClassify_Recordings(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios() {
		t.Run(sc.file, func(t *testing.T) {
			t.Parallel()
			r := loadRecording(t, sc)
			checkVerdict(t, sc, r, failclass.Classify(r.evidence()))
		})
	}
}

// Every recording under testdata/recorded is one of scenarios (none is
// left unchecked).
func TestClassify_EveryRecordingIsAScenario(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "recorded", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, sc := range scenarios() {
		known[recordingPath(sc)] = true
	}
	for _, f := range files {
		if !known[f] {
			t.Errorf("%s is no scenario of recorded_test.go: nothing checks it", f)
		}
	}
	if len(files) != len(known) {
		t.Errorf("%d recordings, %d scenarios: record the missing ones with -record", len(files), len(known))
	}
}

// The real CLIs, run again, still fail in words the table classifies as
// recorded (a CLI upgrade that rewords an error fails here); with -record
// the runs are written to testdata/recorded.
func TestRecordings_TheRealCLIsStillClassifyTheSame(t *testing.T) {
	bins := map[string]string{
		"claude": testenv.NodeBin(t, "claude", "@anthropic-ai/claude-code"),
		"codex":  testenv.NodeBin(t, "codex", "@openai/codex"),
	}
	for _, sc := range scenarios() {
		t.Run(sc.file, func(t *testing.T) {
			t.Parallel()
			r := runScenario(t, sc, bins[sc.cli])
			if *record {
				b, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(recordingPath(sc), append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			checkVerdict(t, sc, r, failclass.Classify(r.evidence()))
		})
	}
}

// runScenario runs sc's CLI through the shim under the child contract and
// returns what the runner saw.
func runScenario(t *testing.T, sc scenario, bin string) Recording {
	t.Helper()
	rec := Recording{CLI: cliVersion(sc.cli), Scenario: sc.what, RecordedAt: time.Now().UTC().Truncate(time.Second)}
	var url string
	switch sc.endpoint {
	case "":
		script := sc.script
		if sc.resetsIn > 0 {
			rec.ResetsAt = time.Now().Add(sc.resetsIn).Unix()
			script = strings.ReplaceAll(script, "RESETS_AT", fmt.Sprint(rec.ResetsAt))
		}
		rec.Script = script
		url = scriptedServer(t, script)
	case "closed":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url = "http://" + l.Addr().String()
		l.Close()
	case "dns":
		url = "http://no-such-host.invalid"
	case "tls":
		url = strings.Replace(scriptedServer(t, errorScript("error: 500")), "http://", "https://", 1)
	case "reset":
		url = resetServer(t)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nvar m map[string]int\n\nfunc Set() { m[\"x\"] = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, shown := cliEnv(t, sc, url)
	rec.Env = shown
	cliOut := filepath.Join(t.TempDir(), "cli-stdout")
	env[shimEnv], env[shimCLIEnv], env["TZ"] = sc.cli, teeWrapper(t, bin, cliOut), "UTC"
	var stderr lockedBuffer
	deadline := sc.deadlineMS
	if deadline == 0 {
		deadline = 120_000
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The engine's stdout lines, as the runner reads them, are recorded
	// by a wrapper around this test binary.
	engineOut := filepath.Join(t.TempDir(), "engine-stdout")
	res, err := contract.NewRunner().Run(context.Background(), contract.LaunchSpec{
		Command: "/bin/bash", Args: []string{"-c", `exec "$0" > >(tee "$1")`, self, engineOut},
		Env: env, Dir: dir, Stderr: &stderr, DeadlineMS: deadline,
	}, contract.Request{Kind: "agent", Input: json.RawMessage(`{"query":"Find the nil map write in a.go"}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Terminal, rec.ExitCode, rec.Reason = string(res.Terminal), res.Attempt.ExitCode, runner.Reason(res, deadline)
	rec.Stderr = scrub(stderr.String(), url, dir)
	rec.EngineStdout = jsonLines(t, readFile(engineOut), url, dir, nil)
	rec.CLIStdout = jsonLines(t, readFile(cliOut), url, dir, trimCLILine)
	rec.Reason = scrub(rec.Reason, url, dir)
	t.Logf("%s: %s %q\nstderr: %s", sc.file, rec.Terminal, rec.Reason, rec.Stderr)
	return rec
}

// cliEnv points sc's CLI at url with its retries set low; shown is what a
// recording says of it.
func cliEnv(t *testing.T, sc scenario, url string) (env map[string]string, shown []string) {
	t.Helper()
	home := t.TempDir()
	if sc.cli == "claude" {
		return map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-scripted", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				"CLAUDE_CONFIG_DIR": home, "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": fmt.Sprint(sc.retries)},
			[]string{fmt.Sprintf("CLAUDE_CODE_MAX_RETRIES=%d", sc.retries)}
	}
	provider := fmt.Sprintf("request_max_retries = %d\nstream_max_retries = %d\n", sc.retries, sc.retries)
	cfg := fmt.Sprintf("model = \"gpt-5-codex\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n%s", url+"/v1", provider)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"CODEX_HOME": home, "SCRIPTED_API_KEY": "scripted"},
		[]string{"config.toml [model_providers.scripted] " + strings.ReplaceAll(strings.TrimSpace(provider), "\n", ", ")}
}

// cliVersion names the pinned CLI.
func cliVersion(cli string) string {
	if cli == "claude" {
		return "claude 2.1.328 (@anthropic-ai/claude-code)"
	}
	return "codex 0.169.0 (@openai/codex)"
}

// teeWrapper is a script that runs bin with its stdout copied to out.
func teeWrapper(t *testing.T, bin, out string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cli")
	script := fmt.Sprintf("#!/bin/bash\nexec %q \"$@\" > >(tee %q)\n", bin, out)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func scriptedServer(t *testing.T, script string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := modelserver.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&modelserver.Server{Script: s})
	t.Cleanup(srv.Close)
	return srv.URL
}

// resetServer accepts connections and resets each (RST) once it has read
// from it.
func resetServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				c.Read(make([]byte, 512))
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// tempPath is a directory of a test's.
var tempPath = regexp.MustCompile(`/tmp/[^"'\s)]*`)

// scrub replaces what changes from run to run: the server's URL, the work
// dir and temp paths.
func scrub(s, url, dir string) string {
	if url != "" {
		s = strings.ReplaceAll(s, strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://"), "127.0.0.1:PORT")
	}
	s = strings.ReplaceAll(s, dir, "/work/repo")
	return tempPath.ReplaceAllString(s, "/tmp/…")
}

// jsonLines are b's lines, scrubbed, each passed through trim (nil keeps
// it; trim returns "" to drop a line).
func jsonLines(t *testing.T, b []byte, url, dir string, trim func(map[string]any) map[string]any) []json.RawMessage {
	t.Helper()
	out := []json.RawMessage{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		if trim != nil {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			if m = trim(m); m == nil {
				continue
			}
			nb, _ := json.Marshal(m)
			l = string(nb)
		}
		if l = scrub(l, url, dir); json.Valid([]byte(l)) {
			out = append(out, json.RawMessage(l))
		}
	}
	return out
}

// trimCLILine keeps a CLI line about the failure with the keys that say
// it: Claude Code's api_retry, synthetic error message and result; Codex's
// error and turn.failed events.
func trimCLILine(m map[string]any) map[string]any {
	keep := func(keys ...string) map[string]any {
		out := map[string]any{}
		for _, k := range keys {
			if v, ok := m[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	switch m["type"] {
	case "system":
		if m["subtype"] == "api_retry" {
			return keep("type", "subtype", "attempt", "max_retries", "retry_delay_ms", "error_status", "error")
		}
	case "assistant":
		out := keep("type", "error", "is_api_error_message", "api_error_status", "api_error_type")
		if msg, ok := m["message"].(map[string]any); ok {
			out["message"] = map[string]any{"model": msg["model"], "content": msg["content"]}
		}
		return out
	case "result":
		return keep("type", "subtype", "is_error", "result", "errors", "api_error_status", "api_error_type", "terminal_reason")
	case "error", "turn.failed":
		return m
	}
	return nil
}

func readFile(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
