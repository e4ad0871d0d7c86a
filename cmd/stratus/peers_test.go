package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// copyTree copies the directory src into dst unchanged (regular files only).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// peersScenario drives worc's implementation flow through both of its fix
// loops: the first checks run fails (no fix yet), the fixing agent's ctx file
// makes the next pass; the first review asks for rework, the second accepts.
const peersScenario = `nodes:
  planning:
    - report: "Plan: add the page parameter, validate it, test three cases."
  implementation:
    - report: "Added ?page to GET /users."
  review:
    - report:
        findings:
          - {severity: high, path: users.go, what: "page=0 is accepted.", fix: "Reject page < 1 with 400."}
    - report:
        findings:
          - {severity: low, path: users_test.go, what: "Test names are terse. Name each case.", fix: "Rename the rows."}
  fixing:
    - report: "Made the checks pass."
    - report: "page < 1 now returns 400."
  documentation:
    - report: "Documented the page parameter in README.md."
default:
  report: "The users list endpoint gained an optional page parameter: invalid values are refused with the existing 400 shape, the default behaviour is unchanged, and three unit tests cover the cases."
`

// Worc's implementation.yaml, read unchanged from the peers, runs end to end
// with script engines through the checks→fixing loop and the review→fixing
// loop; the step sequence and the budgets spent are asserted.
func TestRun_WorcImplementationFlowEndToEnd(t *testing.T) {
	t.Parallel()
	peers := testenv.Peers(t, "worc")
	dir := t.TempDir()
	scenario := filepath.Join(dir, "scenario.yaml")
	writeTestFile(t, scenario, peersScenario)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", scenario); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	flows := filepath.Join(dir, ".stratus/flows")
	copyTree(t, filepath.Join(peers, "flows"), flows)
	// The checks gate: one command set, which passes once the fixing agent
	// has written its ctx file.
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	if !strings.Contains(cfg, "checks:\n  timeout_seconds: 7200\n") {
		t.Fatalf("config.yaml has no default checks block:\n%s", cfg)
	}
	writeTestFile(t, cfgPath, strings.Replace(cfg, "checks:\n  timeout_seconds: 7200\n", `checks:
  timeout_seconds: 7200
  command_sets:
    repo:
      commands:
        - {name: tests, argv: [sh, -c, "test -f workspace/tasks/task-pagination/ctx/fixing.md"]}
`, 1))
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(peers, "tasks/task-minimal.md")))

	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("run exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	want := "refinement#1:skipped planning#1:done implementation#1:done testing#1:fail fixing#1:done testing#2:pass " +
		"review#1:rework fixing#2:done testing#3:pass review#2:accept documentation#1:done publish#1:done"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\nstderr:\n%s", got, want, r.stderr)
	}
	// The peer flow names implementation/refinement.md, which its copy lacks:
	// the node is gated by a `when` fact, so that is a warning, not a refusal.
	if !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "refinement.md") {
		t.Errorf("no warning about the missing refinement.md:\n%s", r.stderr)
	}
	res := decodeRun(t, r.stdout)
	wantLoops := map[string]int{"test_fix": 1, "review_fix": 1, "global_fix_iterations": 2}
	for k, v := range wantLoops {
		if res.Budgets[k] != v {
			t.Errorf("budget %s spent %d, want %d (all: %v)", k, res.Budgets[k], v, res.Budgets)
		}
	}
	ctx := filepath.Join(dir, "workspace/tasks/task-pagination/ctx")
	if s := readFile(t, filepath.Join(ctx, "testing.md")); !strings.Contains(s, "tests") {
		t.Errorf("testing.md does not report the check:\n%s", s)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/task-pagination/summary.md"))
	if !strings.HasPrefix(md, "# Add page parameter to the users list endpoint\n") {
		t.Errorf("summary.md:\n%s", md)
	}
}
