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
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/testenv"
)

// retryConfig sets agents.allowed and agents.retry in dir's config.yaml.
func retryConfig(t *testing.T, dir string, allowed []string, retry string) {
	t.Helper()
	path := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, path)
	start := strings.Index(cfg, "  allowed:\n")
	end := strings.Index(cfg, "  providers:\n")
	if start < 0 || end < start {
		t.Fatalf("%s has no agents.allowed list", path)
	}
	list := "  allowed:\n"
	for _, a := range allowed {
		list += "  - " + a + "\n"
	}
	cfg = cfg[:start] + list + cfg[end:]
	rs := strings.Index(cfg, "  retry:\n")
	re := strings.Index(cfg[rs:], "\nworker:")
	if rs < 0 || re < 0 {
		t.Fatalf("%s has no agents.retry", path)
	}
	writeTestFile(t, path, cfg[:rs]+"  retry:\n"+retry+cfg[rs+re:])
}

// README § Transient failures (internal/retry): with the model server
// answering 529 (overloaded) to the planning step twice and then as
// usual, a run driven by the real Claude Code CLI — its own retries off,
// so each attempt is one request — ends done: the step's Task state is
// retried by its Retry, each time a new attempt of the same step, and
// summary.json's provider_attempts shows the three attempts, classified.
func TestRealClaude_AnOverloadedProviderIsRetriedUntilDone(t *testing.T) {
	bin := testenv.NodeBin(t, "claude", "@anthropic-ai/claude-code")
	script := readFile(t, filepath.Join(testenv.ModuleRoot(t), "examples", "modelserver.yaml"))
	planning := "  - match: \"You are the planning step\"\n    visits:\n"
	if !strings.Contains(script, planning) {
		t.Fatal("examples/modelserver.yaml has no planning rule")
	}
	overloaded := "      - turns:\n          - {error: 529, error_type: overloaded_error, error_message: Overloaded}\n"
	script = strings.Replace(script, planning, planning+overloaded+overloaded, 1)
	f := filepath.Join(t.TempDir(), "script.yaml")
	writeTestFile(t, f, script)
	s, err := modelserver.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&modelserver.Server{Script: s})
	defer srv.Close()

	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "claude"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	wrapper := filepath.Join(t.TempDir(), "claude")
	writeTestFile(t, wrapper, fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", bin))
	os.Chmod(wrapper, 0o755)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "      - engine\n      - claude\n", "      - engine\n      - claude\n      - --binary\n      - "+wrapper+"\n", 1))
	retryConfig(t, dir, []string{"claude"}, "    max_attempts: 2\n    base_delay_s: 1\n    max_delay_s: 1\n    max_blocked_s: 60\n")
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(testenv.ModuleRoot(t), "examples", "task.md")))
	pointAtModelServer(t, "claude", srv.URL)
	t.Setenv("CLAUDE_CODE_MAX_RETRIES", "0")

	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d, want 0 (done)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "retry planning#1") {
		t.Errorf("the progress lines do not say the planning step is retried:\n%s", r.stderr)
	}
	runs := runsOf(t, dir)
	var sum report.Summary
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/summary.json"))), &sum); err != nil {
		t.Fatal(err)
	}
	var planningAttempts []report.ProviderAttempt
	for _, a := range sum.ProviderAttempts {
		if a.StepRef == "planning#1" {
			planningAttempts = append(planningAttempts, a)
		}
	}
	if len(planningAttempts) != 3 {
		t.Fatalf("summary.json provider_attempts of planning#1: %+v; want 3", planningAttempts)
	}
	for i, a := range planningAttempts {
		want, class := "failed", "provider_unavailable"
		if i == 2 {
			want, class = "submitted", ""
		}
		if a.Attempt != i+1 || a.Provider != "claude" || a.Status != want || a.Class != class {
			t.Errorf("attempt %d: %+v; want %s on claude, class %q", i+1, a, want, class)
		}
	}
	st := runCLI(t, "status", runs[0].RunID, "--dir", dir, "--json")
	var res StatusResult
	if err := json.Unmarshal([]byte(st.stdout), &res); err != nil || len(res.Steps) == 0 || res.Steps[0].StepRef != "planning#1" || len(res.Steps[0].Attempts) != 3 {
		t.Errorf("status --json: %v\n%s", err, st.stdout)
	}
}

// rateLimitedEngine fails as Claude Code does on a 429 until the file
// $RECOVERED exists, then reports.
const rateLimitedEngine = `read line
if [ -f "$RECOVERED" ]; then printf '{"subrun_report": "ok"}\n'; exit 0; fi
echo 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}' >&2
exit 1
`

// README § Transient failures (internal/retry): when every provider a
// step may run on answers 429, the run parks — `status` reads waiting,
// saying when it tries again — and, once the providers recover, goes on
// and ends done by itself, without a command.
func TestRun_EveryProviderRateLimitedParksThenEndsDoneByItself(t *testing.T) {
	t.Parallel()
	recovered := filepath.Join(t.TempDir(), "recovered")
	dir, task := tinyRun(t, "", rateLimitedEngine, "{RECOVERED: "+recovered+"}", "t-park")
	usePrimaryShellEngineEnv(t, dir, "shy", "{RECOVERED: "+recovered+"}")
	// shy became the primary: make shx it again, shy its fallback.
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "primary: shy", "primary: shx", 1))
	retryConfig(t, dir, []string{"shx", "shy"}, "    max_attempts: 1\n    base_delay_s: 1\n    max_delay_s: 1\n    max_blocked_s: 600\n")

	done := make(chan result, 1)
	go func() { done <- runCLI(t, "run", task, "--dir", dir) }()
	var runID string
	eventually(t, 60*time.Second, "the run to park waiting", func() bool {
		r := runCLI(t, "runs", "--dir", dir, "--json")
		var runs []RunLine
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &runs) != nil || len(runs) == 0 {
			return false // the run's store is not there yet
		}
		runID = runs[0].RunID
		return runs[0].Status == "waiting"
	})
	st := runCLI(t, "status", runID, "--dir", dir)
	if !strings.Contains(st.stdout, "waiting") || !strings.Contains(st.stdout, "tries again at") || !strings.Contains(st.stdout, "parked") {
		t.Errorf("status of a parked run does not say it waits and when it tries again:\n%s", st.stdout)
	}
	var res StatusResult
	if err := json.Unmarshal([]byte(runCLI(t, "status", runID, "--dir", dir, "--json").stdout), &res); err != nil || res.Status != "waiting" {
		t.Errorf("status --json of a parked run: %v %+v", err, res.Status)
	}
	writeTestFile(t, recovered, "")
	var r result
	select {
	case r = <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("the parked run did not go on once the providers recovered")
	}
	if r.code != ExitOK {
		t.Fatalf("run: exit %d, want 0 (done)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "park  first#1") {
		t.Errorf("the progress lines do not show the park:\n%s", r.stderr)
	}
	var sum report.Summary
	json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/logs/t-park/summary.json"))), &sum)
	providers := map[string]bool{}
	for _, a := range sum.ProviderAttempts {
		if a.StepRef == "first#1" {
			providers[a.Provider] = true
			if a.Status == "failed" && a.Class != "rate_limited" {
				t.Errorf("attempt %+v: want class rate_limited", a)
			}
		}
	}
	if !providers["shx"] || !providers["shy"] {
		t.Errorf("first#1 ran on %v; want both providers (the fallback tried before the park)", providers)
	}
}
