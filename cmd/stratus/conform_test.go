package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// fourLineEngine is the smallest engine of
// docs/contracts.md § Conformance checklist, verbatim.
const fourLineEngine = `read line
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7}}\n'
printf '{"subrun_report": {"answer": 42}}\n'
`

var conformRow = regexp.MustCompile(`^(\S+)\s+(§.*?)\s{2,}(PASS|FAIL|SKIP)\s+(.*)$`)

// conformTable runs runEngineConform and returns check → status, the
// printed table, and the error.
func conformTable(t *testing.T, o EngineConformOptions) (map[string]string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	o.IO = IO{In: strings.NewReader(""), Out: &out, Err: &errb}
	err := runEngineConform(&o)
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := conformRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[3]
		}
	}
	t.Logf("%s %s\n%s", o.Command, strings.Join(o.Args, " "), out.String())
	return rows, out.String(), err
}

// wantRows checks the table has every check, each with want[check] or else
// PASS (failure-explained is always SKIP).
func wantRows(t *testing.T, rows map[string]string, table string, want map[string]string) {
	t.Helper()
	all := []string{"rejects-other-major", "tolerates-open-stdin", "stops-on-stdin-eof", "json-only-stdout", "one-report-last", "well-formed-usage", "failure-explained"}
	if len(rows) != len(all) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(all), table)
	}
	for _, c := range all {
		w, ok := want[c]
		if !ok {
			w = "PASS"
		}
		if c == "failure-explained" {
			w = "SKIP"
		}
		if rows[c] != w {
			t.Errorf("%s: %s, want %s\n%s", c, rows[c], w, table)
		}
	}
}

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case isUsage(err):
		return ExitUsage
	}
	return -1
}

// The bundled echo engine passes docs/contracts.md § Conformance checklist
// (exit 0).
func TestEngineConform_BundledEchoConforms(t *testing.T) {
	t.Parallel()
	rows, table, err := conformTable(t, EngineConformOptions{Command: stratusBin, Args: []string{"engine", "echo"}})
	if exitCode(err) != ExitOK {
		t.Fatalf("err %v\n%s", err, table)
	}
	wantRows(t, rows, table, nil)
	if !strings.Contains(table, `command_error "unsupported workflow_contract version 2"`) || !strings.Contains(table, "6 passed, 0 failed, 1 skipped") {
		t.Errorf("table:\n%s", table)
	}
}

// The bundled script engine with a one-answer scenario passes
// docs/contracts.md § Conformance checklist.
func TestEngineConform_BundledScriptConforms(t *testing.T) {
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, "default:\n  report: done\n  steps: 2\n")
	rows, table, err := conformTable(t, EngineConformOptions{Command: stratusBin, Args: []string{"engine", "script", "--scenario", scenario}})
	if exitCode(err) != ExitOK {
		t.Fatalf("err %v\n%s", err, table)
	}
	wantRows(t, rows, table, nil)
}

// docs/contracts.md § Conformance checklist's four-line shell engine never
// looks at workflow_contract, so it fails docs/contracts.md § Versioning and
// only that (exit 1).
func TestEngineConform_FourLineEngineFailsOtherMajor(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "engine.sh")
	writeTestFile(t, script, fourLineEngine)
	rows, table, err := conformTable(t, EngineConformOptions{Command: "sh", Args: []string{script}})
	if exitCode(err) != ExitFailed {
		t.Fatalf("exit %d (%v), want %d\n%s", exitCode(err), err, ExitFailed, table)
	}
	wantRows(t, rows, table, map[string]string{"rejects-other-major": "FAIL"})
	if !strings.Contains(table, "no command_error event, and a report on line 3") {
		t.Errorf("detail of rejects-other-major:\n%s", table)
	}
}

// --json prints every result and the verdict; flags and the command after
// -- go through cobra.
func TestEngineConform_JSON(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cmd := newEngineConformCmd(IO{In: strings.NewReader(""), Out: &out, Err: &out})
	cmd.SetArgs([]string{"--json", "--kind", "echo", "--input", `{"x":[1,2]}`, "--grace-ms", "3000", "--", stratusBin, "engine", "echo"})
	cmd.SetOut(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rep ConformReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !rep.Passed || len(rep.Results) != 7 || rep.Command[0] != stratusBin || rep.Results[0].Check != "rejects-other-major" || rep.Results[0].Status != "PASS" {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(rep.Results[2].Detail, "grace 3000 ms") {
		t.Errorf("stops-on-stdin-eof detail: %s", rep.Results[2].Detail)
	}
}

// Bad usage is exit 2: no command, an input that is not JSON, a command
// that does not exist, a negative grace.
func TestEngineConform_BadUsage(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-engine")
	for name, o := range map[string]EngineConformOptions{
		"no command":     {},
		"input not JSON": {Command: stratusBin, Args: []string{"engine", "echo"}, Input: "{nope"},
		"no such engine": {Command: missing},
		"negative grace": {Command: stratusBin, GraceMS: -1},
	} {
		o.IO = IO{In: strings.NewReader(""), Out: os.Stdout, Err: os.Stderr}
		if err := runEngineConform(&o); exitCode(err) != ExitUsage {
			t.Errorf("%s: %v (exit %d), want exit %d", name, err, exitCode(err), ExitUsage)
		}
	}
	for name, args := range map[string][]string{
		"no args":            nil,
		"nothing after --":   {"--"},
		"no --":              {stratusBin, "engine", "echo"},
		"an argument before": {"sh", "--", stratusBin, "engine", "echo"},
	} {
		cmd := newEngineConformCmd(IO{In: strings.NewReader(""), Out: os.Stdout, Err: os.Stderr})
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if exitCode(err) != ExitUsage {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
		if name == "no --" && (err == nil || !strings.Contains(err.Error(), "put the engine command after --")) {
			t.Errorf("no --: %v", err)
		}
	}
}

// The bundled script engine with the default input answers command_error:
// the checks that need a report say so instead of blaming open stdin.
func TestEngineConform_DefaultInputRefused(t *testing.T) {
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, "nodes:\n  planning:\n    - report: done\n")
	rows, table, err := conformTable(t, EngineConformOptions{Command: stratusBin, Args: []string{"engine", "script", "--scenario", scenario}})
	if exitCode(err) != ExitFailed {
		t.Fatalf("exit %d (%v)\n%s", exitCode(err), err, table)
	}
	wantRows(t, rows, table, map[string]string{"tolerates-open-stdin": "FAIL", "one-report-last": "FAIL"})
	if strings.Count(table, "the engine reported a failure instead of a report: command_error") != 2 || !strings.Contains(table, "pass --input the engine accepts") || strings.Contains(table, "stdin open") {
		t.Errorf("table:\n%s", table)
	}
}

// docs/child-contract.md § The smallest engine is the four-line engine
// the conform tests run, verbatim, so what the page says of it holds.
func TestChildContractDoc_SmallestEngineIsTheTestedOne(t *testing.T) {
	t.Parallel()
	doc := readFile(t, filepath.Join(testenv.ModuleRoot(t), "docs", "child-contract.md"))
	_, after, ok := strings.Cut(doc, "## The smallest engine\n")
	if !ok {
		t.Fatal("docs/child-contract.md has no § The smallest engine")
	}
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, _ = strings.Cut(block, "```\n")
	if block != fourLineEngine {
		t.Errorf("the page's engine:\n%s\nthe tested one:\n%s", block, fourLineEngine)
	}
	for _, check := range []string{"rejects-other-major", "tolerates-open-stdin", "stops-on-stdin-eof", "json-only-stdout", "one-report-last", "well-formed-usage", "failure-explained"} {
		if !strings.Contains(doc, "| `"+check+"` |") {
			t.Errorf("§ Checking an engine does not describe check %s", check)
		}
	}
}
