package nodeexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// worc configuration.md § Diff-based selection needs the work tree's diff:
// a work dir its enclosing repository ignores (make demo's .scratch/demo)
// has none git can list, so it is not a git work tree and every command
// set runs — an empty diff there would pass the node vacuously.
func TestRunChecks_IgnoredWorkDirRunsEverySet(t *testing.T) {
	t.Parallel()
	outer := t.TempDir()
	gitRun(t, outer, "init", "-q")
	writeExec(t, filepath.Join(outer, ".gitignore"), "/.scratch/\n")
	gitRun(t, outer, "add", ".gitignore")
	gitRun(t, outer, "commit", "-q", "-m", "base")
	dir := filepath.Join(outer, ".scratch", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(dir, "main.go"), "package main\n")
	res, err := RunChecks(context.Background(), checksSpec(dir,
		CommandSet{Name: "all", TimeoutSeconds: 60, Commands: []Command{sh("a", "true")}},
		CommandSet{Name: "docs", Paths: []string{"**/*.md"}, TimeoutSeconds: 60, Commands: []Command{sh("d", "true")}},
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Selection != SelectedAll || !strings.Contains(res.Note, "not a git work tree") || !strings.Contains(res.Note, "ignores it") || len(res.Runs) != 2 {
		t.Errorf("selection %q, note %q, %d runs; want every set run because the dir is ignored", res.Selection, res.Note, len(res.Runs))
	}
}
