package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus"
)

// uncommittedMessage is the message of the commit holding what the
// operator had not committed when the run started.
const uncommittedMessage = "stratus: uncommitted changes at run start\n"

// Pull brings a run's workspace back into the operator's repository at
// repoDir as the branch `branch` ("stratus/t1"), (re)created. It fetches the
// bundles (local file paths: the base bundle, then each step bundle in order)
// under a temporary ref namespace, removed on return, and builds on top of
// base.Origin:
//
//   - when the base snapshot differs from Origin's tree at base.Prefix
//     outside the exclude paths and the paths untracked at run start (the
//     base commit's Stratus-Untracked trailers: Freeze), a first commit
//     "stratus: uncommitted changes at run start" (parent Origin, author
//     AuthorName) holds that difference: the tracked files' edits the
//     operator had not committed, which the run built on. An untracked
//     file (the task file, another run's scratch, a file not yet added) is
//     never part of the branch, so `git merge` of it never meets a file
//     of the operator's checkout it would overwrite (README § Workspaces);
//     a step that changes such a file brings it in whole, as the run's
//     own change;
//   - then one commit per step commit (head back to base.Commit by first
//     parent, oldest first), with the step's message, author and dates,
//     whose change is exactly the step's change, moved under base.Prefix.
//     Paths the snapshot left out (a tracked .stratus/config.yaml) keep
//     their content from Origin.
//
// With base.Origin == "" (no commit when the run started) the branch
// starts with a root commit of the snapshot's content, at base.Prefix,
// the untracked paths left out as above, then the steps. The same inputs give the same commits, so pulling again
// recreates the same branch.
//
// It never touches the checked-out branch, HEAD, the index or the work
// tree: commits are built in a temporary index. It returns the branch's
// new tip and the commits it created, oldest first (none when Origin
// already holds the snapshot and there are no steps: the tip is Origin).
//
// Errors: EINVALID when repoDir is in no git repository (run `git init`
// first), or for a malformed branch name, prefix or exclude path;
// ECONFLICT when branch is checked out (in any work tree of the
// repository); ENOTFOUND when Origin, the base commit or head cannot be
// found (a repository other than the run's, or a missing bundle);
// EUNPROCESSABLE when the base or a step commit breaks the workspace
// commit rules (TreeCheck with exclude; docs/security.md § Workspace
// commits: a step commit touching an exclude path is refused, not pulled
// without it), naming the commit, the paths and the rules — nothing is
// pulled; git's error
// when a bundle cannot be fetched.
func Pull(ctx context.Context, repoDir string, base Base, bundles []string, head string, branch string, exclude []string) (tip string, commits []string, err error) {
	return PullWith(ctx, repoDir, base, bundles, head, branch, exclude, PullOptions{})
}

// PullOptions shape PullWith.
type PullOptions struct {
	// Force moves the branch even over commits Stratus did not make.
	Force bool
}

// PullWith is Pull with options. An existing branch is moved only when the
// commits it would lose (those it holds that the new tip does not) are all
// Stratus's own — a previous run's result, which the reflog keeps — unless
// o.Force: a commit of the operator's on the branch makes it ECONFLICT,
// naming the commit.
func PullWith(ctx context.Context, repoDir string, base Base, bundles []string, head string, branch string, exclude []string, o PullOptions) (tip string, commits []string, err error) {
	exclude, err = cleanExcludes("exclude", exclude)
	if err != nil {
		return "", nil, err
	}
	prefix := base.Prefix
	if prefix != "" {
		if _, err := cleanExcludes("base.prefix", []string{prefix}); err != nil || !strings.HasSuffix(prefix, "/") {
			return "", nil, stratus.FieldErrorf(stratus.EINVALID, "base.prefix", "%q is not a dir path inside the repository ending in \"/\" (such as \"sub/dir/\")", prefix)
		}
	}
	if len(bundles) == 0 {
		return "", nil, stratus.FieldErrorf(stratus.EINVALID, "bundles", "no bundle given; give the base bundle, then each step bundle in order")
	}
	top, err := gitLine(ctx, repoDir, nil, "rev-parse", "--show-toplevel")
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrNotFound) || ctx.Err() != nil:
		return "", nil, err
	case strings.Contains(err.Error(), "not a git repository"):
		return "", nil, stratus.FieldErrorf(stratus.EINVALID, "repo_dir", "%s is not in a git repository; run `git init` there first, then pull again", repoDir)
	default:
		return "", nil, err
	}
	ref := "refs/heads/" + branch
	if _, err := git(ctx, top, nil, "check-ref-format", ref); err != nil || branch == "" || strings.HasPrefix(branch, "-") {
		return "", nil, stratus.FieldErrorf(stratus.EINVALID, "branch", "%q is not a valid branch name (such as \"stratus/t1\")", branch)
	}
	if wt, err := checkedOutIn(ctx, top, ref); err != nil {
		return "", nil, err
	} else if wt != "" {
		return "", nil, stratus.FieldErrorf(stratus.ECONFLICT, "branch",
			"branch %s is checked out in %s; pull never moves a checked-out branch: switch away from it first (git switch -), then pull again", branch, wt)
	}

	tmp, err := os.MkdirTemp("", "stratus-pull-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	ienv := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	ns := "refs/stratus-pull/" + nonce()
	defer dropRefs(context.WithoutCancel(ctx), top, ns)
	if err := fetchBundles(ctx, top, nil, bundles, ns); err != nil {
		return "", nil, err
	}
	if head, err = resolveCommit(ctx, top, nil, "head", head); err != nil {
		return "", nil, err
	}
	baseSha, err := resolveCommit(ctx, top, nil, "base.commit", base.Commit)
	if err != nil {
		return "", nil, err
	}
	steps, err := Steps(ctx, top, baseSha, head)
	if err != nil {
		return "", nil, err
	}
	if err := checkCommits(ctx, top, append([]string{baseSha}, steps...), exclude); err != nil {
		return "", nil, err
	}
	raw, err := catBlobs(ctx, top, nil, append([]string{baseSha}, steps...))
	if err != nil {
		return "", nil, err
	}
	baseC := parseCommit(raw[baseSha])
	untracked, msg := untrackedOf(baseC.Message)
	baseC.Message = msg
	empty, err := gitLine(ctx, top, nil, "hash-object", "-t", "tree", os.DevNull)
	if err != nil {
		return "", nil, err
	}

	// apply moves the changes from a to b (outside the exclude paths)
	// under prefix in the temporary index and returns its tree.
	// skip names the paths whose changes stay out as well: the paths the
	// operator's repository did not track at run start, for the first
	// commit.
	apply := func(a, b string, skip []string) (string, error) {
		cs, err := diffTree(ctx, top, nil, a, b)
		if err != nil {
			return "", err
		}
		kept := cs[:0]
		for _, c := range cs {
			if !excluded(c.Path, exclude) && !untrackedPath(c.Path, skip) {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			if _, err := gitIn(ctx, top, ienv, indexInfo(prefix, kept), "update-index", "-z", "--index-info"); err != nil {
				return "", err
			}
		}
		return gitLine(ctx, top, ienv, "write-tree")
	}
	var cur string
	if base.Origin != "" {
		origin, err := resolveCommit(ctx, top, nil, "base.origin", base.Origin)
		if err != nil {
			return "", nil, stratus.FieldErrorf(stratus.ENOTFOUND, "base.origin",
				"the run started from commit %s, which is not in the repository at %s; pull into the repository the run started from", base.Origin, top)
		}
		if _, err := git(ctx, top, ienv, "read-tree", origin); err != nil {
			return "", nil, err
		}
		from, err := gitLine(ctx, top, nil, "rev-parse", "--verify", "--quiet", origin+":"+strings.TrimSuffix(prefix, "/"))
		if err != nil || prefix == "" {
			from = origin + "^{tree}"
			if prefix != "" { // the work dir was not in Origin
				from = empty
			}
		}
		tree, err := apply(from, baseSha, untracked)
		if err != nil {
			return "", nil, err
		}
		originTree, err := gitLine(ctx, top, nil, "rev-parse", origin+"^{tree}")
		if err != nil {
			return "", nil, err
		}
		cur = origin
		if tree != originTree {
			c := rawCommit{Author: ident(baseC.Committer), Committer: ident(baseC.Committer), Message: []byte(uncommittedMessage)}
			if cur, err = writeCommit(ctx, top, tree, []string{origin}, c); err != nil {
				return "", nil, err
			}
			commits = append(commits, cur)
		}
	} else {
		tree, err := apply(empty, baseSha, untracked)
		if err != nil {
			return "", nil, err
		}
		if cur, err = writeCommit(ctx, top, tree, nil, baseC); err != nil {
			return "", nil, err
		}
		commits = append(commits, cur)
	}
	prev := baseSha
	for _, s := range steps {
		tree, err := apply(prev, s, nil)
		if err != nil {
			return "", nil, err
		}
		if cur, err = writeCommit(ctx, top, tree, []string{cur}, parseCommit(raw[s])); err != nil {
			return "", nil, err
		}
		commits = append(commits, cur)
		prev = s
	}
	if len(commits) == 0 {
		return cur, nil, nil // nothing changed: no branch is made or moved
	}
	if old, err := gitLine(ctx, top, nil, "rev-parse", "--verify", "--quiet", ref); err == nil && old != "" && old != cur && !o.Force {
		// The commits the move would take off the branch: none may be the
		// operator's.
		out, err := gitLine(ctx, top, nil, "log", "--format=%H %ae", cur+".."+old)
		if err != nil {
			return "", nil, err
		}
		for _, l := range strings.Split(out, "\n") {
			if sha, email, ok := strings.Cut(l, " "); ok && email != AuthorEmail {
				return "", nil, stratus.FieldErrorf(stratus.ECONFLICT, "branch",
					"branch %s holds commit %.12s by %s, which the run's commits do not contain; it was not moved: keep it with `git branch -m %s <other name>` and pull again, or replace it with `stratus pull RUN --force`",
					branch, sha, email, branch)
			}
		}
	}
	if _, err := git(ctx, top, nil, "update-ref", "-m", "stratus pull", ref, cur); err != nil {
		return "", nil, err
	}
	return cur, commits, nil
}

// checkCommits applies the workspace commit rules (docs/security.md §
// Workspace commits), with the run's exclude list, again to the tree of
// each commit Pull brings back: the worker API checked them when the head
// moved, but the bundles come from a sink an engine could write to, and
// what lands in the operator's repository is checked where it lands. A
// commit touching an excluded path is refused, not pulled without that
// part. EUNPROCESSABLE names the commit, the paths and the rules.
func checkCommits(ctx context.Context, top string, commits []string, exclude []string) error {
	for _, c := range commits {
		es, err := lsTree(ctx, top, nil, c)
		if err != nil {
			return err
		}
		vs, err := treeViolations(ctx, top, nil, es, exclude)
		if err != nil {
			return err
		}
		if err := RulesError(stratus.EUNPROCESSABLE, "head", fmt.Sprintf("the run's commit %.12s", c), vs,
			"nothing was pulled: the worker API refuses such a commit where the run's head moves, so the run's workspace bundles were changed after it ran or the run's head moved before that check existed; do not use them"); err != nil {
			return err
		}
	}
	return nil
}

// checkedOutIn is the work tree that has ref checked out, or "".
func checkedOutIn(ctx context.Context, top, ref string) (string, error) {
	out, err := git(ctx, top, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return "", err
	}
	wt := ""
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			wt = p
		} else if line == "branch "+ref {
			return wt, nil
		}
	}
	return "", nil
}

// dropRefs deletes the refs under ns.
func dropRefs(ctx context.Context, dir, ns string) {
	out, err := git(ctx, dir, nil, "for-each-ref", "--format=delete %(refname)", ns+"/")
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return
	}
	_, _ = gitIn(ctx, dir, nil, out, "update-ref", "--stdin")
}

// rawCommit is what Pull keeps of a commit it replays.
type rawCommit struct {
	Author, Committer string // the header values: "Name <email> 1700000000 +0000"
	Encoding          string
	Message           []byte // as stored, trailing newline included
}

// parseCommit reads a commit object's headers and message.
func parseCommit(obj string) rawCommit {
	var c rawCommit
	hdr, msg, _ := strings.Cut(obj, "\n\n")
	c.Message = []byte(msg)
	for _, line := range strings.Split(hdr, "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "author":
			c.Author = v
		case "committer":
			c.Committer = v
		case "encoding":
			c.Encoding = v
		}
	}
	return c
}

// ident is AuthorName <AuthorEmail> at the date of the header value id.
func ident(id string) string {
	date := ""
	if i := strings.LastIndex(id, "> "); i >= 0 {
		date = id[i+2:]
	}
	return fmt.Sprintf("%s <%s> %s", AuthorName, AuthorEmail, date)
}

// writeCommit writes a commit object of tree with parents and c's
// author, committer and message, and returns its SHA. Built by hand
// rather than with commit-tree so a replayed commit keeps its dates and
// message byte for byte.
func writeCommit(ctx context.Context, dir, tree string, parents []string, c rawCommit) (string, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	fmt.Fprintf(&b, "author %s\ncommitter %s\n", c.Author, c.Committer)
	if c.Encoding != "" {
		fmt.Fprintf(&b, "encoding %s\n", c.Encoding)
	}
	b.WriteString("\n")
	b.Write(c.Message)
	out, err := gitIn(ctx, dir, nil, b.Bytes(), "hash-object", "-t", "commit", "-w", "--stdin")
	return strings.TrimSpace(string(out)), err
}

// Steps lists the commits from head back to, not including, base by first
// parent, oldest first: a run's step commits. It works in any repository
// holding them; empty when head is base. Errors: ENOTFOUND when base or head
// is not in dir's repository; EINVALID when base is not a first-parent
// ancestor of head.
func Steps(ctx context.Context, dir, base, head string) ([]string, error) {
	base, err := resolveCommit(ctx, dir, nil, "base", base)
	if err != nil {
		return nil, err
	}
	if head, err = resolveCommit(ctx, dir, nil, "head", head); err != nil {
		return nil, err
	}
	if head == base {
		return []string{}, nil
	}
	out, err := git(ctx, dir, nil, "rev-list", "--first-parent", "--parents", "--reverse", head, "^"+base, "--")
	if err != nil {
		return nil, err
	}
	var steps []string
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if i == 0 && (len(f) < 2 || f[1] != base) {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "head", "commit %s does not descend from the base %s by first parent", head, base)
		}
		steps = append(steps, f[0])
	}
	if len(steps) == 0 { // head is an ancestor of base
		return nil, stratus.FieldErrorf(stratus.EINVALID, "head", "commit %s does not descend from the base %s by first parent", head, base)
	}
	return steps, nil
}
