package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/testenv"
)

// A run's commits come back only into a git work tree: a dir its enclosing
// repository ignores (a scratch dir inside another project) must not give
// that repository a branch; nor does a run without a workspace.
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

// README § Workspaces: unset, the workspace mode is worktree in a git work
// tree with a commit, and in-place anywhere else, with one line saying no
// branch will be made and why; a mode the config or task names wins.
func TestResolveWorkspace_WorktreeWhereGitCanMakeABranch(t *testing.T) {
	testenv.MustHaveCommand(t, "git", "the default depends on git")
	ctx := context.Background()
	git := func(dir string, args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	repo := t.TempDir()
	git(repo, "init", "-q")
	git(repo, "commit", "-q", "--allow-empty", "-m", "x")
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("scratch/\n"), 0o644)
	scratch := filepath.Join(repo, "scratch", "demo")
	os.MkdirAll(scratch, 0o755)
	empty := t.TempDir()
	git(empty, "init", "-q")
	plain := t.TempDir()
	cfgWorkdir := &config.Config{Workspace: config.WorkspaceWorkDir}
	taskWorktree := &task.Task{Front: map[string]any{"workspace": config.WorkspaceWorktree}}
	for _, c := range []struct {
		name, dir string
		cfg       *config.Config
		tk        *task.Task
		mode      string
		note      string // "" = none
	}{
		{"a repository with a commit", repo, &config.Config{}, nil, config.WorkspaceWorktree, ""},
		{"config names workdir", repo, cfgWorkdir, nil, config.WorkspaceWorkDir, ""},
		{"the task names worktree", plain, cfgWorkdir, taskWorktree, config.WorkspaceWorktree, ""},
		{"no repository", plain, &config.Config{}, nil, config.WorkspaceWorkDir, "no git repository contains it"},
		{"a repository without a commit", empty, &config.Config{}, nil, config.WorkspaceWorkDir, "has no commit yet"},
		{"a dir the repository ignores", scratch, &config.Config{}, nil, config.WorkspaceWorkDir, "ignores it"},
	} {
		mode, note := ResolveWorkspace(ctx, c.cfg, c.tk, c.dir)
		if mode != c.mode || (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
			t.Errorf("%s: mode %q, note %q; want %q, a note saying %q", c.name, mode, note, c.mode, c.note)
		}
		if c.note != "" && (strings.Contains(note, "\n") || !strings.Contains(note, "no branch will be made")) {
			t.Errorf("%s: note %q is not one line saying no branch will be made", c.name, note)
		}
	}
}

// A run that ended done is offered the merge; one that did not (parked,
// failed, interrupted) is told its branch holds work its flow never
// accepted, and is never told to merge it.
func TestPulledLine_OnlyADoneRunIsOfferedTheMerge(t *testing.T) {
	p := &Pulled{Branch: "stratus/t1", Tip: "0123456789abcdef", Commits: []string{"a", "b"}}
	for status, merge := range map[string]bool{
		stratus.RunDone: true, stratus.RunManualActionRequired: false, stratus.RunFailed: false, stratus.RunInterrupted: false,
	} {
		line := PulledLine(stratus.Run{ID: "r1", TaskID: "t1", Status: status}, "/w", p)
		if got := strings.Contains(line, "git merge"); got != merge {
			t.Errorf("%s: offers the merge %v, want %v: %s", status, got, merge, line)
		}
		if !merge && !strings.Contains(line, "ended "+status) {
			t.Errorf("%s: the line does not say how the run ended: %s", status, line)
		}
	}
}
