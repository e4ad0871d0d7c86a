package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pushToMain commits files on top of the bare origin's main, as someone
// else landing a change would.
func pushToMain(t *testing.T, bare string, files map[string]string) string {
	t.Helper()
	other := t.TempDir()
	gitIn(t, other, "clone", "-q", "-b", "main", bare, ".")
	for p, body := range files {
		writeTestFile(t, filepath.Join(other, p), body)
	}
	gitIn(t, other, "add", "-A")
	gitIn(t, other, "commit", "-qm", "landed on main meanwhile")
	gitIn(t, other, "push", "-q", "origin", "HEAD:main")
	return gitIn(t, other, "rev-parse", "HEAD")
}

// worc's merge-task: the pull request a run opened is merged later; the
// base, which moved meanwhile without conflict, is merged into the branch
// first by the orchestrator's merge commit (two parents, never a
// force-push), then the pull request is squash-merged and the run says so.
func TestMergeTask_CleanBaseMergeThenMerge(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "")
	if r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	branchTip := gitIn(t, bare, "rev-parse", "stratus/t-implementation")
	landed := pushToMain(t, bare, map[string]string{"NOTES.md": "notes\n"})
	r := runCLIEnv(t, tokenEnv(), "merge-task", "t-implementation", "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("merge-task: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "merged main into stratus/t-implementation cleanly") || !strings.Contains(r.stderr, "pull request #1 ") || !strings.Contains(r.stderr, "merged (squash)") {
		t.Errorf("merge-task said:\n%s", r.stderr)
	}
	tip := gitIn(t, bare, "rev-parse", "stratus/t-implementation")
	if parents := gitIn(t, bare, "log", "-1", "--format=%P", tip); parents != branchTip+" "+landed {
		t.Errorf("the branch's merge commit has parents %q, want the old tip and main (%s %s)", parents, branchTip, landed)
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || !pulls[0].Merged || pulls[0].MergeMethod != "squash" {
		t.Fatalf("pull requests: %+v", pulls)
	}
	for _, p := range []string{"NOTES.md", "cmd/hello/main.go"} {
		gitIn(t, bare, "cat-file", "-e", "main:"+p)
	}
	st := pubStatus(t, dir, "t-implementation")
	prj, _ := st["publication"].(map[string]any)["pull_request"].(map[string]any)
	if prj["state"] != "merged" || prj["merge_sha"] != gitIn(t, bare, "rev-parse", "main") {
		t.Errorf("status pull request %v", prj)
	}
	// Again: merged already, said, exit 0.
	if r := runCLIEnv(t, tokenEnv(), "merge-task", "t-implementation", "--dir", dir); r.code != ExitOK || !strings.Contains(r.stderr, "is merged already") {
		t.Errorf("merge-task again: exit %d\n%s", r.code, r.stderr)
	}
}

// A base merge that stops on conflicts runs git.merge_flow (the built-in
// merge flow: the script engine resolves the markers, the checks look for
// markers left) on a clone of the branch; its result is the merge commit,
// pushed, and the pull request merges.
func TestMergeTask_ConflictRunsTheMergeFlow(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "")
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, strings.Replace(readFile(t, cfg), "checks:\n", "checks:\n  command_sets:\n    markers:\n      commands:\n        - {name: no-markers, argv: [sh, -c, \"! grep -rn '^<<<<<<< ' --exclude-dir=.git --exclude-dir=.stratus .\"]}\n", 1))
	scen := filepath.Join(dir, ".stratus/scenario.yaml")
	writeTestFile(t, scen, strings.Replace(readFile(t, scen), "nodes:\n", `nodes:
  conflict_resolution:
    - files:
        cmd/hello/main.go: |
          package main

          // resolved: both sides kept
          func main() {}
      report: "Resolved cmd/hello/main.go keeping both sides."
`, 1))
	if r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	branchTip := gitIn(t, bare, "rev-parse", "stratus/t-implementation")
	landed := pushToMain(t, bare, map[string]string{"cmd/hello/main.go": "package main\n\n// main's own greeting\nfunc main() {}\n"})
	r := runCLIEnv(t, tokenEnv(), "merge-task", "t-implementation", "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("merge-task: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "stopped on conflicts in cmd/hello/main.go: running flow merge") || !strings.Contains(r.stderr, "conflict_resolution#1") {
		t.Errorf("merge-task said:\n%s", r.stderr)
	}
	tip := gitIn(t, bare, "rev-parse", "stratus/t-implementation")
	if parents := gitIn(t, bare, "log", "-1", "--format=%P", tip); parents != branchTip+" "+landed {
		t.Errorf("merge commit parents %q, want %s %s", parents, branchTip, landed)
	}
	if got := gitIn(t, bare, "show", tip+":cmd/hello/main.go"); !strings.Contains(got, "resolved: both sides kept") {
		t.Errorf("the resolution is not the merge commit's:\n%s", got)
	}
	if pulls := srv.Pulls("acme/app"); len(pulls) != 1 || !pulls[0].Merged {
		t.Fatalf("pull requests: %+v", pulls)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".stratus/merges")); len(entries) != 0 {
		t.Errorf("the merge clone was left behind after a merge: %v", entries)
	}
}

// Bad input: a run that opened no pull request, a bad strategy.
func TestMergeTask_BadInput(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "merge-task", "t-implementation", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "opened no pull request") {
		t.Errorf("no PR: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "merge-task", "nosuch", "--dir", dir); r.code != ExitUsage {
		t.Errorf("no such run: exit %d\n%s", r.code, r.stderr)
	}
}
