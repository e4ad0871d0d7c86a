package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/testenv"
)

// The walking skeleton's acceptance test: the shipped example runs
// through the built-in implementation flow with the script engine; the
// review loop runs twice.
func TestRun_ExampleThroughImplementationFlow(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(root, "examples/scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(root, "examples/task.md")))

	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("run exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	want := "planning#1:done implementation#1:done review#1:rework fixing#1:done review#2:accept publish#1:done"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\nstderr:\n%s", got, want, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	if res.Status != "done" || res.TaskID != "demo-greeting" || res.Flow != "implementation" {
		t.Errorf("result = %+v", res)
	}
	if res.OverheadMedianMS == nil {
		t.Errorf("no overhead figure in %+v", res)
	}

	// Projection (docs/contracts.md § Files are the server's job):
	// <ctx-dir>/<step>.md with front matter + body, each part raw beside it.
	ctx := filepath.Join(dir, "workspace/tasks/demo-greeting/ctx")
	if res.CtxDir != ctx {
		t.Errorf("ctx_dir = %s, want %s", res.CtxDir, ctx)
	}
	for node, wantBody := range map[string]string{
		"planning":       "Plan staged as plan.md: three changes in cmd/hello, hardest part is the empty-name check.",
		"implementation": "Added --name to cmd/hello/main.go and a table test; the empty-name case is not handled yet.",
		"fixing":         "Fixed the high finding: an empty --name now exits 2 with 'flag --name: empty value'. Left the low finding (test names) as advisory.",
	} {
		fm, body, err := projection.Decode([]byte(readFile(t, filepath.Join(ctx, node+".md"))))
		if err != nil {
			t.Fatalf("%s.md: %v", node, err)
		}
		if string(body) != wantBody {
			t.Errorf("%s.md body = %q, want %q", node, body, wantBody)
		}
		if fm.TaskID != "demo-greeting" || fm.Step != node || fm.Attempt != 1 || fm.Agent != node || fm.Bytes != len(wantBody) {
			t.Errorf("%s.md front matter = %+v", node, fm)
		}
	}
	// review.md holds the latest visit: review#2, whose findings are all below the gate.
	fm, body, err := projection.Decode([]byte(readFile(t, filepath.Join(ctx, "review.md"))))
	if err != nil {
		t.Fatal(err)
	}
	var findings struct {
		Findings []map[string]string `json:"findings"`
	}
	if fm.StepRef != "review#2" || json.Unmarshal(body, &findings) != nil || len(findings.Findings) != 1 || findings.Findings[0]["severity"] != "low" {
		t.Errorf("review.md = %+v %s", fm, body)
	}
	if plan := readFile(t, filepath.Join(ctx, "plan.md")); !strings.HasPrefix(plan, "# Plan: --name flag\n") {
		t.Errorf("plan.md part not raw: %q", plan)
	}

	// Role files were rendered with the run's variables: fixing got the review's path.
	fixPrompt := readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/stages/fixing/run-000001/rendered-prompt.md"))
	if !strings.Contains(fixPrompt, filepath.Join(ctx, "review.md")) || !strings.Contains(fixPrompt, filepath.Join(ctx, "plan.md")) || strings.Contains(fixPrompt, "{") {
		t.Errorf("fixing prompt:\n%s", fixPrompt)
	}

	// Summary (docs/contracts.md § The summary artifacts).
	var sum map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/summary.json"))), &sum); err != nil {
		t.Fatal(err)
	}
	if sum["what"] != "Add a --name flag to the greeting command" {
		t.Errorf("summary.json what = %v", sum["what"])
	}
	// Five flow steps ran an engine, and the supervisor layer two turns:
	// one observation (of review#1's rework) and the finalize turn.
	usage, _ := sum["task_usage"].(map[string]any)
	if usage["calls"] != float64(7) || usage["input_tokens"] != float64(1200+2400+1800+1500+1900+600+900) {
		t.Errorf("summary.json task_usage = %v", usage)
	}
	if sup, _ := sum["supervisor_usage"].(map[string]any); sup["calls"] != float64(2) {
		t.Errorf("summary.json supervisor_usage = %v", sum["supervisor_usage"])
	}
	// The finalize turn's prose is the PR body, under the task title, with
	// the fact sections appended (docs/contracts.md § The summary artifacts).
	md := readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/summary.md"))
	for _, s := range []string{"# Add a --name flag to the greeting command\n\nThe greeting command now takes a --name flag",
		"## Follow-ups", "**Test names do not say which case they cover.**", "## Pipeline nodes skipped", "## Provider fallbacks", "## Run cost"} {
		if !strings.Contains(md, s) {
			t.Errorf("summary.md lacks %q:\n%s", s, md)
		}
	}
}

// A rework loop stops at its budget: the run ends manual_action_required,
// exit status 3 (worc flow format: exhausting budgets.review_fix parks to manual).
func TestRun_ReworkBudgetExhaustedIsManualActionRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), `
nodes:
  review:
    - report: {findings: [{severity: blocking, path: a.go, what: broken, fix: fix it}]}
default:
  report: ok
`)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-budget\ntitle: Budget\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitManual, r.stderr)
	}
	// budgets.review_fix is 3 in the built-in flow: 4 reviews, 3 fixes.
	want := "planning#1:done implementation#1:done review#1:rework fixing#1:done review#2:rework fixing#2:done review#3:rework fixing#3:done review#4:rework"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stratus/logs/t-budget/summary.md")); err != nil {
		t.Errorf("a manual run gets a summary too: %v", err)
	}
}

// An evaluator whose report is not a findings list fails closed.
func TestRun_MalformedFindingsFailClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "echo"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-echo\ntitle: Echo\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "planning#1:done implementation#1:done review#1:invalid" {
		t.Fatalf("steps: %s", got)
	}
}

// An engine that fails (docs/contracts.md § Terminal classification:
// turn_failed → Failed) fails the run: exit 1.
func TestRun_EngineFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), "nodes:\n  implementation:\n    - fail: model refused\ndefault:\n  report: ok\n")
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-fail\ntitle: Fail\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitFailed {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "terminal=Failed") || !strings.Contains(r.stderr, "model refused") {
		t.Errorf("progress does not show the failure:\n%s", r.stderr)
	}
}

// docs/contracts.md § Conformance checklist: the smallest conforming engine
// (the four-line shell script) runs as an agent node's engine, and its report
// becomes the step's value.
func TestRun_SmallestConformingEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), `read line
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7}}\n'
printf '{"subrun_report": {"answer": 42}}\n'
`)
	usePrimaryShellEngine(t, dir, "sh9")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny.yaml"), `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - id: answer
      kind: agent
      role_file: tiny/answer.md
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: answer, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/answer.md"), "Answer for {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-tiny\ntitle: Tiny\ntask_type: tiny\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "answer#1:done publish#1:done" {
		t.Fatalf("steps: %s", got)
	}
	if !strings.Contains(r.stderr, "terminal=Captured") || !strings.Contains(r.stderr, "tokens=7/3") {
		t.Errorf("progress: %s", r.stderr)
	}
	_, body, err := projection.Decode([]byte(readFile(t, filepath.Join(dir, "workspace/tasks/t-tiny/ctx/answer.md"))))
	if err != nil || string(body) != `{"answer": 42}` {
		t.Errorf("answer.md body = %q, %v", body, err)
	}
}

// Bad input is a clear error and exit status 2, before anything runs.
func TestRun_BadInputExitsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for name, tc := range map[string]struct{ task, want string }{
		"no id":        {"---\ntitle: x\n---\n", "id"},
		"unknown flow": {"---\nid: t1\ntitle: x\ntask_type: nosuch\n---\n", "nosuch"},
		"no front":     {"just text\n", "front matter"},
	} {
		p := filepath.Join(dir, name+".md")
		writeTestFile(t, p, tc.task)
		r := runCLI(t, "run", p, "--dir", dir)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q (want %q)", name, r.code, r.stderr, tc.want)
		}
	}
	if r := runCLI(t, "run", filepath.Join(dir, "missing.md"), "--dir", dir); r.code != ExitUsage {
		t.Errorf("missing task file: exit %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "run", filepath.Join(dir, "x.md"), "--dir", t.TempDir()); r.code != ExitUsage || !strings.Contains(r.stderr, "stratus install") {
		t.Errorf("no install: exit %d %s", r.code, r.stderr)
	}
}

// A run refuses to start when a node that will run has no role file
// (docs/contracts.md § Fatal validation: "at flow dispatch") — unless the
// task disables it — and validate reports the same as an error (worc's own
// implementation flow names an absent refinement.md behind a `when` fact:
// that one stays a warning in both).
func TestRun_MissingRoleFileOfANodeThatWillRunIsFatal(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(root, "examples/scenario.yaml")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if err := os.Remove(filepath.Join(dir, ".stratus/flows/implementation/fixing.md")); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(root, "examples/task.md")))
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "implementation/fixing.md") || strings.Contains(r.stderr, "stratus: start") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "validate", "--dir", dir, "--all"); r.code != ExitFailed || !strings.Contains(r.stdout, `error: `+filepath.Join(dir, ".stratus/flows/implementation.yaml")) ||
		!strings.Contains(r.stdout, `node "fixing" role_file "implementation/fixing.md" does not exist`) || !strings.Contains(r.stdout, "so `stratus run` refuses the flow") ||
		!strings.Contains(r.stdout, "flow implementation: 1 error, 0 warnings") {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Two runs of one task in one work dir would share a ctx dir: the second
// is refused while the first holds the task's lock.
func TestRun_SameTaskTwiceAtOnceRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), "nodes:\n  planning:\n    - sleep_ms: 1500\n      report: p\ndefault:\n  report: {findings: []}\n")
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-lock\ntitle: Lock\n---\nbody\n")
	first := exec.Command(stratusBin, "run", task, "--dir", dir)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	// Wait until the first run holds the lock (its planning step started).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, ".stratus/logs/t-lock/stages/planning")); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "already running") {
		t.Fatalf("second run: exit %d %s", r.code, r.stderr)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("first run: %v", err)
	}
}
