package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/testenv"
)

// issue 12 § 4: a run's commits come back only into a git work tree: a
// dir its enclosing repository ignores (a scratch dir inside another
// project) must not give that repository a branch; nor does a run without
// a workspace.
func TestPullWorkspace_RefusesAnIgnoredDirAndARunWithoutWorkspace(t *testing.T) {
	testenv.MustHaveCommand(t, "git", "pull writes a branch with git")
	ctx := context.Background()
	top := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", top}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(top, ".gitignore"), []byte("scratch/\n"), 0o644)
	dir := filepath.Join(top, "scratch", "w")
	os.MkdirAll(dir, 0o755)
	run := stratus.Run{ID: "r1", TaskID: "t1", WorkDir: dir, Workspace: &stratus.Workspace{Base: strings.Repeat("a", 40), Head: strings.Repeat("a", 40), Bundles: []string{"x.bundle"}}}
	_, err := PullWorkspace(ctx, fs.New(t.TempDir()), run, dir, false)
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "ignores it") {
		t.Errorf("pull into an ignored dir: %v, want EINVALID saying the repository ignores it", err)
	}
	if out, _ := exec.Command("git", "-C", top, "branch", "--list", "stratus/*").Output(); len(out) != 0 {
		t.Errorf("the enclosing repository got a branch: %s", out)
	}
	run.Workspace = nil
	if _, err := PullWorkspace(ctx, fs.New(t.TempDir()), run, top, false); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("pull of a run without a workspace: %v, want EINVALID", err)
	}
}
