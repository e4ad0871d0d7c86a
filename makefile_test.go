package stratus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// makeRun runs make in the module root with the Makefile plus extra (a
// makefile of test stages, may be ""), in an environment holding only env,
// and returns its exit status and combined output.
func makeRun(t *testing.T, extra string, env []string, args ...string) (int, string) {
	t.Helper()
	return makeRunIn(t, testenv.ModuleRoot(t), extra, env, args...)
}

// makeRunIn is makeRun in root, a directory holding a copy of the Makefile.
func makeRunIn(t *testing.T, root, extra string, env []string, args ...string) (int, string) {
	t.Helper()
	mk := testenv.MustHaveCommand(t, "make", "make test is a Makefile target")
	argv := []string{"--no-print-directory", "-C", root, "-f", "Makefile"}
	if extra != "" {
		p := filepath.Join(t.TempDir(), "extra.mk")
		if err := os.WriteFile(p, []byte(extra), 0o644); err != nil {
			t.Fatal(err)
		}
		argv = append(argv, "-f", p)
	}
	// A nested make in the module root must not write the outer `make
	// test`'s skip log; elsewhere it keeps its own default.
	if root == testenv.ModuleRoot(t) {
		argv = append(argv, "SKIP_LOG="+filepath.Join(t.TempDir(), "skips.tsv"))
	}
	cmd := exec.Command(mk, append(argv, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("make %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// stages stand in for the real ones: one fails, one cannot run here, one
// passes and leaves a mark.
const stages = `
stage-fails:
	@echo "== stage-fails: a lint that finds a problem"; exit 1
stage-skips:
	@echo "== stage-skips: a lint whose tool is missing"; \
	$(call skip,frobnicator,not found: apt-get install frobnicator); exit 0
stage-skips-too:
	@echo "== stage-skips-too: a test whose tool is missing"; \
	$(call skip,frobnicator,not on PATH); exit 0
stage-passes:
	@echo "== stage-passes: the Go tests"; echo ran > "$(MARK)"
`

func contains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// Every stage of `make test` runs and says so as it starts,
// the Go tests run even when a lint failed, the exit status still says a
// lint failed, and a stage that cannot run here is a one-line skip naming
// the tool, listed again at the end, and not a failure.
func TestMakeTest_RunsEveryStageAndFailsWhenOneFailed(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=" + os.Getenv("PATH")}
	mark := filepath.Join(t.TempDir(), "mark")
	code, out := makeRun(t, stages, env, "test", "TEST_STAGES=stage-fails stage-skips stage-passes", "MARK="+mark)
	if code == 0 {
		t.Errorf("make test exited 0 after a failed stage:\n%s", out)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the stage after a failed one did not run: %v\n%s", err, out)
	}
	contains(t, out, "== stage-fails", "== stage-skips", "== stage-passes",
		"   SKIPPED: needs frobnicator: not found: apt-get install frobnicator\n",
		"== skipped", "   frobnicator: not found: apt-get install frobnicator\n      1 skipped: make stage-skips\n",
		"make test: FAILED: stage-fails (")
	if strings.Contains(out, "FAILED: stage-fails stage-skips") {
		t.Errorf("a skip was counted as a failure:\n%s", out)
	}

	code, out = makeRun(t, stages, env, "test", "TEST_STAGES=stage-skips stage-passes", "MARK="+mark)
	if code != 0 {
		t.Errorf("make test with only a skip exited %d:\n%s", code, out)
	}
	contains(t, out, "make test: passed (")
}

// Under STRATUS_REQUIRE_ALL=1 (CI) a skip is a failure.
func TestMakeTest_RequireAllTurnsASkipIntoAFailure(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=" + os.Getenv("PATH"), "STRATUS_REQUIRE_ALL=1"}
	code, out := makeRun(t, stages, env, "test", "TEST_STAGES=stage-skips stage-passes", "MARK="+filepath.Join(t.TempDir(), "mark"))
	if code == 0 {
		t.Errorf("make test exited 0 with a skip under STRATUS_REQUIRE_ALL=1:\n%s", out)
	}
	contains(t, out, "FAILED: needs frobnicator", "make test: FAILED: stage-skips (")
}

// The real lint stages, on a machine with none of their tools (an empty
// PATH), skip naming the tool and what would install it.
func TestMakeTest_LintsSkipNamingTheirMissingTool(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=" + t.TempDir()}
	for stage, want := range map[string]string{
		"lint-asl":   "SKIPPED: needs asl-validator: node and npm not found: install Node.js 20 or later",
		"lint-cfn":   "SKIPPED: needs cfn-lint: not found: pip install cfn-lint",
		"lint-shell": "SKIPPED: needs shellcheck: not found: apt-get install shellcheck",
	} {
		code, out := makeRun(t, "", env, stage)
		if code != 0 || !strings.Contains(out, "== "+stage) || !strings.Contains(out, want) {
			t.Errorf("make %s with an empty PATH: exit %d, want 0 and %q:\n%s", stage, code, want, out)
		}
		if strings.Contains(out, "Error 127") {
			t.Errorf("make %s: a bare command-not-found:\n%s", stage, out)
		}
	}
}

// The skips are listed at the end grouped by what is missing, with the
// first reason given and how many were skipped for it.
func TestMakeTest_ListsSkipsGroupedByWhatIsMissing(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=" + os.Getenv("PATH")}
	code, out := makeRun(t, stages, env, "test", "TEST_STAGES=stage-skips stage-skips-too stage-passes", "MARK="+filepath.Join(t.TempDir(), "mark"))
	if code != 0 {
		t.Errorf("exit %d:\n%s", code, out)
	}
	contains(t, out, "   frobnicator: not found: apt-get install frobnicator\n      2 skipped: make stage-skips, make stage-skips-too\n")
}

// A checkout under a path with a space runs its stages like any other.
func TestMakeTest_RunsInADirectoryWithASpace(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "with space")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	mf, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "Makefile"), mf, 0o644); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(root, "mark")
	cmd := []string{"test", "TEST_STAGES=stage-skips stage-passes", "MARK=" + mark}
	code, out := makeRunIn(t, root, stages, []string{"PATH=" + os.Getenv("PATH")}, cmd...)
	if _, err := os.Stat(mark); code != 0 || err != nil {
		t.Errorf("exit %d, mark %v:\n%s", code, err, out)
	}
	contains(t, out, "== stage-passes", "make test: passed (", "   frobnicator: not found")
	if b, err := os.ReadFile(filepath.Join(root, ".scratch", "test-skips.tsv")); err != nil || !strings.HasPrefix(string(b), "frobnicator\t") {
		t.Errorf("skip log in the checkout: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(root)); len(entries) != 1 {
		t.Errorf("make left %d entries beside %q, want none", len(entries)-1, root)
	}
}
