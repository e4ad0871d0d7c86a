package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/testenv"
)

// Every flow worc ships reads unchanged: its only fatal problems here are the
// tools this directory has not installed, each saying so; without a
// config.yaml the config-aware layer is skipped, and the output says so once.
func TestValidate_PeerFlowsReadUnchanged(t *testing.T) {
	t.Parallel()
	flows := testenv.Peers(t, "worc", "flows")
	tools := t.TempDir()
	r := runCLI(t, "validate", "--all", "--flows", flows, "--dir", t.TempDir(), "--tools", tools)
	if r.code != ExitFailed {
		t.Errorf("exit %d, want %d (tools not installed)", r.code, ExitFailed)
	}
	if n := strings.Count(r.stdout, "note: no "); n != 1 || !strings.Contains(r.stdout, "the config-aware layer") {
		t.Errorf("want one note that the config-aware layer is skipped:\n%s", r.stdout)
	}
	var notInstalled []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(line, "error: ") {
			continue
		}
		if !strings.Contains(line, " is not installed: no executable at "+tools) {
			t.Errorf("unexpected fatal problem: %s", line)
			continue
		}
		notInstalled = append(notInstalled, line[strings.Index(line, `tool "`):strings.Index(line, " is not")])
	}
	want := []string{`tool "check_length"`, `tool "check_length"`, `tool "check_journey"`, `tool "check_chapter"`, `tool "check_chapter"`}
	if strings.Join(notInstalled, ",") != strings.Join(want, ",") {
		t.Errorf("tool errors %q, want %q", notInstalled, want)
	}
	if !strings.Contains(r.stdout, `warning: `+filepath.Join(flows, "implementation.yaml")+`:52:7: node "refinement" role_file "implementation/refinement.md" does not exist`) {
		t.Errorf("the missing refinement.md should be a warning:\n%s", r.stdout)
	}
	for _, name := range []string{"implementation", "merge", "blog_article", "blog_article_revise", "content_chapter", "content_translate", "content_book"} {
		if !strings.Contains(r.stdout, "flow "+name+": ") {
			t.Errorf("flow %s not reported:\n%s", name, r.stdout)
		}
	}
}

// validate lists every problem of every layer, not only the first, sorted
// by position, and exits 1 when any is fatal.
func TestValidate_AllListsEveryErrorAndExitsOne(t *testing.T) { // docs/contracts.md § Fatal validation
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/broken.yaml"), `flow:
  name: broken
  task_type: broken
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  supervisor: { observe: { mode: all } }
  nodes:
    - { id: brief, kind: agent, role_file: broken/write.md }
    - { id: write, kind: agent, role_file: broken/write.md, provider: codex, network_access: true, extra_args: ["--yolo"] }
    - { id: gate, kind: tool, tool: check_length }
    - { id: done, kind: publish, policy: local_artifact }
  edges:
    - { from: brief, to: write }
    - { from: write, to: gate }
    - { from: gate, to: done, outcome: pass }
    - { from: gate, to: write, outcome: fail }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/broken/write.md"), "Write it.\nThen read {plna_path}.\n")
	r := runCLI(t, "validate", "--all", "--dir", dir)
	if r.code != ExitFailed {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, ExitFailed, r.stdout, r.stderr)
	}
	flowFile := filepath.Join(dir, ".stratus/flows/broken.yaml")
	want := []string{
		"error: " + flowFile + `:7:28: supervisor.observe.mode "all" widens config.yaml's supervisor.observe.mode "events"`,
		"error: " + flowFile + `:10:78: node "write" runs on Codex (provider codex, pinned) as workspace-write with network (network_access: true)`,
		"error: " + flowFile + `:10:100: node "write" extra_args[0] "--yolo" turns off or selects the approval policy`,
		"error: " + flowFile + `:11:31: node "gate": tool "check_length" is not installed: no executable at ` + filepath.Join(dir, ".stratus/tools/check_length") + " (install it there, chmod +x)",
		"error: " + flowFile + `:17:32: edge gate -> write on fail is unbounded`,
		"warning: " + filepath.Join(dir, ".stratus/flows/broken/write.md") + `:2:11: {plna_path}`,
		"flow broken: ",
		"flow implementation: ok",
		"flow merge: ok",
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var got []string
	for _, l := range lines {
		if strings.HasPrefix(l, "warning: ") && strings.Contains(l, "is not supported by this build") {
			continue // kinds this build cannot run yet
		}
		if strings.Contains(l, " "+filepath.Join(dir, ".stratus/config.yaml")+": provider codex ") {
			continue // doctor's checks of codex on this machine (TestValidate_ReportsProvidersTheFlowUses)
		}
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("want %d lines, got:\n%s", len(want), r.stdout)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("line %d:\n got %s\nwant %s...", i, got[i], w)
		}
	}

	// --json: the same problems, structured.
	r = runCLI(t, "validate", "broken", "--dir", dir, "--json")
	var rep ValidateReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	onThisMachine := 0 // codex's CLI and key, when this machine lacks them
	for _, p := range rep.Flows[0].Problems {
		if p.Fatal && strings.HasPrefix(p.Path, "agents.providers.codex") {
			onThisMachine++
		}
	}
	if r.code != ExitFailed || rep.Fatal != 5+onThisMachine || len(rep.Flows) != 1 || rep.Flows[0].Fatal != 5+onThisMachine ||
		rep.Warnings != 1 || rep.Flows[0].Warnings != 1 ||
		rep.Config != filepath.Join(dir, ".stratus/config.yaml") || len(rep.Notes) != 0 {
		t.Errorf("exit %d, report %+v", r.code, rep)
	}

	// Installing the tool clears its error, and only that one.
	writeTestFile(t, filepath.Join(dir, ".stratus/tools/check_length"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(dir, ".stratus/tools/check_length"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "validate", "broken", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, fmt.Sprintf("flow broken: %d errors, 1 warning", 4+onThisMachine)) || strings.Contains(r.stdout, "not installed") {
		t.Errorf("after installing the tool: exit %d\n%s", r.code, r.stdout)
	}
}

// The built-in flows validate cleanly once installed.
func TestValidate_InstalledBuiltinsAreClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runCLI(t, "validate", "--all", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "flow implementation: ok") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Breaking an edge is fatal and named with its position.
	p := filepath.Join(dir, ".stratus/flows/implementation.yaml")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), "{ from: fixing, to: review }", "{ from: fixing, to: nosuch }", 1)), 0o644)
	r = runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, "nosuch") || !strings.Contains(r.stdout, "implementation.yaml:") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
}

// worc configuration.md § agents.retry: `stratus validate` reports a bad
// agents.retry as config.Load does, naming the key, the value and what is
// valid; a max_stage_attempts above the providers a step can run on is
// valid, and the note says what it means.
func TestValidate_RetrySettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	orig := readFile(t, cfgPath)
	writeTestFile(t, cfgPath, strings.Replace(orig, "    max_delay_s: 30.0\n", "    max_delay_s: 1.5\n", 1))
	r := runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, "error: "+cfgPath+":") || !strings.Contains(r.stdout, "agents.retry.max_delay_s: 1.5 is less than agents.retry.base_delay_s 2; valid: a cap of 2 seconds or more") {
		t.Errorf("max_delay_s < base_delay_s: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeTestFile(t, cfgPath, strings.Replace(orig, "  max_stage_attempts: 3\n", "  max_stage_attempts: 7\n", 1))
	r = runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "note: agents.max_stage_attempts 7 is more than the 4 provider(s) a step on the primary can run on (echo, openseek, claude, codex:") {
		t.Errorf("max_stage_attempts 7: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A budget of 0 is refused by validate, naming the field, the value and
// what is valid; the summary line counts errors and warnings.
func TestValidate_ZeroBudgetIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	path := filepath.Join(dir, ".stratus/flows/implementation.yaml")
	writeTestFile(t, path, strings.Replace(readFile(t, path), "review_fix: 3", "review_fix: 0", 1))
	r := runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, "error: "+path+":") ||
		!strings.Contains(r.stdout, "budgets.review_fix is 0; valid: an iteration cap of at least 1") ||
		!strings.Contains(r.stdout, "flow implementation: 1 error, 0 warnings") || strings.Contains(r.stdout, "ok (") {
		t.Errorf("exit %d\n%s", r.code, r.stdout)
	}
}

// validate's last check is the compile a run makes before it starts, with
// the config's options: what the compiler refuses is an error located at
// the flow file; a flow that compiles adds nothing.
func TestValidate_CompileProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	f, err := flow.Load(filepath.Join(dir, ".stratus/flows"), "implementation")
	if err != nil {
		t.Fatal(err)
	}
	if ps := compileProblems(f, nil); len(ps) != 0 {
		t.Errorf("the built-in flow: %v", ps)
	}
	cfg := config.Default()
	cfg.Agents.MaxFixCycles = -1
	ps := compileProblems(f, cfg)
	if len(ps) != 1 || !ps[0].Fatal || ps[0].File != f.File || !strings.Contains(ps[0].Message, "does not compile, so `stratus run` refuses it: ") {
		t.Errorf("problems %+v", ps)
	}
}

// A pinned provider the config does not allow is refused by the config
// layer and by a run's preflight alike: validate reports it once.
func TestValidate_PinnedProviderRefusedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	path := filepath.Join(dir, ".stratus/flows/implementation.yaml")
	writeTestFile(t, path, strings.Replace(readFile(t, path), "role_file: implementation/planning.md\n", "role_file: implementation/planning.md\n      provider: nosuch\n", 1))
	r := runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != ExitFailed || strings.Count(r.stdout, `provider "nosuch" is not in agents.allowed`) != 1 || !strings.Contains(r.stdout, "flow implementation: 1 error, 0 warnings") {
		t.Errorf("exit %d\n%s", r.code, r.stdout)
	}
}

// A config.yaml that does not load is an error of validate's own (exit 1,
// never the usage exit), said with its position and counted on a summary
// line; the flows are still checked, without the config-aware layer.
func TestValidate_BrokenConfigIsAnErrorAndTheFlowsAreStillChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"agents: [\n")
	r := runCLI(t, "validate", "--all", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, "error: "+cfg+":") ||
		!strings.Contains(r.stdout, "config "+cfg+": 1 error, 0 warnings\n") ||
		!strings.Contains(r.stdout, "flow implementation: ok\n") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var rep ValidateReport
	r = runCLI(t, "validate", "--all", "--dir", dir, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != ExitFailed || rep.Fatal != 1 || len(rep.ConfigErrors) != 1 || !strings.HasPrefix(rep.ConfigErrors[0], cfg+":") {
		t.Errorf("--json: exit %d %v %+v\n%s", r.code, err, rep, r.stdout)
	}
}

// A check command that does not start here is said by validate (a warning:
// on AWS the runner image's PATH counts) for a flow with a checks node,
// naming the config field, before a run parks at that node.
func TestValidate_CheckCommandNotOnPathIsAWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	copyTree(t, filepath.Join(testenv.ModuleRoot(t), "examples/checks/flows"), filepath.Join(dir, ".stratus/flows"))
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, strings.Replace(readFile(t, cfg), "checks:\n", "checks:\n  command_sets:\n    go:\n      commands:\n        - {name: test, argv: [no-such-go-here, test, ./...]}\n", 1))
	r := runCLI(t, "validate", "checked", "--dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout, "warning: "+cfg+": check go/test: no-such-go-here: not found on PATH; a run here parks at the checks (flow checked node tests)") ||
		!strings.Contains(r.stdout, "flow checked: 0 errors, 1 warning\n") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "validate", "implementation", "--dir", dir); r.code != ExitOK || strings.Contains(r.stdout, "no-such-go-here") {
		t.Errorf("a flow without a checks node: exit %d\n%s", r.code, r.stdout)
	}
}
