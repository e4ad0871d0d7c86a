package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
)

// FreezeOptions shape Freeze.
type FreezeOptions struct {
	// Exclude are paths relative to the work dir, slash-separated, left
	// out of the snapshot with everything under them (".stratus",
	// "workspace/tasks/t1/ctx"), tracked or not.
	Exclude []string
	// MaxBytes caps the snapshot: the sum of its file sizes, in bytes.
	// 0 means DefaultMaxBytes.
	MaxBytes int64
	// Message is the commit message; "" means "stratus: workspace base".
	Message string
	// Time is the commit's author and committer date; zero means now. The
	// same content, message and time give the same commit SHA.
	Time time.Time
}

// Base is a frozen workspace: the base snapshot commit and where it came
// from.
type Base struct {
	Commit string // the snapshot commit: one commit, no parents, so its bundle holds just the tree
	Tree   string // the snapshot commit's tree
	Origin string // the operator's HEAD commit at freeze time; "" when the work dir is in no git repository, or the repository has no commit
	Prefix string // the work dir's path inside its repository, slash-separated with a trailing "/" ("sub/dir/"); "" at the top or outside a repository
	Files  int    // files in the snapshot, symlinks included
	Bytes  int64  // the sum of the snapshot's file sizes, in bytes
	// Untracked are the snapshot's paths that the operator's repository
	// did not track at freeze time (not in its index), relative to the
	// work dir, slash-separated, sorted; a dir all of whose files were
	// untracked is named once ("notes"), and "." means the work dir
	// itself was untracked. Nil outside a repository. The base commit's
	// message records them (Stratus-Untracked trailers), so the bundle
	// alone tells Pull what to leave out of the branch.
	Untracked []string
}

// Freeze snapshots the content of workDir into one parentless commit and
// writes a git bundle of it, holding the ref refs/stratus/base, to
// bundlePath.
//
// The content is the work tree as a commit of everything would have it:
// tracked and untracked files, .gitignore (and the repository's
// info/exclude and the user's excludes file) honoured — a tracked file
// that matches .gitignore is still included, as git treats it — and the
// Exclude paths left out. A dir in no git repository works too: then it is
// every file under it that the .gitignore files inside it do not ignore.
// In a repository, the paths its index does not track are named in
// Base.Untracked and in the commit's message, so that Pull leaves them
// out of the branch while the engines still see them (README §
// Workspaces).
//
// The operator's repository is not changed: no index change, no ref or
// HEAD change, no object written. The snapshot is staged in a temporary
// git dir that borrows the repository's objects (objects/info/alternates)
// with a copy of its index (so unchanged files are not hashed again), then
// discarded.
//
// Errors: ETOOLARGE when the sum of the file sizes exceeds MaxBytes, naming
// the total, the cap and the five biggest paths; EINVALID when the snapshot
// breaks the workspace commit rules (TreeCheck;
// docs/security.md § Workspace commits: a submodule or nested git repository,
// refused and not flattened, a .git component, a symlink whose target is
// absolute or resolves outside workDir, into a .git dir or into an Exclude
// path), naming the paths; EINVALID for a workDir that is not a directory or
// a malformed exclude path. Symlinks inside the tree are kept as symlinks;
// binary files are kept as they are.
func Freeze(ctx context.Context, workDir, bundlePath string, o FreezeOptions) (*Base, error) {
	if fi, err := os.Stat(workDir); err != nil || !fi.IsDir() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "work_dir", "%s is not a directory", workDir)
	}
	exclude, err := cleanExcludes("exclude", o.Exclude)
	if err != nil {
		return nil, err
	}
	limit := o.MaxBytes
	if limit < 0 {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "max_bytes", "%d is negative; give a cap in bytes, or 0 for the default %d", limit, DefaultMaxBytes)
	} else if limit == 0 {
		limit = DefaultMaxBytes
	}
	message := o.Message
	if message == "" {
		message = "stratus: workspace base"
	}
	if bundlePath, err = filepath.Abs(bundlePath); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "stratus-freeze-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	gitDir := filepath.Join(tmp, "git")
	env := []string{"GIT_DIR=" + gitDir, "GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}

	base := &Base{}
	top, cwd, inRepo := "", "", false
	tree, err := gitwork.Open(ctx, workDir)
	switch {
	case err == nil:
		inRepo = true
		if base.Origin, err = borrow(ctx, tree, gitDir, filepath.Join(tmp, "index")); err != nil {
			return nil, err
		}
		top, cwd, base.Prefix = tree.Root, filepath.Join(tree.Root, filepath.FromSlash(tree.Prefix)), tree.Prefix
	case errors.Is(err, gitwork.ErrNotTree) && !strings.Contains(gitwork.Reason(err), "not installed"):
		// No repository (or one that ignores the dir): the dir alone, its
		// own .gitignore files honoured.
		if err := initGitDir(gitDir, "", nil); err != nil {
			return nil, err
		}
		if top, err = filepath.Abs(workDir); err != nil {
			return nil, err
		}
		cwd = top
	default:
		return nil, err
	}
	env = append(env, "GIT_WORK_TREE="+top)
	if inRepo {
		if base.Untracked, err = untracked(ctx, cwd, env, exclude); err != nil {
			return nil, err
		}
		message = withUntracked(message, base.Untracked)
	}

	// git add refuses a pathspec, even an exclude one, that names a path
	// .gitignore ignores (an operator ignoring .stratus/): such a path is
	// left out of the add anyway, and the rm below takes out what the
	// index tracks under it.
	add := append([]string{"add", "--all", "--", "."}, pathspecs("exclude", gitwork.NotIgnored(ctx, cwd, gitEnv(env), exclude))...)
	if _, err := git(ctx, cwd, env, add...); err != nil {
		if m := noCommitRe().FindAllStringSubmatch(err.Error(), -1); m != nil {
			var paths []string
			for _, s := range m {
				paths = append(paths, s[1])
			}
			return nil, stratus.FieldErrorf(stratus.EINVALID, "work_dir",
				"submodules are refused, not flattened (docs/security.md § Workspace commits): %s %s a nested git repository (without a commit), whose content cannot travel with the run; remove it or list it in .gitignore (embedded, workspace: workdir works in the work dir itself)",
				strings.Join(paths, ", "), isAre(len(paths)))
		}
		return nil, invalidPath(err, "work_dir", "the workspace snapshot of "+workDir)
	}
	if len(exclude) > 0 {
		// Tracked files under an excluded path stay in the copied index:
		// take them out.
		// -f: a tracked file edited since its commit (a config.yaml just
		// changed) is taken out of the copied index all the same.
		rm := append([]string{"rm", "-r", "-f", "--cached", "--quiet", "--ignore-unmatch", "--"}, pathspecs("", exclude)...)
		if _, err := git(ctx, cwd, env, rm...); err != nil {
			return nil, err
		}
	}
	if base.Tree, err = writeTree(ctx, cwd, env, base.Prefix); err != nil {
		return nil, err
	}

	es, err := lsTree(ctx, cwd, env, base.Tree)
	if err != nil {
		return nil, err
	}
	if err := checkTree(ctx, cwd, env, es, exclude, "work_dir", "the workspace snapshot of "+workDir); err != nil {
		return nil, err
	}
	var sizes []sized
	for _, e := range es {
		base.Files++
		base.Bytes += e.Size
		sizes = append(sizes, sized{e.Path, e.Size})
	}
	if base.Bytes > limit {
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "work_dir",
			"the workspace snapshot of %s is %s, over the cap of %s (config.yaml limits.max_snapshot_bytes: README § Workspaces); biggest paths: %s; list them in .gitignore, or raise limits.max_snapshot_bytes",
			workDir, human(base.Bytes), human(limit), biggest(sizes, 5))
	}

	if base.Commit, err = gitLine(ctx, cwd, append(env, commitEnv(o.Time)...), "commit-tree", "-m", message, base.Tree); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(gitDir, "refs", "stratus", "base"), []byte(base.Commit+"\n"), 0o644); err != nil {
		return nil, err
	}
	// No delta search: a snapshot holds one version of each file, so it
	// finds little (this repository's bundle: 0.6% smaller, 3× slower);
	// deltas already in the operator's packs are still reused.
	if _, err := git(ctx, cwd, env, "-c", "pack.window=0", "bundle", "create", "--quiet", bundlePath, "refs/stratus/base"); err != nil {
		return nil, err
	}
	return base, nil
}

// untrackedTrailer starts each line of a base commit's message that names
// a path untracked at freeze time: the key, then the path as a Go string
// literal (a path may hold any byte but NUL).
const untrackedTrailer = "Stratus-Untracked: "

// untracked lists the work dir's paths that the index in env does not
// track and .gitignore does not ignore, relative to cwd, outside exclude
// (Base.Untracked): a wholly untracked dir is named once, "." when cwd
// itself is one.
func untracked(ctx context.Context, cwd string, env []string, exclude []string) ([]string, error) {
	out, err := git(ctx, cwd, env, "ls-files", "-z", "--others", "--exclude-standard", "--directory", "--no-empty-directory", "--", ".")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" {
			continue
		}
		if p = strings.TrimSuffix(p, "/"); p == "." {
			return []string{"."}, nil
		}
		if !excluded(p, exclude) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, nil
}

// withUntracked is message with one Stratus-Untracked trailer per path.
func withUntracked(message string, paths []string) string {
	if len(paths) == 0 {
		return message
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(message, "\n"))
	b.WriteString("\n\n")
	for _, p := range paths {
		b.WriteString(untrackedTrailer + strconv.Quote(p) + "\n")
	}
	return b.String()
}

// untrackedOf reads the Stratus-Untracked trailers of a base commit's
// message (withUntracked), and returns the message without them. A line
// that does not parse is left in the message.
func untrackedOf(message []byte) (paths []string, rest []byte) {
	lines := strings.SplitAfter(string(message), "\n")
	var kept []string
	for _, l := range lines {
		if q, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), untrackedTrailer); ok {
			if p, err := strconv.Unquote(q); err == nil && p != "" {
				paths = append(paths, p)
				continue
			}
		}
		kept = append(kept, l)
	}
	if paths == nil {
		return nil, message
	}
	return paths, []byte(strings.TrimRight(strings.Join(kept, ""), "\n") + "\n")
}

// untrackedPath reports whether p (relative to the work dir) is one of
// the untracked paths or under one; "." holds every path.
func untrackedPath(p string, paths []string) bool {
	for _, x := range paths {
		if x == "." || p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

// noCommitRe finds the nested repositories `git add` cannot record.
var noCommitRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`error: '([^']*)' does not have a commit checked out`)
})

// invalidPathRe finds the paths `git add` refuses (verify_path: a .git
// component in any case, a name no file system should hold).
var invalidPathRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`error: invalid path '([^']*)'`)
})

// invalidPath is the EINVALID error of a `git add` that refused paths
// (invalidPathRe), naming them with the rule they break, or err as it is.
func invalidPath(err error, field, what string) error {
	m := invalidPathRe().FindAllStringSubmatch(err.Error(), -1)
	if m == nil {
		return err
	}
	var vs []Violation
	for _, s := range m {
		rule := pathRule(s[1])
		if rule == "" {
			rule = "git refuses the path"
		}
		vs = append(vs, Violation{Path: s[1], Rule: rule})
	}
	return RulesError(stratus.EINVALID, field, what, vs, "remove or rename it")
}

// writeTree writes the index as a tree and returns the tree at prefix (the
// empty tree when nothing is under it).
func writeTree(ctx context.Context, dir string, env []string, prefix string) (string, error) {
	args := []string{"write-tree"}
	if prefix != "" {
		args = append(args, "--prefix="+prefix)
	}
	tree, err := gitLine(ctx, dir, env, args...)
	if err != nil && prefix != "" && strings.Contains(err.Error(), "not found") {
		return gitLine(ctx, dir, env, "mktree") // stdin is empty: the empty tree
	}
	return tree, err
}

// borrow makes gitDir a git dir sharing the objects of tree's repository
// (through objects/info/alternates: nothing is written there), with a copy
// of its config and info/exclude, and copies its index to index; it
// returns the repository's HEAD commit, or "" when it has none.
func borrow(ctx context.Context, tree *gitwork.Tree, gitDir, index string) (string, error) {
	out, err := gitLine(ctx, tree.Dir, nil, "rev-parse", "--path-format=absolute",
		"--git-path", "objects", "--git-path", "index", "--git-common-dir")
	if err != nil {
		return "", err
	}
	paths := strings.Split(out, "\n")
	if len(paths) != 3 {
		return "", fmt.Errorf("git rev-parse in %s: want 3 paths, got %q", tree.Dir, out)
	}
	objects, srcIndex, common := paths[0], paths[1], paths[2]
	config, err := os.ReadFile(filepath.Join(common, "config"))
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if err := initGitDir(gitDir, objects, config); err != nil {
		return "", err
	}
	if err := copyFile(filepath.Join(common, "info", "exclude"), filepath.Join(gitDir, "info", "exclude")); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if err := copyFile(srcIndex, index); err != nil && !os.IsNotExist(err) {
		return "", err
	}
	// A split index names its shared part in the git dir.
	shared, _ := filepath.Glob(filepath.Join(filepath.Dir(srcIndex), "sharedindex.*"))
	for _, s := range shared {
		if err := copyFile(s, filepath.Join(gitDir, filepath.Base(s))); err != nil {
			return "", err
		}
	}
	head, err := tree.Head(ctx)
	if errors.Is(err, gitwork.ErrNotTree) {
		return "", nil
	}
	return head, err
}

// initGitDir lays out a minimal git dir: HEAD, refs, objects (borrowing
// alternates when not ""), info, and config (a copy of the operator's when
// given, so core.* settings such as filemode and excludesFile hold).
func initGitDir(gitDir, alternates string, config []byte) error {
	for _, d := range []string{"objects/info", "refs/heads", "refs/tags", "refs/stratus", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	if config == nil {
		config = []byte("[core]\n\trepositoryformatversion = 0\n")
	}
	files := map[string][]byte{"HEAD": []byte("ref: refs/heads/main\n"), "config": config}
	if alternates != "" {
		files["objects/info/alternates"] = []byte(alternates + "\n")
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(gitDir, filepath.FromSlash(name)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies src to dst keeping src's modification time: git trusts
// an index entry's stat data only for files older than the index file
// (racy-git detection), so a copy stamped "now" would trust entries the
// original would recheck.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
