package gitwork

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// repo makes a git repository in a temp dir with the files, committed as
// its first commit (no commit when files is nil), and returns its path.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	git(t, dir, "config", "user.name", "t")
	git(t, dir, "config", "user.email", "t@example.com")
	if files != nil {
		for p, body := range files {
			write(t, filepath.Join(dir, p), body)
		}
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "base")
	}
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := Run(context.Background(), dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func write(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// notTree fails unless err is a not-a-tree answer whose reason contains want.
func notTree(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrNotTree) || !strings.Contains(Reason(err), want) {
		t.Errorf("err = %v, want ErrNotTree because %q", err, want)
	}
}

// A dir the enclosing repository ignores (make demo's .scratch/demo under
// a .gitignore'd .scratch/) is not a work tree: its changes can be neither
// listed nor staged, so a tree answer would be a false empty change.
func TestOpen_IgnoredDirIsNotATree(t *testing.T) {
	t.Parallel()
	root := repo(t, map[string]string{".gitignore": "/.scratch/\n", "README.md": "x\n"})
	demo := filepath.Join(root, ".scratch", "demo")
	write(t, filepath.Join(demo, "task.md"), "task\n")
	_, err := Open(context.Background(), demo)
	notTree(t, err, "ignores it")

	// A subdir that is not ignored is a tree, with its prefix.
	write(t, filepath.Join(root, "app", "main.go"), "package main\n")
	tr, err := Open(context.Background(), filepath.Join(root, "app"))
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(root)
	if tr.Root != real || tr.Prefix != "app/" {
		t.Errorf("tree = %+v, want root %s prefix app/", tr, real)
	}
	// A repository nested in the ignored dir is a tree of its own.
	git(t, demo, "init", "-q")
	if tr, err := Open(context.Background(), demo); err != nil || tr.Prefix != "" {
		t.Errorf("nested repository: %+v, %v", tr, err)
	}
}

// A dir no repository contains is not a tree.
func TestOpen_OutsideARepositoryIsNotATree(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	_, err := Open(context.Background(), t.TempDir())
	notTree(t, err, "no git repository contains it")
}

// Without git on PATH there is no tree to ask about.
func TestOpen_GitNotInstalledIsNotATree(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n") // a repository git would have to read
	_, err := Open(context.Background(), dir)
	notTree(t, err, "git is not installed")
}

// Outside every repository the answer comes without starting git (a run
// in such a work dir asks several times); where git could find one — a
// .git directory or gitfile above, a bare repository around — git is
// asked (here it is not installed, which says it was).
func TestOpen_GitIsAskedOnlyWhereARepositoryCanBe(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	outside := filepath.Join(t.TempDir(), "a", "b")
	write(t, filepath.Join(outside, "task.md"), "x\n")
	_, err := Open(context.Background(), outside)
	notTree(t, err, "no git repository contains it")

	gitfile := t.TempDir()
	write(t, filepath.Join(gitfile, ".git"), "gitdir: /elsewhere/.git\n")
	write(t, filepath.Join(gitfile, "app", "main.go"), "package main\n")
	_, err = Open(context.Background(), filepath.Join(gitfile, "app"))
	notTree(t, err, "git is not installed")

	bare := t.TempDir()
	write(t, filepath.Join(bare, "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(bare, "objects", "info", "x"), "")
	_, err = Open(context.Background(), filepath.Join(bare, "objects"))
	notTree(t, err, "git is not installed")

	_, err = Open(context.Background(), filepath.Join(outside, "missing"))
	notTree(t, err, "git is not installed")
}

// The caller's GIT_* variables cannot point git at another repository.
func TestRun_DropsTheCallersGitEnvironment(t *testing.T) {
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	t.Setenv("GIT_INDEX_FILE", filepath.Join(t.TempDir(), "index"))
	tr, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Head(context.Background()); err != nil {
		t.Errorf("Head with a foreign GIT_DIR set: %v", err)
	}
}

// A failure names the command and carries git's stderr.
func TestRun_ErrorCarriesStderr(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	_, err := Run(context.Background(), dir, nil, "rev-parse", "--verify", "no-such-ref")
	if err == nil || !strings.Contains(err.Error(), "git rev-parse --verify no-such-ref") || !strings.Contains(err.Error(), "fatal:") {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, dir, nil, "status"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

// A repository without a commit is a tree, but has no base: Head says so.
func TestHead_NoCommitIsNotATree(t *testing.T) {
	t.Parallel()
	dir := repo(t, nil)
	tr, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Head(context.Background())
	notTree(t, err, "has no commit yet")

	write(t, filepath.Join(dir, "a.txt"), "a\n")
	git(t, dir, "add", "a.txt")
	git(t, dir, "commit", "-q", "-m", "first")
	sha, err := tr.Head(context.Background())
	if want := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")); err != nil || sha != want || len(sha) != 40 {
		t.Errorf("Head = %q, %v; want %s", sha, err, want)
	}
}

// worc configuration.md § Diff-based selection: the changed paths are git
// status's — untracked included, ignored not, both sides of a rename —
// repository-relative, minus the excludes, which are relative to the dir;
// InDir limits them to the dir (docs/contracts.md § The summary artifacts:
// the work dir's changed paths).
func TestStatus_ExcludesRelativeToTheDir(t *testing.T) {
	t.Parallel()
	root := repo(t, map[string]string{".gitignore": "*.log\n", "app/main.go": "package main\n", "app/old.go": "package main\n", "lib/lib.go": "package lib\n", "app/gone.go": "x\n"})
	write(t, filepath.Join(root, "app/main.go"), "package main // changed\n")
	write(t, filepath.Join(root, "app/new.go"), "package main\n")
	write(t, filepath.Join(root, "app/debug.log"), "ignored\n")
	write(t, filepath.Join(root, "app/.stratus/stratus.db"), "x")
	write(t, filepath.Join(root, "app/work/ctx/impl.md"), "x")
	write(t, filepath.Join(root, ".stratus/other.db"), "not excluded: outside the dir")
	write(t, filepath.Join(root, "lib/lib.go"), "package lib // changed\n")
	git(t, root, "mv", "app/old.go", "app/renamed.go")
	git(t, root, "mv", "app/gone.go", "app/.stratus/gone.go") // into an excluded dir
	tr, err := Open(context.Background(), filepath.Join(root, "app"))
	if err != nil {
		t.Fatal(err)
	}
	show := func(es []StatusEntry) []string {
		var out []string
		for _, e := range es {
			s := e.Code + " " + e.Path
			if e.Orig != "" {
				s += " <- " + e.Orig
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	exclude := []string{".stratus", "work/ctx"}
	all, err := tr.Status(context.Background(), StatusOptions{Exclude: exclude})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{" M app/main.go", " M lib/lib.go", "?? .stratus/other.db", "?? app/new.go", "D  app/gone.go", "R  app/renamed.go <- app/old.go"}
	if got := show(all); !slices.Equal(got, want) {
		t.Errorf("whole tree:\n got %q\nwant %q", got, want)
	}
	in, err := tr.Status(context.Background(), StatusOptions{Exclude: exclude, InDir: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{" M app/main.go", "?? app/new.go", "D  app/gone.go", "R  app/renamed.go <- app/old.go"}
	if got := show(in); !slices.Equal(got, want) {
		t.Errorf("in dir:\n got %q\nwant %q", got, want)
	}
}
