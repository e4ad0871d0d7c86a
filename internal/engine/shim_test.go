package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fake CLIs replay recordings from testdata/shim — what the real CLIs
// printed (recording_test.go makes and checks them: Claude Code's
// stream-json, codex exec --json) — and record what they were given: argv
// one per line, stdin, and the file passed to --output-schema.

type shimFunc func(context.Context, ShimOptions, io.Reader, io.Writer) error

type fakeCLI struct {
	recording string // file under testdata/shim (or an absolute path) replayed on stdout
	lines     int    // replay only the first lines (0 = all): the CLI still at work
	stderr    string // written to stderr before ending
	end       string // the script's last command: "exit 0", "exit 1", "exec sleep 30"
}

// writeFake makes dir/name the fake CLI (testdata/fakecli.sh, linked) set
// to replay f, and returns its path.
func writeFake(t *testing.T, dir, name string, f fakeCLI) string {
	t.Helper()
	rec := f.recording
	if !filepath.IsAbs(rec) {
		var err error
		if rec, err = filepath.Abs(filepath.Join("testdata", "shim", f.recording)); err != nil {
			t.Fatal(err)
		}
	}
	script, err := filepath.Abs(filepath.Join("testdata", "fakecli.sh"))
	if err != nil {
		t.Fatal(err)
	}
	lines := ""
	if f.lines > 0 {
		lines = fmt.Sprint(f.lines)
	}
	for file, body := range map[string]string{name + ".recording": rec, name + ".lines": lines, name + ".stderr": f.stderr, name + ".end": f.end + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, name)
	if err := os.Symlink(script, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// syncBuffer is the shim's stdout, read by the test while the shim writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testSchema = `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`

var testInput = map[string]any{
	"query": "Find the nil map write", "system": "You are a careful Go reviewer.", "hints": "look in a.go",
	"task_id": "t-1", "attempt": 1, "node": "review", "step_ref": "review#1", "visit": 1, "ctx_dir": "/tmp/ctx",
}

const wantPrompt = "You are a careful Go reviewer.\n\nFind the nil map write\n\nHints:\nlook in a.go\n\nFiles produced by earlier steps are in: /tmp/ctx\n"

// request is a v1 envelope; maxSteps 0 and schema "" leave those fields out.
func request(t *testing.T, maxSteps int, schema string) string {
	t.Helper()
	env := map[string]any{"workflow_contract": 1, "id": "cr-7", "kind": "review", "input": testInput}
	if maxSteps > 0 {
		env["max_steps"] = maxSteps
	}
	if schema != "" {
		env["schema"] = json.RawMessage(schema)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// start runs the shim with the request on a stdin that stays open, as the
// runner's does (docs/contracts.md § Process lifecycle). closeStdin is the
// graceful cancel; wait returns the shim's stdout once it has ended.
func start(t *testing.T, shim shimFunc, opts ShimOptions, req string) (out *syncBuffer, closeStdin func(), wait func() string) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go pw.Write([]byte(req + "\n"))
	out = &syncBuffer{}
	done := make(chan error, 1)
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	go func() { done <- shim(context.Background(), opts, pr, out) }()
	wait = func() string {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("shim returned %v; every handled failure must return nil (docs/contracts.md § The reference engine)", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("shim did not end; output so far:\n%s", out.String())
		}
		return out.String()
	}
	return out, func() { pw.Close() }, wait
}

func runShimOnce(t *testing.T, shim shimFunc, opts ShimOptions, req string) string {
	t.Helper()
	_, _, wait := start(t, shim, opts, req)
	return wait()
}

// assertEvents parses every stdout line and compares it with want (JSON
// lines), then checks the contract's invariants: usage carries all five
// fields, integral (docs/contracts.md § The event stream); a report is the
// single last line and never follows a failure event (docs/contracts.md
// § The report line, § Conformance checklist).
func assertEvents(t *testing.T, out string, want ...string) {
	t.Helper()
	var got []any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("stdout line %q is not JSON (docs/contracts.md § The event stream): %v", l, err)
		}
		got = append(got, v)
	}
	var wantV []any
	for _, w := range want {
		var v any
		if err := json.Unmarshal([]byte(w), &v); err != nil {
			t.Fatalf("bad want %q: %v", w, err)
		}
		wantV = append(wantV, v)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Fatalf("events:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	failed := false
	for i, ev := range got {
		m := ev.(map[string]any)
		if _, ok := m["subrun_report"]; ok {
			if i != len(got)-1 || failed {
				t.Errorf("report at line %d of %d after failure=%v", i+1, len(got), failed)
			}
		}
		switch m["event"] {
		case "turn_failed", "agent_setup_failed", "command_error", "agent_aborted", "max_steps_exhausted":
			failed = true
		case "usage":
			u := m["usage"].(map[string]any)
			for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"} {
				f, ok := u[k].(float64)
				if !ok || f != math.Trunc(f) || f < 0 {
					t.Errorf("usage.%s = %v: want a non-negative integral number", k, u[k])
				}
			}
			if u["total_tokens"] != u["prompt_tokens"].(float64)+u["completion_tokens"].(float64) ||
				u["prompt_tokens"] != u["prompt_cache_hit_tokens"].(float64)+u["prompt_cache_miss_tokens"].(float64) {
				t.Errorf("usage does not add up: %v", u)
			}
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// docs/contracts.md § Conformance checklist (1, 3, 4, 6) and § The reference
// engine: the shim
// reads the envelope, runs the CLI with its JSON output mode, the prompt on
// stdin (never argv), the turn limit and the schema, and answers with
// agent_step per step, one usage (cost only where the CLI reports one), then
// exactly one report, last — the schema-shaped result as JSON.
func TestShims_Seed003S9_SuccessStepsUsageThenOneReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		shim     shimFunc
		rec      string
		wantArgv func(schemaFile string) []string
		want     []string
	}{
		{
			name: "claude", shim: Claude, rec: "claude_success.jsonl",
			wantArgv: func(string) []string {
				return []string{"-p", "--output-format", "stream-json", "--verbose", "--max-turns", "3", "--json-schema", testSchema, "--model", "sonnet"}
			},
			want: []string{
				`{"event":"agent_step","step":1}`,
				`{"event":"agent_step","step":2}`,
				`{"event":"usage","usage":{"prompt_tokens":2448,"completion_tokens":42,"total_tokens":2490,"prompt_cache_hit_tokens":1200,"prompt_cache_miss_tokens":1248,"cost_usd":0.006072}}`,
				`{"subrun_report":{"answer":"nil map write in a.go:3"}}`,
			},
		},
		{
			name: "codex", shim: Codex, rec: "codex_success.jsonl",
			wantArgv: func(schemaFile string) []string {
				return []string{"exec", "--json", "--skip-git-repo-check", "--output-schema", schemaFile, "--model", "sonnet", "-"}
			},
			want: []string{ // codex reports no cost: no cost_usd
				`{"event":"agent_step","step":1}`,
				`{"event":"agent_step","step":2}`,
				`{"event":"usage","usage":{"prompt_tokens":2448,"completion_tokens":42,"total_tokens":2490,"prompt_cache_hit_tokens":1200,"prompt_cache_miss_tokens":1248}}`,
				`{"subrun_report":{"answer":"nil map write in a.go:3"}}`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := writeFake(t, dir, tc.name, fakeCLI{recording: tc.rec, end: "exit 0"})
			out := runShimOnce(t, tc.shim, ShimOptions{Binary: bin, ExtraArgs: []string{"--model", "sonnet"}}, request(t, 3, testSchema))
			assertEvents(t, out, tc.want...)

			argv := readLines(t, filepath.Join(dir, "argv"))
			schemaFile := ""
			if tc.name == "codex" && len(argv) > 4 {
				schemaFile = argv[4]
			}
			if want := tc.wantArgv(schemaFile); !reflect.DeepEqual(argv, want) {
				t.Errorf("argv = %q, want %q", argv, want)
			}
			stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
			if string(stdin) != wantPrompt {
				t.Errorf("CLI stdin = %q, want %q", stdin, wantPrompt)
			}
			if strings.Contains(strings.Join(argv, "\n"), "nil map write") {
				t.Errorf("the prompt leaked into argv (visible in ps): %q", argv)
			}
			if tc.name == "codex" {
				if got, _ := os.ReadFile(filepath.Join(dir, "schema.json")); string(got) != testSchema {
					t.Errorf("--output-schema file held %q, want %q", got, testSchema)
				}
				if _, err := os.Stat(schemaFile); !os.IsNotExist(err) {
					t.Errorf("schema file %s left behind: %v", schemaFile, err)
				}
			}
		})
	}
}

// Without a schema the report is the final message text, verbatim (a JSON
// string), even when that text happens to be JSON.
func TestShims_Seed003S4_ReportIsTextWithoutSchema(t *testing.T) {
	t.Parallel()
	for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := writeFake(t, dir, name, fakeCLI{recording: name + "_text.jsonl", end: "exit 0"})
			out := runShimOnce(t, shim, ShimOptions{Binary: bin}, request(t, 0, ""))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if last := lines[len(lines)-1]; last != `{"subrun_report":"{\"answer\":\"nil map write in a.go:3\"}"}` {
				t.Errorf("report = %s", last)
			}
			for _, a := range readLines(t, filepath.Join(dir, "argv")) {
				if a == "--max-turns" || a == "--json-schema" || a == "--output-schema" {
					t.Errorf("argv carries %s though the envelope had no max_steps/schema", a)
				}
			}
		})
	}
}

// docs/contracts.md § Conformance checklist and § The reference engine: a
// failing CLI is explained by turn_failed with the CLI's own error, then a
// normal exit — never a report.
func TestShims_Seed003S9_5_FailureIsTurnFailedWithoutReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cli string
		shim      shimFunc
		fake      fakeCLI
		want      []string
	}{
		{
			name: "claude is_error result", cli: "claude", shim: Claude,
			fake: fakeCLI{recording: "claude_failure.jsonl", end: "exit 1"},
			want: []string{ // the message the CLI made up to show the error is no step
				`{"event":"usage","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":0,"cost_usd":0}}`,
				`{"event":"turn_failed","error":"claude: API Error: 400 scripted error"}`,
			},
		},
		{
			name: "claude exits nonzero without JSON", cli: "claude", shim: Claude,
			fake: fakeCLI{recording: "empty.jsonl", stderr: "error: unknown option --json-schema", end: "exit 1"},
			want: []string{`{"event":"turn_failed","error":"claude exited without a result: exit status 1: error: unknown option --json-schema"}`},
		},
		{
			name: "codex turn.failed", cli: "codex", shim: Codex,
			fake: fakeCLI{recording: "codex_failure.jsonl", end: "exit 1"},
			want: []string{`{"event":"turn_failed","error":"codex turn failed: scripted error (invalid_request_error)"}`},
		},
		{
			name: "codex exits zero without a turn", cli: "codex", shim: Codex,
			fake: fakeCLI{recording: "empty.jsonl", stderr: "Not inside a trusted directory and --skip-git-repo-check was not specified.", end: "exit 0"},
			want: []string{`{"event":"turn_failed","error":"codex exited without a result: Not inside a trusted directory and --skip-git-repo-check was not specified."}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := writeFake(t, t.TempDir(), tc.cli, tc.fake)
			out := runShimOnce(t, tc.shim, ShimOptions{Binary: bin}, request(t, 3, testSchema))
			assertEvents(t, out, tc.want...)
		})
	}
}

// docs/contracts.md § The reference engine and § Conformance checklist: the
// shims take max_steps from the envelope, pass it as the CLI's turn limit
// where it has one (claude --max-turns; codex exec has none) and enforce it
// themselves: past the ceiling the CLI is stopped (the fakes would otherwise
// sleep 30 s), usage seen so far is charged, max_steps_exhausted is emitted
// and there is no report.
func TestShims_Seed003S7_1_MaxStepsEnforcedByTheShim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cli string
		shim      shimFunc
		fake      fakeCLI
		maxSteps  int
		want      []string
	}{
		{
			name: "claude streams past the ceiling", cli: "claude", shim: Claude, maxSteps: 3,
			fake: fakeCLI{recording: "claude_many_steps.jsonl", end: "exec sleep 30"},
			want: []string{
				`{"event":"agent_step","step":1}`,
				`{"event":"agent_step","step":2}`,
				`{"event":"agent_step","step":3}`,
				`{"event":"usage","usage":{"prompt_tokens":440,"completion_tokens":4,"total_tokens":444,"prompt_cache_hit_tokens":400,"prompt_cache_miss_tokens":40}}`,
				`{"event":"max_steps_exhausted","steps":3}`,
			},
		},
		{
			name: "claude stops at its own --max-turns", cli: "claude", shim: Claude, maxSteps: 2,
			fake: fakeCLI{recording: "claude_max_turns.jsonl", end: "exit 1"},
			want: []string{
				`{"event":"agent_step","step":1}`,
				`{"event":"agent_step","step":2}`,
				`{"event":"usage","usage":{"prompt_tokens":220,"completion_tokens":10,"total_tokens":230,"prompt_cache_hit_tokens":200,"prompt_cache_miss_tokens":20,"cost_usd":0.00032}}`,
				`{"event":"max_steps_exhausted","steps":2}`,
			},
		},
		{
			name: "codex streams past the ceiling", cli: "codex", shim: Codex, maxSteps: 3,
			fake: fakeCLI{recording: "codex_many_steps.jsonl", end: "exec sleep 30"},
			want: []string{ // codex reports usage only on turn.completed, which never came
				`{"event":"agent_step","step":1}`,
				`{"event":"agent_step","step":2}`,
				`{"event":"agent_step","step":3}`,
				`{"event":"max_steps_exhausted","steps":3}`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := writeFake(t, dir, tc.cli, tc.fake)
			began := time.Now()
			out := runShimOnce(t, tc.shim, ShimOptions{Binary: bin}, request(t, tc.maxSteps, ""))
			if d := time.Since(began); d > 10*time.Second {
				t.Errorf("took %v: the CLI was not stopped", d)
			}
			assertEvents(t, out, tc.want...)
			argv := strings.Join(readLines(t, filepath.Join(dir, "argv")), " ")
			if wantFlag := fmt.Sprintf("--max-turns %d", tc.maxSteps); (tc.cli == "claude") != strings.Contains(argv, wantFlag) {
				t.Errorf("argv %q: claude must get %q, codex has no turn-limit flag", argv, wantFlag)
			}
		})
	}
}

// docs/contracts.md § Conformance checklist and § The reference engine: stdin
// EOF is the graceful cancel: the shim stops the CLI, flushes the usage it
// has, and exits without a report or failure event.
func TestShims_Seed003S9_2_StdinEOFStopsTheCLIWithoutReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cli   string
		shim  shimFunc
		lines int // the recording up to the fifth step's result
		want  []string
	}{
		{"claude", Claude, 11, []string{
			`{"event":"agent_step","step":1}`, `{"event":"agent_step","step":2}`, `{"event":"agent_step","step":3}`,
			`{"event":"agent_step","step":4}`, `{"event":"agent_step","step":5}`,
			`{"event":"usage","usage":{"prompt_tokens":550,"completion_tokens":5,"total_tokens":555,"prompt_cache_hit_tokens":500,"prompt_cache_miss_tokens":50}}`,
		}},
		{"codex", Codex, 13, []string{
			`{"event":"agent_step","step":1}`, `{"event":"agent_step","step":2}`, `{"event":"agent_step","step":3}`,
			`{"event":"agent_step","step":4}`, `{"event":"agent_step","step":5}`,
		}},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			t.Parallel()
			bin := writeFake(t, t.TempDir(), tc.cli, fakeCLI{recording: tc.cli + "_many_steps.jsonl", lines: tc.lines, end: "exec sleep 30"})
			out, closeStdin, wait := start(t, tc.shim, ShimOptions{Binary: bin}, request(t, 0, ""))
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), `"step":5`) {
				if time.Now().After(deadline) {
					t.Fatalf("no fifth step; output:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			began := time.Now()
			closeStdin()
			got := wait()
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("took %v after stdin EOF: beyond the runner's cancel grace", d)
			}
			assertEvents(t, got, tc.want...)
		})
	}
}

// docs/contracts.md § Conformance checklist and § Versioning: another major
// is a command_error, no report, and the CLI never runs; so is an input
// without a query.
func TestShims_Seed003S9_1_RefusedRequestsAreCommandErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, req, want string }{
		{"major 2", `{"workflow_contract":2,"id":"cr-1","kind":"review","input":{"query":"q"}}`, `{"event":"command_error","error":"unsupported workflow_contract version 2; valid: 1"}`},
		{"no query", `{"workflow_contract":1,"id":"cr-1","kind":"review","input":{"task":"q"}}`, `{"event":"command_error","error":"input.query: got nothing; want a non-blank string"}`},
		{"query not a string", `{"workflow_contract":1,"id":"cr-1","kind":"review","input":{"query":7}}`, `{"event":"command_error","error":"input.query: got 7; want a string"}`},
		{"max_steps zero", `{"workflow_contract":1,"id":"cr-1","kind":"review","max_steps":0,"input":{"query":"q"}}`, `{"event":"command_error","error":"max_steps: got 0; want a positive integer, or no max_steps for no ceiling"}`},
		{"input null", `{"workflow_contract":1,"id":"cr-1","kind":"review","input":null}`, `{"event":"command_error","error":"input: got null; want an object with a non-blank \"query\" string (or the query itself as a string)"}`},
		{"schema not an object", `{"workflow_contract":1,"id":"cr-1","kind":"review","schema":"notaschema","input":{"query":"q"}}`, `{"event":"command_error","error":"schema: got \"notaschema\"; want a JSON Schema object, or no schema"}`},
		{"envelope without workflow_contract", `{"id":"cr-1","kind":"review","input":{"query":"q"}}`, `{"event":"command_error","error":"input.query: got nothing; want a non-blank string (a request line without \"workflow_contract\" is taken as the input itself; send {\"workflow_contract\": 1, \"id\": …, \"kind\": …, \"input\": {\"query\": …}} for an envelope)"}`},
	} {
		for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				bin := writeFake(t, dir, name, fakeCLI{recording: name + "_success.jsonl", end: "exit 0"})
				assertEvents(t, runShimOnce(t, shim, ShimOptions{Binary: bin}, tc.req), tc.want)
				if _, err := os.Stat(filepath.Join(dir, "argv")); !os.IsNotExist(err) {
					t.Errorf("the CLI ran for a refused request")
				}
			})
		}
	}
}

// docs/contracts.md § The reference engine: a CLI missing from PATH is
// agent_setup_failed with a clear error; the default binary names are looked
// up on PATH.
func TestShims_Seed003S7_4_CLIFromPATHOrAgentSetupFailed(t *testing.T) {
	fakes := t.TempDir()
	writeFake(t, fakes, "claude", fakeCLI{recording: "claude_success.jsonl", end: "exit 0"})
	writeFake(t, fakes, "codex", fakeCLI{recording: "codex_success.jsonl", end: "exit 0"})
	t.Setenv("PATH", fakes+string(os.PathListSeparator)+os.Getenv("PATH"))
	for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
		out := runShimOnce(t, shim, ShimOptions{}, request(t, 3, testSchema))
		if !strings.HasSuffix(strings.TrimSpace(out), `{"subrun_report":{"answer":"nil map write in a.go:3"}}`) {
			t.Errorf("%s from PATH: %s", name, out)
		}
	}

	t.Setenv("PATH", t.TempDir())
	for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
		assertEvents(t, runShimOnce(t, shim, ShimOptions{}, request(t, 3, "")),
			fmt.Sprintf(`{"event":"agent_setup_failed","error":"%s CLI not found: exec: \"%s\": executable file not found in $PATH (install it, put it on PATH, or give its path)"}`, name, name))
	}
	// A binary that is there but cannot be run is said to be so, not "not found".
	plain := filepath.Join(t.TempDir(), "cli")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
		out := runShimOnce(t, shim, ShimOptions{Binary: plain}, request(t, 3, ""))
		if !strings.Contains(out, `"agent_setup_failed"`) || !strings.Contains(out, "cannot be run") || strings.Contains(out, "not found") {
			t.Errorf("%s with a non-executable binary: %s", name, out)
		}
	}
}

// docs/contracts.md § Per-node overrides: the attempt's resolved model,
// reasoning, permission profile and network grant arrive in the engine's
// environment, and each shim maps them onto its CLI's flags, before the
// deployment flags and (codex) the "-" prompt argument.
func TestShims_Seed004_OverridesMappedToCLIFlags(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	base := map[string][]string{"claude": {"-p", "--output-format", "stream-json", "--verbose"}, "codex": {"exec", "--json", "--skip-git-repo-check"}}
	for _, tc := range []struct {
		name   string
		shim   string
		getenv func(string) string
		want   []string // after the base args, before EXTRA (and codex's "-")
	}{
		{"claude/NothingSet_NoFlags", "claude", env(), nil},
		{"claude/ReadOnlyOffline", "claude", env("STRATUS_MODEL", "claude-opus-5", "STRATUS_REASONING", "xhigh", "STRATUS_PERMISSION_PROFILE", "read-only", "STRATUS_NETWORK_ACCESS", "false"),
			[]string{"--model", "claude-opus-5", "--effort", "xhigh", "--permission-mode", "plan", "--disallowedTools", "WebFetch WebSearch"}},
		{"claude/WorkspaceWriteOnline", "claude", env("STRATUS_PERMISSION_PROFILE", "workspace-write", "STRATUS_NETWORK_ACCESS", "true"),
			[]string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash WebFetch WebSearch"}},
		{"claude/WorkspaceWriteOffline", "claude", env("STRATUS_PERMISSION_PROFILE", "workspace-write", "STRATUS_NETWORK_ACCESS", "false"),
			[]string{"--permission-mode", "acceptEdits", "--disallowedTools", "WebFetch WebSearch", "--allowedTools", "Bash"}},
		{"codex/NothingSet_NoFlags", "codex", env(), nil},
		{"codex/ReadOnly_MaxClampsToXhigh_NoNetworkSwitch", "codex", env("STRATUS_MODEL", "gpt-6-codex", "STRATUS_REASONING", "max", "STRATUS_PERMISSION_PROFILE", "read-only", "STRATUS_NETWORK_ACCESS", "true"),
			[]string{"-m", "gpt-6-codex", "-c", `model_reasoning_effort="xhigh"`, "--sandbox", "read-only"}},
		{"codex/WorkspaceWriteOffline", "codex", env("STRATUS_REASONING", "low", "STRATUS_PERMISSION_PROFILE", "workspace-write", "STRATUS_NETWORK_ACCESS", "false"),
			[]string{"-c", `model_reasoning_effort="low"`, "--sandbox", "workspace-write", "-c", "sandbox_workspace_write.network_access=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			shim := map[string]shimFunc{"claude": Claude, "codex": Codex}[tc.shim]
			dir := t.TempDir()
			bin := writeFake(t, dir, tc.shim, fakeCLI{recording: tc.shim + "_success.jsonl", end: "exit 0"})
			runShimOnce(t, shim, ShimOptions{Binary: bin, ExtraArgs: []string{"--extra"}, Getenv: tc.getenv}, request(t, 0, ""))
			want := append(append(append([]string{}, base[tc.shim]...), tc.want...), "--extra")
			if tc.shim == "codex" {
				want = append(want, "-")
			}
			if got := readLines(t, filepath.Join(dir, "argv")); !reflect.DeepEqual(got, want) {
				t.Errorf("argv = %q, want %q", got, want)
			}
		})
	}
}

// A setting outside its set never reaches argv: the shim refuses the
// attempt with agent_setup_failed naming the variable
// (docs/contracts.md § The reference engine).
func TestShims_Seed004_BadSettingIsSetupFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value string }{
		{"STRATUS_PERMISSION_PROFILE", "danger-full-access"},
		{"STRATUS_NETWORK_ACCESS", "yes"},
		{"STRATUS_MODEL", "--dangerously-skip-permissions"},
		{"STRATUS_REASONING", `high" sandbox_mode="danger-full-access`},
	} {
		for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
			t.Run(name+"/"+tc.key, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				bin := writeFake(t, dir, name, fakeCLI{recording: name + "_success.jsonl", end: "exit 0"})
				getenv := func(k string) string {
					if k == tc.key {
						return tc.value
					}
					return ""
				}
				out := runShimOnce(t, shim, ShimOptions{Binary: bin, Getenv: getenv}, request(t, 0, ""))
				if !strings.Contains(out, `"event":"agent_setup_failed"`) || !strings.Contains(out, tc.key) {
					t.Errorf("out = %s, want agent_setup_failed naming %s", out, tc.key)
				}
				if _, err := os.Stat(filepath.Join(dir, "argv")); !os.IsNotExist(err) {
					t.Errorf("the CLI ran despite %s=%q", tc.key, tc.value)
				}
			})
		}
	}
}

// docs/contracts.md § The event stream: a line on the CLI's stdout that is
// not JSON (a tool that leaked to the CLI's stdout) is skipped; the lines
// around it still count.
func TestShims_Seed003S3_NonJSONLinesAreSkipped(t *testing.T) {
	t.Parallel()
	for name, shim := range map[string]shimFunc{"claude": Claude, "codex": Codex} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			real := readLines(t, filepath.Join("testdata", "shim", name+"_text.jsonl"))
			leaky := append(append(append([]string{}, real[:3]...), "not json: a leaky tool wrote this line", "{"), real[3:]...)
			rec := filepath.Join(t.TempDir(), "leaky.jsonl")
			if err := os.WriteFile(rec, []byte(strings.Join(leaky, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := writeFake(t, t.TempDir(), name, fakeCLI{recording: rec, end: "exit 0"})
			out := runShimOnce(t, shim, ShimOptions{Binary: bin}, request(t, 0, ""))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if last := lines[len(lines)-1]; last != `{"subrun_report":"{\"answer\":\"nil map write in a.go:3\"}"}` || !strings.Contains(out, `"step":2`) {
				t.Errorf("out:\n%s\nwant two steps and the report despite the non-JSON lines", out)
			}
		})
	}
}

// A Codex error event is written to the engine's stderr too: codex 0.169
// reports a provider it cannot reach only with these, and waits for it
// until the runner's deadline stops the attempt
// (docs/contracts.md § Process lifecycle); the runner's stderr tail is then
// the evidence that the network, not the work, ran out the clock
// (internal/failclass doc, rule 3).
func TestShims_CodexErrorEventsReachStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := filepath.Join(dir, "waiting.jsonl")
	lines := `{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}
`
	if err := os.WriteFile(rec, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := writeFake(t, dir, "codex", fakeCLI{recording: rec, end: "exec sleep 30"})
	var stderr syncBuffer
	_, closeStdin, wait := start(t, Codex, ShimOptions{Binary: bin, Stderr: &stderr}, request(t, 0, ""))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "waiting for network") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	closeStdin() // the runner's deadline
	got := wait()
	if want := "\ncodex: Reconnecting... waiting for network (Connection failed: error sending request)\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q; want the error event's line %q", stderr.String(), want)
	}
	if strings.Contains(got, "subrun_report") {
		t.Errorf("a report after stdin EOF: %s", got)
	}
}
