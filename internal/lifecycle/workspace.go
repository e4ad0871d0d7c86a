package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/publish"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/workspace"
)

// stateDirName is the work dir's Stratus state dir (worker.StateDirName).
const stateDirName = ".stratus"

// Frozen is what FreezeWorkspace did: the run's workspace record and the
// figures of its base snapshot.
type Frozen struct {
	Workspace   *stratus.Workspace
	Files       int
	Bytes       int64 // the sum of the snapshot's file sizes
	BundleBytes int64
	Took        time.Duration
}

// FreezeWorkspace freezes a run's work dir as its base snapshot
// (docs/architecture.md § Workspaces): one parentless commit of its tracked and
// untracked files, .gitignore honoured, the state dir and the run's ctx dir
// (resolved from placement: config.yaml's projection.placement, or
// projection.StatePlacement, which the record then notes as StateCtx) left out,
// stored as a git bundle at <keys>/base.bundle in sk (keys:
// worker.WorkspaceKeys). The returned record names root (the path payloads
// render the workspace under; worker.WorkspaceRoot) and starts with its head at
// the base. The snapshot is capped by config limits.max_snapshot_bytes (0 = 256
// MiB).
//
// Errors: workspace.Freeze's (ETOOLARGE naming the biggest paths;
// EINVALID for a submodule or a symlink leaving the tree); the sink's.
func FreezeWorkspace(ctx context.Context, sk sink.Sink, keys, root, workDir string, cfg *config.Config, taskID, placement string) (*Frozen, error) {
	ctxDir, err := projection.CtxDir(placement, taskID)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "stratus-freeze-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	started := time.Now()
	exclude := []string{stateDirName, ctxDir}
	bundle := filepath.Join(tmp, "base.bundle")
	base, err := workspace.Freeze(ctx, workDir, bundle, workspace.FreezeOptions{Exclude: exclude, MaxBytes: cfg.Limits.MaxSnapshotBytes,
		Message: "stratus: workspace of task " + taskID})
	if err != nil {
		return nil, fmt.Errorf("freeze the workspace %s: %w", workDir, err)
	}
	body, err := os.ReadFile(bundle)
	if err != nil {
		return nil, err
	}
	key := path.Join(keys, "base.bundle")
	if err := sk.Put(ctx, key, body); err != nil {
		return nil, fmt.Errorf("store the workspace's base bundle: %w", err)
	}
	ws := &stratus.Workspace{Root: root, Base: base.Commit, Origin: base.Origin, Prefix: base.Prefix, Exclude: exclude,
		Head: base.Commit, Bundles: []string{key}, StateCtx: placement == projection.StatePlacement,
		// Where a publish step pushes (docs/architecture.md § Publishing):
		// read here, on the operator's machine, for workers that have none.
		Remote: publish.RemoteOf(ctx, workDir, cfg.Git.RemoteName())}
	return &Frozen{Workspace: ws, Files: base.Files, Bytes: base.Bytes, BundleBytes: int64(len(body)), Took: time.Since(started)}, nil
}

// ReuseWorkspace gives a run of task taskID the base snapshot of workspace
// from (another run's, frozen by FreezeWorkspace from the same work dir):
// its base bundle is copied to <keys>/base.bundle in sk, and the record is
// from's with the run's root, its head at the base and its own ctx dir
// excluded (placement as FreezeWorkspace's). A task file written straight
// into a stack's task pool runs on the snapshot of the pool's last submit
// (README.md § Task pool): no work dir is at hand to freeze. Errors:
// EINVALID for a record without a base bundle; the sink's.
func ReuseWorkspace(ctx context.Context, sk sink.Sink, from *stratus.Workspace, keys, root, taskID, placement string) (*stratus.Workspace, error) {
	if from == nil || len(from.Bundles) == 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "the workspace to reuse has no base bundle")
	}
	if from.StateCtx {
		placement = projection.StatePlacement
	}
	ctxDir, err := projection.CtxDir(placement, taskID)
	if err != nil {
		return nil, err
	}
	body, err := sk.Get(ctx, from.Bundles[0])
	if err != nil {
		return nil, fmt.Errorf("read the workspace's base bundle: %w", err)
	}
	key := path.Join(keys, "base.bundle")
	if err := sk.Put(ctx, key, body); err != nil {
		return nil, fmt.Errorf("store the workspace's base bundle: %w", err)
	}
	ws := *from
	ws.Root, ws.Head, ws.Bundles, ws.Exclude = root, from.Base, []string{key}, []string{stateDirName, ctxDir}
	return &ws, nil
}

// WorkspaceMode is the workspace mode an embedded run's task or config
// names: the task's front matter workspace, else config.yaml's, else "" (none
// named: ResolveWorkspace decides).
func WorkspaceMode(cfg *config.Config, tk *task.Task) string {
	if tk != nil {
		if m, ok := tk.Front["workspace"].(string); ok && m != "" {
			return m
		}
	}
	if cfg != nil && cfg.Workspace != "" {
		return cfg.Workspace
	}
	return ""
}

// ResolveWorkspace is where an embedded run's engines work (README §
// Workspaces): the mode the task or config names (WorkspaceMode), else
// config.WorkspaceWorktree when workDir is a git work tree with a commit
// — the engines get checkouts of their own and the run's commits come
// back as a branch, the operator's checkout untouched — else
// config.WorkspaceWorkDir, with note saying, for one line on stderr, that
// no branch will be made and why (no repository, one that ignores
// workDir, no commit yet, git not installed). A failure of git itself
// reads as no work tree: the run still starts, in place, and says so.
func ResolveWorkspace(ctx context.Context, cfg *config.Config, tk *task.Task, workDir string) (mode, note string) {
	if m := WorkspaceMode(cfg, tk); m != "" {
		return m, ""
	}
	tree, err := gitwork.Open(ctx, workDir)
	if err == nil {
		if _, err = tree.Head(ctx); err == nil {
			return config.WorkspaceWorktree, ""
		}
	}
	why := gitwork.Reason(err)
	if why == "" {
		why = err.Error()
	}
	return config.WorkspaceWorkDir, fmt.Sprintf("engines work in %s itself and no branch will be made: it is not a git work tree with a commit (%s); "+
		"once it is one (git init, a first commit), runs work in checkouts of their own and come back as a branch (README § Workspaces)", workDir, why)
}

// Pulled is what PullWorkspace did.
type Pulled struct {
	Branch  string
	Tip     string
	Commits []string // oldest first
	// Uncommitted: the first commit holds the tracked files' changes the
	// operator had not committed at run start (workspace.Pull), which the
	// operator's checkout still holds: set aside, they come back with the
	// merge.
	Uncommitted bool
}

// PulledLine says what a pull did, for a progress line: the branch, its
// tip and commits, or that the run changed nothing.
func PulledLine(run stratus.Run, dir string, p *Pulled) string {
	if len(p.Commits) == 0 {
		return fmt.Sprintf("run %s made no commit in its workspace: no branch %s made", run.ID, p.Branch)
	}
	n := "1 commit"
	if len(p.Commits) != 1 {
		n = fmt.Sprintf("%d commits", len(p.Commits))
	}
	line := fmt.Sprintf("pulled run %s into %s: branch %s at %.12s (%s); see it with git log --stat %s, take it with git merge %s", run.ID, dir, p.Branch, p.Tip, n, p.Branch, p.Branch)
	if run.Status != stratus.RunDone {
		// A run that did not end done (parked, failed, cancelled) left
		// work its flow never accepted: say so, and never invite the merge.
		line = fmt.Sprintf("pulled run %s into %s: branch %s at %.12s (%s) holds the work of a run that ended %s, which its flow never accepted; see it with git log --stat %s before you take any of it",
			run.ID, dir, p.Branch, p.Tip, n, run.Status, p.Branch)
	}
	if p.Uncommitted {
		line += " (its first commit holds your uncommitted changes at run start: set them aside first, git stash, and the merge brings them back)"
	}
	return line
}

// PullBranch is the branch a run's commits come back as: stratus/<task id>.
func PullBranch(run stratus.Run) string { return "stratus/" + run.TaskID }

// PullWorkspace brings a run's workspace back into the repository at
// repoDir as branch PullBranch(run): the run's bundles are read from sk and
// the branch is recreated on the operator's HEAD at run start
// (workspace.Pull: the uncommitted changes the snapshot took first, then one
// commit per step). The checked-out branch, the index and the work tree are
// never touched; a run that changed nothing makes no branch (Pulled.Commits
// empty); a branch holding commits of the operator's is not moved unless
// force (ECONFLICT).
//
// Errors: EINVALID for a run without a workspace or a repoDir in no git
// repository; workspace.Pull's; the sink's.
func PullWorkspace(ctx context.Context, sk sink.Sink, run stratus.Run, repoDir string, force bool) (*Pulled, error) {
	ws := run.Workspace
	if !run.PrunedAt.IsZero() {
		return nil, stratus.PrunedError(run, "pull its commits")
	}
	if ws == nil {
		return nil, stratus.Errorf(stratus.EINVALID, "run %s has no workspace to pull: its engines worked in %s itself", run.ID, run.WorkDir)
	}
	// A dir its enclosing repository ignores (a scratch dir inside another
	// project) is not that repository's to get a branch.
	if _, err := gitwork.Open(ctx, repoDir); errors.Is(err, gitwork.ErrNotTree) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "dir", "%s is not a git work tree (%s): run `git init` there first, then pull again", repoDir, gitwork.Reason(err))
	} else if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "stratus-pull-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var files []string
	for i, k := range ws.Bundles {
		body, err := sk.Get(ctx, k)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			return nil, FilesGone(run, k, "pull its commits")
		} else if err != nil {
			return nil, fmt.Errorf("read the run's bundle %s: %w", k, err)
		}
		f := filepath.Join(tmp, fmt.Sprintf("%03d.bundle", i))
		if err := os.WriteFile(f, body, 0o600); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	branch := PullBranch(run)
	tip, commits, err := workspace.PullWith(ctx, repoDir, workspace.Base{Commit: ws.Base, Origin: ws.Origin, Prefix: ws.Prefix}, files, ws.Head, branch, ws.Exclude,
		workspace.PullOptions{Force: force})
	if err != nil {
		return nil, err
	}
	// One commit per step, and one more before them for the changes
	// uncommitted at run start (on an Origin: without one, the first is
	// the root commit of the snapshot).
	uncommitted := ws.Origin != "" && len(commits) == len(ws.Bundles)
	return &Pulled{Branch: branch, Tip: tip, Commits: commits, Uncommitted: uncommitted}, nil
}
