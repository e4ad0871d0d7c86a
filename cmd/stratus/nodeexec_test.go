package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/testenv"
)

// nodeEngine is a shell engine (usePrimaryShellEngine) that writes
// value.txt the way each node would change the repository: implementation
// breaks it, fixing mends it (when FIXES is "yes").
const nodeEngine = `read line
case "$line" in
  *'"node":"implementation"'*) echo broken > value.txt ;;
  *'"node":"fixing"'*) if [ "$(cat fixes 2>/dev/null)" = yes ]; then echo ok > value.txt; fi ;;
esac
printf '{"subrun_report":"done"}\n'
`

const gatedFlow = `flow:
  name: gated
  task_type: gated
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: implementation
      kind: agent
      role_file: gated/implementation.md
      permission_profile: workspace-write
    - id: testing
      kind: checks
      checker: command_profile
    - id: fixing
      kind: agent
      role_file: gated/fixing.md
      permission_profile: workspace-write
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: implementation, to: testing }
    - { from: testing, to: publish, outcome: pass }
    - { from: testing, to: fixing, outcome: fail, loop: test_fix }
    - { from: fixing, to: testing }
  budgets:
    test_fix: 2
`

// gatedSetup installs the gated flow in a git work tree whose base commit
// holds the engine, the check script and the task; config.yaml gets two
// command sets: "value" (no paths: any change) and "docs" (docs/** only,
// which nothing here touches; it would fail if it ran).
func gatedSetup(t *testing.T, fixes bool) string {
	t.Helper()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	usePrimaryShellEngine(t, dir, "shx")
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	sets := `checks:
  timeout_seconds: 60
  command_sets:
    value:
      commands:
        - { name: value-ok, argv: [sh, check.sh] }
    docs:
      paths: ["docs/**"]
      commands:
        - { name: never, argv: [sh, -c, "exit 9"] }
`
	if !strings.Contains(cfg, "checks:\n  timeout_seconds: 7200\n") {
		t.Fatalf("config.yaml has no default checks block:\n%s", cfg)
	}
	// In place, as these tests read the ctx files and the work tree where
	// the engine wrote them (README § Workspaces: a git work tree would
	// otherwise get checkouts of their own).
	writeTestFile(t, cfgPath, strings.Replace(cfg, "checks:\n  timeout_seconds: 7200\n", sets, 1)+"workspace: workdir\n")
	writeTestFile(t, filepath.Join(dir, "engine.sh"), nodeEngine)
	writeTestFile(t, filepath.Join(dir, "check.sh"), "echo \"value: $(cat value.txt)\"\ngrep -qx ok value.txt\n")
	if fixes {
		writeTestFile(t, filepath.Join(dir, "fixes"), "yes\n")
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated.yaml"), gatedFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated/implementation.md"), "Implement {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated/fixing.md"), "Fix what {checks_path} reports.\n")
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-gated\ntitle: Gated\ntask_type: gated\n---\nbody\n")
	testenv.MustHaveCommand(t, "git", "a checks node selects command sets by the paths git reports changed")
	for _, args := range [][]string{{"init", "-q"}, {"add", "engine.sh", "check.sh", "task.md"}, {"commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// README.md § Node kinds, checks: the command sets from config.yaml run on the runner,
// selected by the work tree's diff; a failing check routes to fixing
// through the named loop, the re-check passes, and the report is saved as
// {checks_path} (<ctx>/<node>.md) for the fixer.
func TestRun_ChecksFailLoopsThroughFixingThenPasses(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, true)
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	want := "implementation#1:done testing#1:fail fixing#1:done testing#2:pass publish#1:done"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\n%s", got, want, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	if res.Budgets["test_fix"] != 1 {
		t.Errorf("budgets spent %v, want test_fix 1", res.Budgets)
	}
	ctx := filepath.Join(dir, "workspace/tasks/t-gated/ctx")
	fm, body, err := projection.Decode([]byte(readFile(t, filepath.Join(ctx, "testing.md"))))
	if err != nil {
		t.Fatal(err)
	}
	md := string(body)
	if fm.StepRef != "testing#2" {
		t.Errorf("testing.md is %s, want the latest visit", fm.StepRef)
	}
	for _, s := range []string{"# Checks: pass", "selection: by the work tree's diff", "- `value.txt`", "## value / value-ok", "- argv: `sh check.sh`", "- result: exit 0", "value: ok"} {
		if !strings.Contains(md, s) {
			t.Errorf("testing.md lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "docs / never") {
		t.Errorf("the docs set ran though no docs/ path changed:\n%s", md)
	}
	// The fixer was pointed at the failing report.
	fixPrompt := readFile(t, filepath.Join(dir, ".stratus/logs/t-gated/stages/fixing/run-000001/rendered-prompt.md"))
	if !strings.Contains(fixPrompt, filepath.Join(ctx, "testing.md")) {
		t.Errorf("fixing prompt does not carry {checks_path}:\n%s", fixPrompt)
	}
	// Each visit keeps its own report in its step's log dir, and the
	// summary's Checks section links each visit to it.
	summary := readFile(t, filepath.Join(dir, ".stratus/logs/t-gated/summary.md"))
	for visit, want := range map[string]string{"1": "# Checks: fail", "2": "# Checks: pass"} {
		p := filepath.Join(dir, ".stratus/logs/t-gated/stages/testing/run-00000"+visit+"/checks.md")
		fm, body, err := projection.Decode([]byte(readFile(t, p)))
		if err != nil || fm.StepRef != "testing#"+visit || !strings.Contains(string(body), want) {
			t.Errorf("%s: %s %v:\n%s", p, fm.StepRef, err, body)
		}
		if !strings.Contains(summary, "- testing#"+visit+": **") || !strings.Contains(summary, "output `"+p+"`") {
			t.Errorf("summary.md does not link testing#%s to %s:\n%s", visit, p, summary)
		}
	}
}

// A loop budget bounds the checks→fixing loop: a fix that never works
// ends the run manual_action_required after the budget's rounds.
func TestRun_ChecksFailBudgetExhaustedIsManual(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, false)
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitManual, r.stderr)
	}
	want := "implementation#1:done testing#1:fail fixing#1:done testing#2:fail fixing#2:done testing#3:fail"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s", got, want)
	}
}

// worc configuration.md § checks: a required toolchain that cannot launch
// leaves the gate incomplete → manual_action_required, with no fix round.
func TestRun_ChecksMissingToolchainIsIncompleteNotFail(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, true)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "argv: [sh, check.sh]", "argv: [stratus-no-such-linter]", 1))
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitManual, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "implementation#1:done testing#1:incomplete" {
		t.Fatalf("steps: %s\n%s", got, r.stderr)
	}
	if !strings.Contains(r.stderr, "could not launch") {
		t.Errorf("the reason is not shown:\n%s", r.stderr)
	}
}

// docs/runner-image.md § When a check cannot run: a check whose command
// is not found (exit 127) is the toolchain's environment, not a failing
// test: the run parks incomplete with no fix round spent, and `status`
// says what is missing and how to fix it.
func TestRun_ChecksCommandNotFoundParksAsEnvironment(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, true)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "argv: [sh, check.sh]", "argv: [sh, -c, stratus-no-such-toolchain]", 1))
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
	if r.code != ExitManual {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitManual, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "implementation#1:done testing#1:incomplete" {
		t.Fatalf("steps: %s\n%s", got, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	if res.Budgets["test_fix"] != 0 {
		t.Errorf("budgets spent %v, want no fix round", res.Budgets)
	}
	st := runCLI(t, "status", res.RunID, "--dir", dir)
	for _, want := range []string{"the toolchain's environment, not the code", "value/value-ok (exit 127: a command it runs was not found (it said: sh: 1: stratus-no-such-toolchain: not found); install it in the runner image"} {
		if !strings.Contains(st.stdout+st.stderr, want) {
			t.Errorf("status does not say %q:\n%s%s", want, st.stdout, st.stderr)
		}
	}
}

// docs/runner-image.md § The environment of checks and tools: config
// checks.env reaches every check command, beside a HOME it may write.
func TestRun_ChecksEnvReachesTheCommands(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, true)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := strings.Replace(readFile(t, cfgPath), "checks:\n  timeout_seconds: 60\n", "checks:\n  timeout_seconds: 60\n  env: {STRATUS_CHECK_MODE: strict}\n", 1)
	cfg = strings.Replace(cfg, "argv: [sh, check.sh]", `argv: [sh, -c, 'test "$STRATUS_CHECK_MODE" = strict && test -w "$HOME" && sh check.sh']`, 1)
	writeTestFile(t, cfgPath, cfg)
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if got := join(steps(r.stderr)); r.code != ExitOK || got != "implementation#1:done testing#1:fail fixing#1:done testing#2:pass publish#1:done" {
		t.Fatalf("exit %d, steps %s\n%s", r.code, got, r.stderr)
	}
}

const routedFlow = `flow:
  name: routed
  task_type: routed
  permission_ceiling: read-only
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: classify
      kind: tool
      tool: classify
      args: { size: large, limit: 3, strict: true }
    - id: small
      kind: agent
      role_file: routed/small.md
    - id: large
      kind: agent
      role_file: routed/large.md
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: classify, to: small, outcome: "route:small" }
    - { from: classify, to: large, outcome: "route:large" }
    - { from: small, to: publish }
    - { from: large, to: publish }
`

// README.md § Node kinds, tool: the executable from .stratus/tools/<name> runs with
// argv only, the JSON context on stdin and the allowlisted environment (a
// secret in the runner's environment does not reach it); its printed
// route:<label> outcome takes the edge with that outcome; its redacted
// stdout is saved as {<node>_path} and a summary as <ctx>/<node>.md.
func TestRun_ToolRoutesByPrintedOutcome(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/routed.yaml"), routedFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/routed/small.md"), "Small: {classify_path}\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/routed/large.md"), "Large: {classify_path}\n")
	tool := filepath.Join(dir, ".stratus/tools/classify")
	writeTestFile(t, tool, `#!/bin/sh
cat > tool-stdin.json
echo "argc=$# secret=${STRATUS_E2E_SECRET-unset}" > tool-seen.txt
echo "token sk-abcdefghijklmnopqrstuvwx seen"
echo '{"outcome":"route:large","findings":[],"data":{"lines":3}}'
`)
	os.Chmod(tool, 0o755)
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-routed\ntitle: Routed\ntask_type: routed\n---\nbody\n")

	r := runWorkerCLI(t, map[string]string{"STRATUS_E2E_SECRET": "hunter2"}, "", "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "classify#1:route:large large#1:done publish#1:done" {
		t.Fatalf("steps: %s\n%s", got, r.stderr)
	}
	if seen := readFile(t, filepath.Join(dir, "tool-seen.txt")); seen != "argc=0 secret=unset\n" {
		t.Errorf("the tool saw %q", seen)
	}
	var stdin struct {
		TaskID       string             `json:"task_id"`
		NodeID       string             `json:"node_id"`
		SubtaskOrder *int               `json:"subtask_order"`
		Paths        map[string]*string `json:"paths"`
		Args         map[string]any     `json:"args"`
	}
	raw := readFile(t, filepath.Join(dir, "tool-stdin.json"))
	if err := json.Unmarshal([]byte(raw), &stdin); err != nil {
		t.Fatalf("stdin %q: %v", raw, err)
	}
	if stdin.TaskID != "t-routed" || stdin.NodeID != "classify" || stdin.SubtaskOrder != nil ||
		stdin.Args["size"] != "large" || stdin.Args["limit"] != float64(3) || stdin.Args["strict"] != true {
		t.Errorf("stdin = %s", raw)
	}
	for _, k := range []string{"repo", "task_path", "plan_path", "diff_path", "checks_path", "review_path"} {
		if _, ok := stdin.Paths[k]; !ok {
			t.Errorf("stdin paths lack %q: %s", k, raw)
		}
	}
	if p := stdin.Paths["repo"]; p == nil || *p != dir {
		t.Errorf("paths.repo = %v, want %s", p, dir)
	}
	if p := stdin.Paths["task_path"]; p == nil || *p != filepath.Join(dir, "task.md") {
		t.Errorf("paths.task_path = %v", p)
	}
	ctx := filepath.Join(dir, "workspace/tasks/t-routed/ctx")
	stdout := readFile(t, filepath.Join(ctx, "tools/classify/stdout.txt"))
	if !strings.Contains(stdout, `"outcome":"route:large"`) || strings.Contains(stdout, "sk-abcdefghij") || !strings.Contains(stdout, "[REDACTED]") {
		t.Errorf("stdout.txt = %q", stdout)
	}
	_, body, err := projection.Decode([]byte(readFile(t, filepath.Join(ctx, "classify.md"))))
	if err != nil || !strings.Contains(string(body), "# Tool classify: route:large") || !strings.Contains(string(body), `"lines": 3`) {
		t.Errorf("classify.md = %s (%v)", body, err)
	}
	if prompt := readFile(t, filepath.Join(dir, ".stratus/logs/t-routed/stages/large/run-000001/rendered-prompt.md")); !strings.Contains(prompt, filepath.Join(ctx, "tools/classify/stdout.txt")) {
		t.Errorf("large's prompt does not carry {classify_path}:\n%s", prompt)
	}
	// The visit's own copies, in its step's log dir.
	visit := filepath.Join(dir, ".stratus/logs/t-routed/stages/classify/run-000001")
	if got := readFile(t, filepath.Join(visit, "stdout.txt")); got != stdout {
		t.Errorf("the visit's stdout.txt = %q, want the ctx copy %q", got, stdout)
	}
	if _, body, err := projection.Decode([]byte(readFile(t, filepath.Join(visit, "tool.md")))); err != nil ||
		!strings.Contains(string(body), "# Tool classify: route:large") || !strings.Contains(string(body), filepath.Join(visit, "stdout.txt")) {
		t.Errorf("the visit's tool.md = %s (%v)", body, err)
	}
}

const lintedFlow = `flow:
  name: linted
  task_type: linted
  permission_ceiling: read-only
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: draft
      kind: agent
      role_file: linted/fix.md
    - id: lint
      kind: tool
      tool: lint
      timeout_seconds: 30
    - id: fix
      kind: agent
      role_file: linted/fix.md
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: draft, to: lint }
    - { from: lint, to: publish, outcome: pass }
    - { from: lint, to: fix, outcome: fail, budget: 5 }
    - { from: fix, to: lint }
`

// reference.md § tool node: two identical fail results without findings
// park the run on the second, before another fix iteration is charged
// (the budget of 5 is not what stops it); a crashed tool (non-zero, no
// stdout, stderr) parks at once.
func TestRun_ToolRepeatedFailAndCrashPark(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		script, steps, reason string
	}{
		"repeated fail": {"#!/bin/sh\necho 'too short: 120 chars'\nexit 1\n", "draft#1:done lint#1:fail fix#1:done lint#2:manual_action_required", "failed exactly as in lint#1"},
		"crash":         {"#!/bin/sh\necho 'Traceback: boom' >&2\nexit 2\n", "draft#1:done lint#1:manual_action_required", "crashed (exit 2, no stdout); stderr: Traceback: boom"},
	} {
		dir := t.TempDir()
		if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
			t.Fatal(r.stderr)
		}
		writeTestFile(t, filepath.Join(dir, ".stratus/flows/linted.yaml"), lintedFlow)
		writeTestFile(t, filepath.Join(dir, ".stratus/flows/linted/fix.md"), "Fix: {lint_path}\n")
		writeTestFile(t, filepath.Join(dir, ".stratus/tools/lint"), tc.script)
		os.Chmod(filepath.Join(dir, ".stratus/tools/lint"), 0o755)
		writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-lint\ntitle: Lint\ntask_type: linted\n---\nbody\n")
		r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
		if r.code != ExitManual {
			t.Fatalf("%s: exit %d, want %d\n%s", name, r.code, ExitManual, r.stderr)
		}
		if got := join(steps(r.stderr)); got != tc.steps {
			t.Errorf("%s: steps %s, want %s", name, got, tc.steps)
		}
		if !strings.Contains(r.stderr, tc.reason) {
			t.Errorf("%s: the reason %q is not shown:\n%s", name, tc.reason, r.stderr)
		}
	}
}
