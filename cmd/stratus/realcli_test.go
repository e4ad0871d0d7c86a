package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/modelserver"
	"github.com/stratusflow/stratus/internal/testenv"
)

// The built-in implementation flow runs end to end with each
// real CLI (Claude Code, Codex) against the scripted model server of
// examples/modelserver.yaml — the script `make demo-claude` and `make
// demo-codex` use — and ends done: the CLI's own tool calls write the file,
// review sends the change back once, the summary carries the tokens (and
// Claude's cost; Codex's is said to be not accounted), and a node's
// overrides reach the flags the CLI was started with.
func TestRealCLIs_ImplementationFlowEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		cli, pkg  string
		wantFlags []string // in the implementation step's argv
		cost      string   // in summary.md's Run cost
	}{
		{"claude", "@anthropic-ai/claude-code", []string{"--model scripted-large", "--effort high", "--permission-mode acceptEdits", "--allowedTools Bash", "--disallowedTools WebFetch WebSearch"}, "$0.09 over 7 provider calls"},
		{"codex", "@openai/codex", []string{"-m scripted-large", `-c model_reasoning_effort="high"`, "--sandbox workspace-write", "-c sandbox_workspace_write.network_access=false", "--skip-git-repo-check"}, "Codex cost not accounted"},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			bin := testenv.NodeBin(t, tc.cli, tc.pkg)
			s, err := modelserver.Load(filepath.Join(testenv.ModuleRoot(t), "examples", "modelserver.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(&modelserver.Server{Script: s})
			defer srv.Close()

			dir := t.TempDir()
			if r := runCLI(t, "install", "--dir", dir, "--primary", tc.cli); r.code != 0 {
				t.Fatal(r.stderr)
			}
			// The CLI runs through a wrapper that records its argv.
			spy := t.TempDir()
			wrapper := filepath.Join(spy, tc.cli)
			writeTestFile(t, wrapper, fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %q/argv-$$\nexec %q \"$@\"\n", spy, bin))
			os.Chmod(wrapper, 0o755)
			cfgPath := filepath.Join(dir, ".stratus/config.yaml")
			cfg := strings.Replace(readFile(t, cfgPath), "      - engine\n      - "+tc.cli+"\n", "      - engine\n      - "+tc.cli+"\n      - --binary\n      - "+wrapper+"\n", 1)
			if cfg == readFile(t, cfgPath) {
				t.Fatalf("config.yaml has no %s provider to point at the wrapper:\n%s", tc.cli, cfg)
			}
			writeTestFile(t, cfgPath, cfg)
			// Per-node overrides on implementation.
			flowPath := filepath.Join(dir, ".stratus/flows/implementation.yaml")
			flow := strings.Replace(readFile(t, flowPath), "      role_file: implementation/implementation.md\n", "      role_file: implementation/implementation.md\n      model: scripted-large\n      reasoning: high\n", 1)
			writeTestFile(t, flowPath, flow)
			task := filepath.Join(dir, "task.md")
			writeTestFile(t, task, readFile(t, filepath.Join(testenv.ModuleRoot(t), "examples", "task.md")))

			pointAtModelServer(t, tc.cli, srv.URL)
			r := runCLI(t, "run", task, "--dir", dir)
			if r.code != ExitOK || join(steps(r.stderr)) != exampleSteps {
				t.Fatalf("run with the real %s: exit %d, steps %s; want %s\n%s", tc.cli, r.code, join(steps(r.stderr)), exampleSteps, r.stderr)
			}
			if got := readFile(t, filepath.Join(dir, "cmd/hello/main.go")); !strings.Contains(got, `"flag --name: empty value"`) {
				t.Errorf("cmd/hello/main.go after the run is not the fixer's:\n%s", got)
			}
			md := readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/summary.md"))
			if !strings.Contains(md, "14.6 k input tokens, 1820 output tokens") || !strings.Contains(md, tc.cost) {
				t.Errorf("summary.md's Run cost does not carry the tokens and %q:\n%s", tc.cost, md)
			}
			// The implementation step's argv (the only one with the model override).
			argvs, _ := filepath.Glob(filepath.Join(spy, "argv-*"))
			found := false
			for _, f := range argvs {
				argv := strings.Join(strings.Split(strings.TrimSpace(readFile(t, f)), "\n"), " ")
				if !strings.Contains(argv, "scripted-large") {
					continue
				}
				found = true
				for _, w := range tc.wantFlags {
					if !strings.Contains(argv, w) {
						t.Errorf("the implementation step's %s argv lacks %q:\n%s", tc.cli, w, argv)
					}
				}
			}
			if !found {
				t.Errorf("no %s invocation carried the implementation node's model override (%d recorded)", tc.cli, len(argvs))
			}
		})
	}
}

// The conformance kit
// (docs/contracts.md § Conformance checklist) passes on both shims wrapping
// the real CLIs, answered by the scripted model server.
func TestRealCLIs_ConformanceKitPassesOnTheShims(t *testing.T) {
	for _, tc := range []struct{ cli, pkg string }{{"claude", "@anthropic-ai/claude-code"}, {"codex", "@openai/codex"}} {
		t.Run(tc.cli, func(t *testing.T) {
			bin := testenv.NodeBin(t, tc.cli, tc.pkg)
			srv := httptest.NewServer(&modelserver.Server{Script: &modelserver.Script{Default: "a conformance answer"}})
			defer srv.Close()
			pointAtModelServer(t, tc.cli, srv.URL)
			// A real CLI (node, its native binary, a model round trip) on a
			// loaded machine may take more than the kit's 10 s default for
			// a normal run: the checks are of its behaviour, not its speed.
			r := runCLI(t, "engine", "conform", "--json", "--timeout-ms", "60000", "--", stratusBin, "engine", tc.cli, "--binary", bin)
			var out struct {
				Passed  bool `json:"passed"`
				Results []struct{ Check, Status, Detail string }
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || !out.Passed {
				t.Fatalf("conform on the %s shim: exit %d, %v\n%s%s", tc.cli, r.code, err, r.stdout, r.stderr)
			}
			passed := 0
			for _, c := range out.Results {
				switch c.Status {
				case "PASS", "pass":
					passed++
				case "SKIP", "skip":
				default:
					t.Errorf("%s: %s %s: %s", tc.cli, c.Check, c.Status, c.Detail)
				}
			}
			if passed < 6 {
				t.Errorf("%s: %d checks passed, want the 6 the kit can run on any engine:\n%s", tc.cli, passed, r.stdout)
			}
		})
	}
}

// pointAtModelServer sets this process's environment (which the runners
// and engines inherit) so that cli talks to the scripted model server at
// url: Claude Code through ANTHROPIC_BASE_URL, Codex through a model
// provider in a CODEX_HOME of its own.
func pointAtModelServer(t *testing.T, cli, url string) {
	t.Helper()
	if cli == "claude" {
		t.Setenv("ANTHROPIC_BASE_URL", url)
		t.Setenv("ANTHROPIC_API_KEY", "sk-scripted")
		t.Setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
		t.Setenv("CLAUDE_CONFIG_DIR", t.TempDir())
		return
	}
	home := t.TempDir()
	writeTestFile(t, filepath.Join(home, "config.toml"), fmt.Sprintf("model = \"gpt-5-codex\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n", url+"/v1"))
	t.Setenv("CODEX_HOME", home)
	t.Setenv("OPENAI_API_KEY", "scripted")
}

// internal/failclass, end to end: a step whose real CLI meets a failing
// provider fails with the class its failure means, carried by the runner
// to the worker API and the store, and `stratus status` shows it — a 529
// under Claude Code is provider_unavailable; Codex's usage limit is
// rate_limited, with the reset it printed. The run fails as before.
func TestRealCLIs_AFailedStepShowsItsFailureClass(t *testing.T) {
	resets := time.Now().Add(72 * time.Hour).Truncate(time.Minute)
	for _, tc := range []struct {
		cli, pkg, turn, class string
		retryAt               time.Time
	}{
		{"claude", "@anthropic-ai/claude-code", "{error: 529, error_message: Overloaded}", "provider_unavailable", time.Time{}},
		{"codex", "@openai/codex", fmt.Sprintf("{error: 429, error_type: usage_limit_reached, error_fields: {plan_type: plus, resets_at: %d}}", resets.Unix()), "rate_limited", resets},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			bin := testenv.NodeBin(t, tc.cli, tc.pkg)
			f := filepath.Join(t.TempDir(), "script.yaml")
			writeTestFile(t, f, "rules:\n  - match: \"You are the planning step\"\n    visits:\n      - turns:\n          - "+tc.turn+"\n")
			s, err := modelserver.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(&modelserver.Server{Script: s})
			defer srv.Close()
			dir := t.TempDir()
			if r := runCLI(t, "install", "--dir", dir, "--primary", tc.cli); r.code != 0 {
				t.Fatal(r.stderr)
			}
			// A wrapper: the run freezes the files its launch spec names,
			// and the npm CLI must run where npm put it.
			wrapper := filepath.Join(t.TempDir(), tc.cli)
			writeTestFile(t, wrapper, fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", bin))
			os.Chmod(wrapper, 0o755)
			cfgPath := filepath.Join(dir, ".stratus/config.yaml")
			writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "      - engine\n      - "+tc.cli+"\n", "      - engine\n      - "+tc.cli+"\n      - --binary\n      - "+wrapper+"\n", 1))
			task := filepath.Join(dir, "task.md")
			writeTestFile(t, task, readFile(t, filepath.Join(testenv.ModuleRoot(t), "examples", "task.md")))
			pointAtModelServer(t, tc.cli, srv.URL)
			// The CLIs' own retries off: the failure comes at once.
			t.Setenv("CLAUDE_CODE_MAX_RETRIES", "0")
			if home := os.Getenv("CODEX_HOME"); tc.cli == "codex" {
				cfg := filepath.Join(home, "config.toml")
				writeTestFile(t, cfg, readFile(t, cfg)+"request_max_retries = 0\nstream_max_retries = 0\n")
			}
			// Stratus's retries off too (README § Transient failures): no
			// retry, no fallback, no park; the step's one attempt is
			// classified and the run asks for a human.
			retryConfig(t, dir, []string{tc.cli}, "    max_attempts: 0\n    base_delay_s: 1.0\n    max_delay_s: 1.0\n    max_blocked_s: 0.0\n")
			if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitManual {
				t.Fatalf("run: exit %d, want %d (manual_action_required)\n%s%s", r.code, ExitManual, r.stdout, r.stderr)
			}
			runs := runsOf(t, dir)
			if len(runs) != 1 {
				t.Fatalf("runs %+v", runs)
			}
			r := runCLI(t, "status", runs[0].RunID, "--dir", dir, "--json")
			var res StatusResult
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Steps) == 0 {
				t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
			}
			s0 := res.Steps[0]
			if s0.StepRef != "planning#1" || s0.Class != tc.class || !s0.RetryAt.Equal(tc.retryAt) || len(s0.Attempts) != 1 || s0.Attempts[0].Provider != tc.cli {
				t.Errorf("status of %s: class %q retry_at %v attempts %+v; want %s, %v, one attempt on %s", s0.StepRef, s0.Class, s0.RetryAt, s0.Attempts, tc.class, tc.retryAt, tc.cli)
			}
			if r := runCLI(t, "status", runs[0].RunID, "--dir", dir); !strings.Contains(r.stdout, "class="+tc.class) {
				t.Errorf("status does not show class=%s:\n%s", tc.class, r.stdout)
			} else {
				t.Log(r.stdout)
			}
		})
	}
}
