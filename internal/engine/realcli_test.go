package engine

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

// The real Claude Code and Codex CLIs (package.json pins them) run through
// the shims against the scripted model server on 127.0.0.1: no key, no
// network.

// realCLI is one real CLI and how it is pointed at a model server.
type realCLI struct {
	name string
	shim shimFunc
	bin  string
	// env points the CLI at the server (base URL, a dummy key, telemetry
	// off); home is its config dir.
	env func(t *testing.T, url string) map[string]string
	// cost: the CLI reports a cost (Claude Code does; Codex does not).
	cost bool
}

func realCLIs(t *testing.T) []realCLI {
	t.Helper()
	return []realCLI{
		{name: "claude", shim: Claude, bin: testenv.NodeBin(t, "claude", "@anthropic-ai/claude-code"), cost: true,
			env: func(t *testing.T, url string) map[string]string {
				return map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-scripted", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
					"CLAUDE_CONFIG_DIR": t.TempDir(), "DISABLE_AUTOUPDATER": "1"}
			}},
		{name: "codex", shim: Codex, bin: testenv.NodeBin(t, "codex", "@openai/codex"),
			env: func(t *testing.T, url string) map[string]string {
				home := t.TempDir()
				cfg := fmt.Sprintf("model = \"gpt-5-codex\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n", url+"/v1")
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
					t.Fatal(err)
				}
				return map[string]string{"CODEX_HOME": home, "SCRIPTED_API_KEY": "scripted"}
			}},
	}
}

// scriptedServer starts a model server answering script.
func scriptedServer(t *testing.T, script string) (*modelserver.Server, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := modelserver.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	ms := &modelserver.Server{Script: s}
	srv := httptest.NewServer(ms)
	t.Cleanup(srv.Close)
	return ms, srv.URL
}

// realRequest is a v1 envelope asking query, with max_steps when > 0.
func realRequest(t *testing.T, query string, maxSteps int) string {
	t.Helper()
	env := map[string]any{"workflow_contract": 1, "id": "cr-real", "kind": "agent", "input": map[string]any{"query": query, "node": "implementation", "step_ref": "implementation#1"}}
	if maxSteps > 0 {
		env["max_steps"] = maxSteps
	}
	b, _ := json.Marshal(env)
	return string(b)
}

// events parses the shim's stdout lines.
func events(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", l, err)
		}
		evs = append(evs, m)
	}
	return evs
}

// runReal runs cli's shim on req in a fresh work dir (its cwd) with the
// server's env, and returns the events and the dir.
func runReal(t *testing.T, cli realCLI, url, req string, opts ShimOptions) ([]map[string]any, string) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	for k, v := range cli.env(t, url) {
		t.Setenv(k, v)
	}
	opts.Binary = cli.bin
	var stderr syncBuffer
	opts.Stderr = &stderr
	out := runShimOnce(t, cli.shim, opts, req)
	assertInvariants(t, out)
	t.Logf("%s stderr:\n%s", cli.name, stderr.String())
	return events(t, out), dir
}

// assertInvariants checks the line rules of docs/contracts.md § The event
// stream on a real run's output.
func assertInvariants(t *testing.T, out string) {
	t.Helper()
	evs := events(t, out)
	var want []string
	for _, e := range evs {
		b, _ := json.Marshal(e)
		want = append(want, string(b))
	}
	assertEvents(t, out, want...) // same lines: only the invariants are checked
}

func count(evs []map[string]any, event string) int {
	n := 0
	for _, e := range evs {
		if e["event"] == event {
			n++
		}
	}
	return n
}

func last(evs []map[string]any) map[string]any { return evs[len(evs)-1] }

// docs/contracts.md § The event stream, § The report line, § Conformance checklist:
// a real CLI's answer is one report, after agent_step per model turn and a
// usage line with all five token fields (and the cost the CLI reports: Claude
// Code does, Codex does not).
func TestRealCLIs_ReportUsageAndSteps(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			_, url := scriptedServer(t, `rules:
  - match: "say hi"
    visits:
      - turns:
          - text: "hi there"
            input_tokens: 1200
            output_tokens: 34
            cached_tokens: 200
`)
			evs, _ := runReal(t, cli, url, realRequest(t, "please say hi", 0), ShimOptions{})
			if r := last(evs)["subrun_report"]; r != "hi there" {
				t.Fatalf("report %v, want \"hi there\"; events %v", r, evs)
			}
			if n := count(evs, "agent_step"); n != 1 {
				t.Errorf("%d agent_step events for one model turn, want 1", n)
			}
			var usage map[string]any
			for _, e := range evs {
				if e["event"] == "usage" {
					usage = e["usage"].(map[string]any)
				}
			}
			if usage == nil || usage["prompt_tokens"] != float64(1200) || usage["completion_tokens"] != float64(34) || usage["prompt_cache_hit_tokens"] != float64(200) {
				t.Errorf("usage %v, want prompt 1200 (200 of them cached) and completion 34 as the server said", usage)
			}
			if _, has := usage["cost_usd"]; has != cli.cost {
				t.Errorf("usage %v: cost_usd present %v, want %v", usage, has, cli.cost)
			}
		})
	}
}

// A tool call the model makes really runs, in the node's work dir (the
// engine's cwd), with the permission the workspace-write profile grants; its
// turn and the next are two agent steps.
func TestRealCLIs_ToolCallRunsInTheWorkDir(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			ms, url := scriptedServer(t, `rules:
  - match: "write hello"
    visits:
      - turns:
          - shell: |
              mkdir -p sub && cat > sub/hello.txt <<'TXT'
              hello from the model
              TXT
          - text: "wrote hello.txt"
`)
			evs, dir := runReal(t, cli, url, realRequest(t, "please write hello", 0),
				ShimOptions{Getenv: settingsEnv(map[string]string{"STRATUS_PERMISSION_PROFILE": "workspace-write", "STRATUS_NETWORK_ACCESS": "false"})})
			if r := last(evs)["subrun_report"]; r != "wrote hello.txt" {
				t.Fatalf("report %v; events %v", r, evs)
			}
			b, err := os.ReadFile(filepath.Join(dir, "sub", "hello.txt"))
			if err != nil || string(b) != "hello from the model\n" {
				t.Errorf("hello.txt in the work dir: %q, %v; want the model's command to have run there", b, err)
			}
			if n := count(evs, "agent_step"); n != 2 {
				t.Errorf("%d agent_step events for two model turns, want 2", n)
			}
			if reqs := ms.Requests(); len(reqs) < 2 || reqs[len(reqs)-1].Turn != 1 {
				t.Errorf("the server saw %d requests; want the tool result sent back as turn 1", len(reqs))
			}
		})
	}
}

// docs/contracts.md § Conformance checklist: a model error is a failure
// event, never a report.
func TestRealCLIs_ModelErrorIsAFailure(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			_, url := scriptedServer(t, `rules:
  - match: "fail please"
    visits:
      - turns:
          - error: 400
`)
			evs, _ := runReal(t, cli, url, realRequest(t, "fail please", 0), ShimOptions{})
			if _, ok := last(evs)["subrun_report"]; ok {
				t.Fatalf("a model error produced a report: %v", evs)
			}
			if count(evs, "turn_failed")+count(evs, "agent_setup_failed") == 0 {
				t.Errorf("no failure event for a model error: %v", evs)
			}
		})
	}
}

// docs/contracts.md § The reference engine: max_steps from the envelope is
// enforced on the real CLI: a model that keeps calling tools is stopped at
// the ceiling.
func TestRealCLIs_MaxStepsEnforced(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			_, url := scriptedServer(t, `rules:
  - match: "loop forever"
    visits:
      - turns:
          - shell: "true"
`)
			evs, _ := runReal(t, cli, url, realRequest(t, "loop forever", 2),
				ShimOptions{Getenv: settingsEnv(map[string]string{"STRATUS_PERMISSION_PROFILE": "workspace-write"})})
			if _, ok := last(evs)["subrun_report"]; ok || count(evs, "max_steps_exhausted") != 1 {
				t.Fatalf("events %v; want max_steps_exhausted and no report", evs)
			}
			if n := count(evs, "agent_step"); n > 2 {
				t.Errorf("%d agent steps past max_steps 2", n)
			}
		})
	}
}

// docs/contracts.md § Conformance checklist: stdin EOF stops the real CLI
// within the grace, with no report.
func TestRealCLIs_StdinEOFStopsTheCLI(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			_, url := scriptedServer(t, `rules:
  - match: "take your time"
    visits:
      - turns:
          - shell: "sleep 60"
`)
			t.Chdir(t.TempDir())
			for k, v := range cli.env(t, url) {
				t.Setenv(k, v)
			}
			out, closeStdin, wait := start(t, cli.shim, ShimOptions{Binary: cli.bin, Stderr: &syncBuffer{},
				Getenv: settingsEnv(map[string]string{"STRATUS_PERMISSION_PROFILE": "workspace-write"})}, realRequest(t, "take your time", 0))
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "agent_step") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond) // the tool call is running
			stopped := time.Now()
			closeStdin()
			got := wait()
			if took := time.Since(stopped); took > 5*time.Second {
				t.Errorf("the CLI took %v to stop after stdin EOF; the grace is 5 s", took)
			}
			if strings.Contains(got, "subrun_report") {
				t.Errorf("a report after stdin EOF:\n%s", got)
			}
		})
	}
}

// settingsEnv is a Getenv for ShimOptions: the attempt's settings.
func settingsEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// docs/contracts.md § The request line: with the envelope's schema (an
// evaluator's findings), each real CLI is told the shape — Claude Code
// through --json-schema and its StructuredOutput tool, Codex through
// --output-schema — and the report is the JSON object, not text.
func TestRealCLIs_SchemaReportIsTheObject(t *testing.T) {
	for _, cli := range realCLIs(t) {
		t.Run(cli.name, func(t *testing.T) {
			ms, url := scriptedServer(t, `rules:
  - match: "review this"
    visits:
      - turns:
          - text: '{"findings": [{"severity": "high", "what": "empty name accepted"}]}'
`)
			env := map[string]any{"workflow_contract": 1, "id": "cr-schema", "kind": "evaluator",
				"input":  map[string]any{"query": "please review this", "node": "review"},
				"schema": json.RawMessage(`{"type":"object","required":["findings"],"properties":{"findings":{"type":"array"}}}`)}
			req, _ := json.Marshal(env)
			evs, _ := runReal(t, cli, url, string(req), ShimOptions{})
			rep, ok := last(evs)["subrun_report"].(map[string]any)
			if !ok {
				t.Fatalf("report %v, want the findings object; events %v", last(evs)["subrun_report"], evs)
			}
			if f, _ := rep["findings"].([]any); len(f) != 1 {
				t.Errorf("report %v, want one finding", rep)
			}
			// The schema reached the CLI: Claude Code offers the model its
			// StructuredOutput tool (--json-schema), Codex a json_schema
			// text format (--output-schema).
			offered := false
			for _, r := range ms.Requests() {
				b := string(r.Body)
				offered = offered || (cli.name == "claude" && strings.Contains(b, `"name":"StructuredOutput"`)) || (cli.name == "codex" && strings.Contains(b, `"json_schema"`))
			}
			if !offered {
				t.Errorf("the model was not asked for the schema's shape: the envelope's schema did not reach the %s CLI", cli.name)
			}
		})
	}
}
