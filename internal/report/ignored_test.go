package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/contracts.md § The summary artifacts: the changed paths come from git
// status of the work dir; a work dir its enclosing repository ignores (make
// demo's .scratch/demo) has none git can list, so the report says it is not a
// git repository rather than "no uncommitted change".
func TestChanges_IgnoredWorkDirIsNotAGitRepository(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	outer := t.TempDir()
	if err := os.WriteFile(filepath.Join(outer, ".gitignore"), []byte("/.scratch/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore"}, {"commit", "-q", "-m", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", outer, "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	dir := filepath.Join(outer, ".scratch", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n"), 0o644)
	c := changedPaths(context.Background(), dir, "workspace/tasks/t1/ctx")
	if c.Git || !strings.Contains(c.Note, "not a git repository") || !strings.Contains(c.Note, "ignores it") {
		t.Errorf("changes of an ignored work dir = %+v", c)
	}
}
