package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/engine"
	"github.com/stratusflow/stratus/internal/testenv"
)

// examples/checks, run as its run.sh says: a Go project whose test fails,
// the checked flow with the script engine, the checks node running `go
// test ./...` in the work dir. The first change fails the tests, fixing
// mends it, the re-run passes, the run ends done with no failed step, and
// the checks report the fixer read holds go test's output.
func TestExamples_ChecksFlowEndToEnd(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "go", "the example's checks node runs go test ./...")
	testenv.MustHaveCommand(t, "git", "run.sh makes the project a git repository")
	root := testenv.ModuleRoot(t)
	dir := filepath.Join(t.TempDir(), "checks")
	cmd := exec.Command("sh", filepath.Join(root, "examples/checks/run.sh"), dir, stratusBin)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/checks/run.sh: %v\n%s", err, out)
	}
	want := "implementation#1:done tests#1:fail fixing#1:done tests#2:pass publish#1:done"
	if got := join(steps(string(out))); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\n%s", got, want, out)
	}
	if !strings.Contains(string(out), "flow checked: ok\n") || !strings.Contains(string(out), ": done\n") {
		t.Errorf("run.sh output:\n%s", out)
	}
	report := readFile(t, filepath.Join(dir, ".stratus/logs/checked-greeting/stages/tests/run-000001/checks.md"))
	for _, s := range []string{"# Checks: fail", "## go / test", "- argv: `go test ./...`", `Greet("") = "Hello, !", want "Hello, world!"`} {
		if !strings.Contains(report, s) {
			t.Errorf("the first checks report lacks %q:\n%s", s, report)
		}
	}
	// A git work dir runs in a worktree: the fix is on the task's branch,
	// and the checkout is as it was.
	fixed, err := exec.Command("git", "-C", dir, "show", "stratus/checked-greeting:greet/greet.go").CombinedOutput()
	if err != nil || !strings.Contains(string(fixed), `name = "world"`) {
		t.Errorf("greet.go on branch stratus/checked-greeting is not the fixed one (%v):\n%s", err, fixed)
	}
	if got := readFile(t, filepath.Join(dir, "greet/greet.go")); strings.Contains(got, `name = "world"`) {
		t.Errorf("the run edited the checkout in place; want the fix on its branch only:\n%s", got)
	}
}

// The example scenarios load (engine.LoadScenario, as install does).
func TestExamples_ScenariosLoad(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	for _, f := range []string{"examples/scenario.yaml", "examples/checks/scenario.yaml"} {
		if _, err := engine.LoadScenario(filepath.Join(root, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
