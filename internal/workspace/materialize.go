package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
)

// excludeList is where Materialize keeps the exclude paths, one per line,
// inside the git dir, for CommitStep.
const excludeList = "stratus-exclude"

// Materialize makes dir a git work tree checked out, detached, at head. dir
// is created when missing and must otherwise be empty. bundles are local file
// paths, the base bundle first and then each step bundle in order, so that
// each incremental bundle's prerequisites are in the ones before it. The
// exclude paths (relative to dir, slash-separated) go to .git/info/exclude,
// anchored ("/.stratus"), so CommitStep never commits them.
//
// Errors: EINVALID when dir is not empty, no bundle is given or an
// exclude path is malformed; ENOTFOUND when head is in none of the
// bundles; git's error when a bundle is unreadable or lacks its
// prerequisites.
func Materialize(ctx context.Context, dir string, bundles []string, head string, exclude []string) error {
	exclude, err := cleanExcludes("exclude", exclude)
	if err != nil {
		return err
	}
	if len(bundles) == 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "bundles", "no bundle given; give the base bundle, then each step bundle in order")
	}
	switch ents, err := os.ReadDir(dir); {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	case err != nil:
		return err
	case len(ents) > 0:
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "%s is not empty (it holds %s); materialize into an empty or absent dir", dir, ents[0].Name())
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	// No template: no sample hooks, nothing a machine's init.templateDir adds.
	if _, err := git(ctx, dir, nil, "init", "--quiet", "--template=", "."); err != nil {
		return err
	}
	info := filepath.Join(dir, ".git", "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return err
	}
	var patterns, list strings.Builder
	patterns.WriteString("# Stratus: paths excluded from the workspace (README § Workspaces)\n")
	for _, x := range exclude {
		patterns.WriteString("/" + escapePattern(x) + "\n")
		list.WriteString(x + "\n")
	}
	if err := os.WriteFile(filepath.Join(info, "exclude"), []byte(patterns.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", excludeList), []byte(list.String()), 0o644); err != nil {
		return err
	}
	if err := fetchBundles(ctx, dir, nil, bundles, "refs/stratus/bundles"); err != nil {
		return err
	}
	sha, err := resolveCommit(ctx, dir, nil, "head", head)
	if err != nil {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "head", "commit %s is in none of the %d bundles", head, len(bundles))
	}
	_, err = git(ctx, dir, nil, "checkout", "--quiet", "--detach", sha)
	return err
}

// fetchBundles fetches each bundle's refs to <ns>/<i>/..., in order: a
// bundle's prerequisites must be reachable from a ref (git bundle verify),
// which the earlier bundles' refs make them.
func fetchBundles(ctx context.Context, dir string, env []string, bundles []string, ns string) error {
	for i, b := range bundles {
		abs, err := filepath.Abs(b)
		if err != nil {
			return err
		}
		spec := fmt.Sprintf("+refs/*:%s/%d/*", ns, i)
		if _, err := git(ctx, dir, env, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", abs, spec); err != nil {
			return fmt.Errorf("bundle %d (%s): %w", i, b, err)
		}
	}
	return nil
}

// escapePattern makes a path a literal gitignore pattern.
func escapePattern(p string) string {
	var b strings.Builder
	for i, r := range p {
		if strings.ContainsRune(`*?[\`, r) || (r == ' ' && i == len(p)-1) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CommitStep commits everything changed in dir — `git add --all`, so
// .gitignore and .git/info/exclude hold, and the paths Materialize
// excluded are left out even when forced into the index — as one commit
// on top of parent, with message and AuthorName <AuthorEmail> as author
// and committer, and writes the incremental bundle parent..commit (ref
// refs/stratus/head) to bundlePath. dir is left checked out, detached, at the
// new commit. parent is normally dir's HEAD; commits the engine made itself
// on top of it are folded into the step's commit.
//
// When nothing changed it returns parent and changed=false, writes no
// bundle, and leaves HEAD at parent.
//
// Errors: EINVALID when the change breaks the workspace commit rules
// (TreeCheck; docs/security.md § Workspace commits: a submodule or nested
// repository, a .git component, a symlink that is absolute, resolves
// outside dir, into a .git dir or into an excluded path, a path a
// case-insensitive file system folds into an excluded one), naming the
// paths; ETOOLARGE when the
// bundle is larger than maxBytes (0 = DefaultMaxBytes), naming the
// biggest changed files — then no bundle is left and HEAD is not moved;
// ENOTFOUND when parent is not in dir's repository.
func CommitStep(ctx context.Context, dir, parent, message, bundlePath string, maxBytes int64) (sha string, changed bool, err error) {
	if maxBytes < 0 {
		return "", false, stratus.FieldErrorf(stratus.EINVALID, "max_bytes", "%d is negative; give a cap in bytes, or 0 for the default %d", maxBytes, DefaultMaxBytes)
	} else if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if bundlePath, err = filepath.Abs(bundlePath); err != nil {
		return "", false, err
	}
	if parent, err = resolveCommit(ctx, dir, nil, "parent", parent); err != nil {
		return "", false, err
	}
	gitDir, err := gitLine(ctx, dir, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", false, err
	}
	if _, err := git(ctx, dir, nil, "add", "--all", "--", ":/"); err != nil {
		if m := noCommitRe().FindAllStringSubmatch(err.Error(), -1); m != nil {
			return "", false, stratus.FieldErrorf(stratus.EINVALID, "dir",
				"submodules are refused, not flattened (docs/security.md § Workspace commits): %s is a nested git repository (without a commit); remove it", m[0][1])
		}
		return "", false, invalidPath(err, "dir", "the step's change")
	}
	var exclude []string
	if b, err := os.ReadFile(filepath.Join(gitDir, excludeList)); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		exclude = strings.Split(strings.TrimSpace(string(b)), "\n")
		rm := append([]string{"rm", "-r", "-f", "--cached", "--quiet", "--ignore-unmatch", "--"}, pathspecs("top", exclude)...)
		if _, err := git(ctx, dir, nil, rm...); err != nil {
			return "", false, err
		}
	}
	tree, err := gitLine(ctx, dir, nil, "write-tree")
	if err != nil {
		return "", false, err
	}
	cs, err := diffTree(ctx, dir, nil, parent, tree)
	if err != nil {
		return "", false, err
	}
	if len(cs) == 0 {
		// Nothing changed (or the engine's own commits net to nothing).
		if _, err := git(ctx, dir, nil, "update-ref", "--no-deref", "HEAD", parent); err != nil {
			return "", false, err
		}
		return parent, false, nil
	}
	if err := checkChanges(ctx, dir, tree, cs, exclude); err != nil {
		return "", false, err
	}
	sha, err = gitLine(ctx, dir, commitEnv(time.Time{}), "commit-tree", "-p", parent, "-m", message, tree)
	if err != nil {
		return "", false, err
	}
	if _, err := git(ctx, dir, nil, "update-ref", "refs/stratus/head", sha); err != nil {
		return "", false, err
	}
	if _, err := git(ctx, dir, nil, "bundle", "create", "--quiet", bundlePath, "refs/stratus/head", "^"+parent); err != nil {
		return "", false, err
	}
	fi, err := os.Stat(bundlePath)
	if err != nil {
		return "", false, err
	}
	if fi.Size() > maxBytes {
		os.Remove(bundlePath)
		return "", false, tooLargeStep(ctx, dir, fi.Size(), maxBytes, cs)
	}
	if _, err := git(ctx, dir, nil, "update-ref", "--no-deref", "HEAD", sha); err != nil {
		return "", false, err
	}
	return sha, true, nil
}

// checkChanges applies the workspace commit rules (docs/security.md §
// Workspace commits), with the run's exclude list, to a step's changes:
// each added or changed entry and, when a symlink was added, changed or
// removed (a removal can change where another link resolves), every entry
// of the new tree. The excluded paths themselves were taken out of the
// index: only a spelling a case-insensitive file system folds into one
// (".STRATUS/x") is left to refuse here.
func checkChanges(ctx context.Context, dir, tree string, cs []change, exclude []string) error {
	var es []entry
	links := false
	for _, c := range cs {
		if c.Status != "D" {
			es = append(es, entry{Mode: c.NewMode, Sha: c.NewSha, Path: c.Path})
		}
		links = links || c.NewMode == modeSymlink || c.OldMode == modeSymlink
	}
	if links {
		var err error
		if es, err = lsTree(ctx, dir, nil, tree); err != nil {
			return err
		}
	}
	return checkTree(ctx, dir, nil, es, exclude, "dir", "the step's change")
}

// tooLargeStep is the ETOOLARGE error of a step bundle, naming the
// biggest files the step added or changed.
func tooLargeStep(ctx context.Context, dir string, size, limit int64, cs []change) error {
	var in strings.Builder
	var paths []string
	for _, c := range cs {
		if c.Status != "D" && c.NewMode != modeGitlink {
			in.WriteString(c.NewSha + "\n")
			paths = append(paths, c.Path)
		}
	}
	out, err := gitIn(ctx, dir, nil, []byte(in.String()), "cat-file", "--batch-check=%(objectsize)")
	var sizes []sized
	if err == nil {
		for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var n int64
			if _, err := fmt.Sscan(line, &n); err == nil && i < len(paths) {
				sizes = append(sizes, sized{paths[i], n})
			}
		}
	}
	return stratus.FieldErrorf(stratus.ETOOLARGE, "dir",
		"the step's workspace bundle is %s (compressed, with git's own framing), over the cap of %s (config.yaml limits.max_snapshot_bytes: README § Workspaces); biggest changed files: %s; remove them or list them in .gitignore",
		human(size), human(limit), biggest(sizes, 5))
}
