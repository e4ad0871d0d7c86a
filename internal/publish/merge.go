package publish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/workspace"
)

// BaseMergeSpec is a merge of the base branch into a task branch
// (worc configuration.md § `git`: merge_flow, `merge-task`).
type BaseMergeSpec struct {
	Dir    string // a new directory: the clone the merge is made in
	Remote string // the remote's name, for messages ("origin")
	URL    string // the remote's URL
	Branch string // the task branch
	Base   string // the base branch (git.pr_base)
	Token  string // the git host's token (Spec.Token)
}

// BaseMerge is the state of a base merge in BaseMergeSpec.Dir.
type BaseMerge struct {
	RemoteName string // the remote's name in Dir (Push's Spec.Remote)
	BranchTip  string // the task branch's tip on the remote
	BaseTip    string // the base branch's tip on the remote
	// UpToDate: the branch already holds the base; nothing was merged.
	UpToDate bool
	// Head is the merge commit (the orchestrator's) when the merge was
	// clean; "" when it stopped on conflicts.
	Head string
	// Conflicts are the paths the merge left conflicted (markers in the
	// work tree of Dir, the task branch checked out), sorted.
	Conflicts []string
}

// MergeBase clones the task branch and the base from the remote into
// spec.Dir, checks out the branch and merges the base into it: up to date,
// a clean merge committed by the orchestrator (workspace.AuthorName, no
// hooks), or stopped on conflicts, the work tree holding the markers for
// the merge flow to resolve (CommitMerge then makes the merge commit of
// the resolution). Nothing is pushed.
//
// Errors: *PushError (Fetch) for a remote that refuses or has no such
// branch (ENOTFOUND naming it); git's errors.
func MergeBase(ctx context.Context, spec BaseMergeSpec) (*BaseMerge, error) {
	name := spec.Remote
	if !remoteNameRe().MatchString(name) {
		name = "publish"
	}
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, err
	}
	env := gitwork.ConfigEnv(gitwork.FixedConfig()...)
	if _, err := gitwork.Run(ctx, spec.Dir, env, "init", "--quiet"); err != nil {
		return nil, err
	}
	if _, err := gitwork.Run(ctx, spec.Dir, env, "remote", "add", "--", name, spec.URL); err != nil {
		return nil, err
	}
	ps := Spec{Dir: spec.Dir, Remote: name, Branch: spec.Branch, Token: spec.Token}
	for _, b := range []struct{ branch, ref string }{{spec.Branch, "refs/stratus-merge/branch"}, {spec.Base, "refs/stratus-merge/base"}} {
		ok, err := Fetch(ctx, ps, true, "+refs/heads/"+b.branch+":"+b.ref)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "branch", "remote %s (%s) has no branch %s; push it (or publish the run again: stratus resume), then merge again", spec.Remote, spec.URL, b.branch)
		}
	}
	m := &BaseMerge{RemoteName: name, BranchTip: revParse(ctx, spec.Dir, "refs/stratus-merge/branch"), BaseTip: revParse(ctx, spec.Dir, "refs/stratus-merge/base")}
	if _, err := gitwork.Run(ctx, spec.Dir, env, "checkout", "--quiet", "-B", "stratus-merge", m.BranchTip); err != nil {
		return nil, err
	}
	if _, err := gitwork.Run(ctx, spec.Dir, nil, "merge-base", "--is-ancestor", m.BaseTip, m.BranchTip); err == nil {
		m.UpToDate, m.Head = true, m.BranchTip
		return m, nil
	}
	cenv := append(env, "GIT_AUTHOR_NAME="+workspace.AuthorName, "GIT_AUTHOR_EMAIL="+workspace.AuthorEmail,
		"GIT_COMMITTER_NAME="+workspace.AuthorName, "GIT_COMMITTER_EMAIL="+workspace.AuthorEmail)
	_, merr := gitwork.Run(ctx, spec.Dir, cenv, "merge", "--no-ff", "--no-verify", "-m", MergeMessage(spec.Base, spec.Branch), m.BaseTip)
	if merr == nil {
		m.Head = revParse(ctx, spec.Dir, "HEAD")
		return m, nil
	}
	out, err := gitwork.Run(ctx, spec.Dir, nil, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return nil, err
	}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			m.Conflicts = append(m.Conflicts, p)
		}
	}
	if len(m.Conflicts) == 0 {
		return nil, fmt.Errorf("merge %s into %s: %w", spec.Base, spec.Branch, merr)
	}
	return m, nil
}

// MergeMessage is the message of the orchestrator's base-merge commit.
func MergeMessage(base, branch string) string {
	return fmt.Sprintf("Merge branch '%s' into %s", base, branch)
}

// ErrMarkersLeft is returned by CommitMerge when a resolved file still
// holds a conflict marker.
var ErrMarkersLeft = errors.New("conflict markers left")

// CommitMerge makes the base merge's commit in dir (a MergeBase clone):
// the tree of resolved (a commit whose tree is the merge flow's
// resolution), parents m.BranchTip and m.BaseTip, by the orchestrator. A
// path of m.Conflicts that still holds a line starting with a conflict
// marker is ErrMarkersLeft, naming the paths: nothing is committed.
func CommitMerge(ctx context.Context, dir string, m *BaseMerge, resolved, message string) (string, error) {
	var left []string
	for _, p := range m.Conflicts {
		out, err := gitwork.Run(ctx, dir, nil, "show", resolved+":"+p)
		if err != nil {
			continue // deleted by the resolution
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") {
				left = append(left, p)
				break
			}
		}
	}
	if len(left) > 0 {
		return "", fmt.Errorf("%w in %s: the merge flow did not resolve them; resolve them by hand and push the branch, or run merge-task again", ErrMarkersLeft, strings.Join(left, ", "))
	}
	tree := revParse(ctx, dir, resolved+"^{tree}")
	if tree == "" {
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, "resolved", "%s names no commit in %s", resolved, dir)
	}
	env := append(gitwork.ConfigEnv(gitwork.FixedConfig()...), "GIT_AUTHOR_NAME="+workspace.AuthorName, "GIT_AUTHOR_EMAIL="+workspace.AuthorEmail,
		"GIT_COMMITTER_NAME="+workspace.AuthorName, "GIT_COMMITTER_EMAIL="+workspace.AuthorEmail)
	return gitIn(ctx, dir, env, message+"\n", "commit-tree", tree, "-p", m.BranchTip, "-p", m.BaseTip)
}
