package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// gitT runs git in dir as an operator would (their identity, no hooks),
// without the caller's GIT_* environment, and returns its trimmed stdout.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Op", "-c", "user.email=op@example.com",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgSign=false", "-c", "core.hooksPath=/dev/null"}, args...)...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GIT_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	// status must not refresh the index: the tests compare its bytes.
	cmd.Env = append(cmd.Env, "GIT_OPTIONAL_LOCKS=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// write writes files (path → content; "-> target" makes a symlink).
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree is every file under dir but .git (path → content, "-> target"
// for a symlink).
func readTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			files[rel] = "-> " + target
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			files[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// repoState is what must not change in an operator's repository.
type repoState struct {
	Status, Refs, Objects, Head string
	Index                       []byte
}

func stateOf(t testing.TB, dir string) repoState {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return repoState{
		Status:  gitT(t, dir, "status", "--porcelain", "--untracked-files=all"),
		Refs:    gitT(t, dir, "for-each-ref"),
		Objects: gitT(t, dir, "count-objects", "-v"),
		Head:    gitT(t, dir, "symbolic-ref", "-q", "HEAD"),
		Index:   index,
	}
}

func wantCode(t testing.TB, err error, code string, mentions ...string) {
	t.Helper()
	if got := stratus.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

// newRepo is a git repository with files committed.
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	write(t, dir, files)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "origin")
	return dir
}

// noise is n bytes that do not compress.
func noise(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return string(b)
}

var binary = "\x00\x01\x02\xff\xfe binary\r\n\x00"

// TestFreeze_WorkTreeAsACommitWouldHoldIt checks the snapshot's content
// and that the operator's repository is left as it was.
func TestFreeze_WorkTreeAsACommitWouldHoldIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{
		".gitignore":               "*.log\n*.tmp\n",
		"a.txt":                    "one\n",
		"mod.txt":                  "old\n",
		"gone.txt":                 "deleted in the work tree\n",
		".stratus/config.yaml":     "tracked but excluded\n",
		"workspace/tasks/t1/ok.md": "kept\n",
	})
	write(t, repo, map[string]string{"kept.tmp": "tracked although ignored\n"})
	gitT(t, repo, "add", "-f", "kept.tmp")
	gitT(t, repo, "commit", "-q", "-m", "force-add an ignored file")
	write(t, repo, map[string]string{
		"mod.txt":                      "new\n",
		"kept.tmp":                     "tracked although ignored, changed\n",
		"new.txt":                      "untracked\n",
		"debug.log":                    "ignored\n",
		"scratch.tmp":                  "ignored\n",
		".stratus/run.json":            "{}\n",
		"workspace/tasks/t1/ctx/in.md": "context\n",
		"bin.dat":                      binary,
		"link":                         "-> a.txt",
		"dirlink":                      "-> workspace/tasks",
		"staged.txt":                   "staged only\n",
		"local-only.txt":               "ignored by .git/info/exclude\n",
		".git/info/exclude":            "local-only.txt\n",
	})
	gitT(t, repo, "add", "staged.txt")
	if err := os.Remove(filepath.Join(repo, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, repo)

	bundle := filepath.Join(t.TempDir(), "base.bundle")
	base, err := Freeze(ctx, repo, bundle, FreezeOptions{Exclude: []string{".stratus", "workspace/tasks/t1/ctx"}})
	if err != nil {
		t.Fatal(err)
	}
	if after := stateOf(t, repo); !reflect.DeepEqual(before, after) {
		t.Errorf("the operator's repository changed:\nbefore %+v\nafter  %+v", before, after)
	}

	want := map[string]string{
		".gitignore":               "*.log\n*.tmp\n",
		"a.txt":                    "one\n",
		"mod.txt":                  "new\n",
		"kept.tmp":                 "tracked although ignored, changed\n",
		"new.txt":                  "untracked\n",
		"workspace/tasks/t1/ok.md": "kept\n",
		"bin.dat":                  binary,
		"link":                     "-> a.txt",
		"dirlink":                  "-> workspace/tasks",
		"staged.txt":               "staged only\n",
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := Materialize(ctx, dir, []string{bundle}, base.Commit, []string{".stratus"}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("materialized tree:\n got %q\nwant %q", got, want)
	}
	var bytes int64
	for _, c := range want {
		bytes += int64(len(strings.TrimPrefix(c, "-> ")))
	}
	if want := []string{"bin.dat", "dirlink", "link", "new.txt"}; !reflect.DeepEqual(base.Untracked, want) {
		t.Errorf("base.Untracked = %q, want %q (staged.txt is tracked; ignored and excluded paths are not in the snapshot)", base.Untracked, want)
	}
	origin := gitT(t, repo, "rev-parse", "HEAD")
	if base.Origin != origin || base.Prefix != "" || base.Files != len(want) || base.Bytes != bytes {
		t.Errorf("base = %+v, want origin %s, prefix \"\", %d files, %d bytes", base, origin, len(want), bytes)
	}
	if parents := gitT(t, dir, "log", "-1", "--format=%P", base.Commit); parents != "" {
		t.Errorf("base commit has parents %q, want none", parents)
	}
	if tree := gitT(t, dir, "rev-parse", base.Commit+"^{tree}"); tree != base.Tree {
		t.Errorf("base.Tree = %s, commit's tree %s", base.Tree, tree)
	}
	if author := gitT(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", base.Commit); author != "Stratus <stratus@stratus.invalid>|Stratus <stratus@stratus.invalid>|stratus: workspace base" {
		t.Errorf("base commit author, committer, subject = %q", author)
	}
}

// TestFreeze_LinkedWorktree: a work dir that is a linked worktree freezes
// from its own index and HEAD, borrowing the common object store.
func TestFreeze_LinkedWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a": "main\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, repo, "worktree", "add", "-q", "-b", "feature", wt)
	write(t, wt, map[string]string{"a": "feature, uncommitted\n", "b": "untracked\n"})
	gitT(t, wt, "add", "b")
	gitT(t, wt, "commit", "-q", "-m", "b on feature")
	before := stateOf(t, repo)
	bundle := filepath.Join(t.TempDir(), "base.bundle")
	base, err := Freeze(ctx, wt, bundle, FreezeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after := stateOf(t, repo); !reflect.DeepEqual(before, after) {
		t.Errorf("the repository changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if want := gitT(t, wt, "rev-parse", "HEAD"); base.Origin != want {
		t.Errorf("origin = %s, want the worktree's HEAD %s", base.Origin, want)
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := Materialize(ctx, dir, []string{bundle}, base.Commit, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := readTree(t, dir), map[string]string{"a": "feature, uncommitted\n", "b": "untracked\n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("materialized tree:\n got %q\nwant %q", got, want)
	}
}

// TestFreeze_DirOutsideAnyRepository: a plain dir freezes, its own
// .gitignore files honoured.
func TestFreeze_DirOutsideAnyRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := t.TempDir()
	write(t, src, map[string]string{
		".gitignore":     "*.log\n",
		"a.txt":          "a\n",
		"b.log":          "ignored\n",
		"sub/.gitignore": "x\n",
		"sub/x":          "ignored\n",
		"sub/y":          "kept\n",
		".stratus/s":     "excluded\n",
	})
	bundle := filepath.Join(t.TempDir(), "base.bundle")
	base, err := Freeze(ctx, src, bundle, FreezeOptions{Exclude: []string{".stratus"}})
	if err != nil {
		t.Fatal(err)
	}
	if base.Origin != "" || base.Prefix != "" || base.Files != 4 {
		t.Errorf("base = %+v, want no origin, no prefix, 4 files", base)
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := Materialize(ctx, dir, []string{bundle}, base.Commit, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".gitignore": "*.log\n", "a.txt": "a\n", "sub/.gitignore": "x\n", "sub/y": "kept\n"}
	if got := readTree(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("materialized tree:\n got %q\nwant %q", got, want)
	}
}

// TestFreeze_SubdirectoryPullsBackUnderItsPrefix: a work dir inside a
// repository freezes alone, and Pull puts its changes back under it.
func TestFreeze_SubdirectoryPullsBackUnderItsPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{
		"top.txt":                     "outside the work dir\n",
		"sub/dir/a.txt":               "a\n",
		"sub/dir/.stratus/config.yml": "kept from origin\n",
		"sub/other.txt":               "outside too\n",
	})
	work := filepath.Join(repo, "sub", "dir")
	write(t, work, map[string]string{"a.txt": "a, changed before the run\n", "new.txt": "untracked\n"})
	tmp := t.TempDir()
	b0 := filepath.Join(tmp, "0.bundle")
	base, err := Freeze(ctx, work, b0, FreezeOptions{Exclude: []string{".stratus"}})
	if err != nil {
		t.Fatal(err)
	}
	if base.Prefix != "sub/dir/" {
		t.Fatalf("prefix = %q, want sub/dir/", base.Prefix)
	}
	dir := filepath.Join(tmp, "w")
	if err := Materialize(ctx, dir, []string{b0}, base.Commit, []string{".stratus"}); err != nil {
		t.Fatal(err)
	}
	if got, want := readTree(t, dir), map[string]string{"a.txt": "a, changed before the run\n", "new.txt": "untracked\n"}; !reflect.DeepEqual(got, want) {
		t.Errorf("materialized tree:\n got %q\nwant %q", got, want)
	}
	write(t, dir, map[string]string{"step.txt": "from the step\n"})
	b1 := filepath.Join(tmp, "1.bundle")
	s1, _, err := CommitStep(ctx, dir, base.Commit, "step 1", b1, 0)
	if err != nil {
		t.Fatal(err)
	}
	tip, commits, err := Pull(ctx, repo, *base, []string{b0, b1}, s1, "stratus/t1", []string{".stratus"})
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 2 {
		t.Fatalf("pull made %d commits, want 2 (uncommitted, step 1)", len(commits))
	}
	got := gitT(t, repo, "ls-tree", "-r", "--name-only", tip)
	// new.txt was untracked at run start: the engines saw it, the branch
	// does not carry it (README § Workspaces).
	want := "sub/dir/.stratus/config.yml\nsub/dir/a.txt\nsub/dir/step.txt\nsub/other.txt\ntop.txt"
	if got != want {
		t.Errorf("tip files:\n%s\nwant\n%s", got, want)
	}
	if c := gitT(t, repo, "show", tip+":sub/dir/step.txt"); c != "from the step" {
		t.Errorf("sub/dir/step.txt = %q", c)
	}
	if c := gitT(t, repo, "diff-tree", "--no-commit-id", "--name-only", "-r", tip); c != "sub/dir/step.txt" {
		t.Errorf("the step commit changes %q, want sub/dir/step.txt", c)
	}
}

// TestFreeze_Limits: a snapshot is capped (ETOOLARGE, naming the biggest
// path) and follows the workspace commit rules (EINVALID).
func TestFreeze_Limits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	big := strings.Repeat("x", 2000)
	cases := []struct {
		name     string
		files    map[string]string
		nested   string // a nested repository at this path
		empty    bool   // ... without a commit
		max      int64
		code     string
		mentions []string
	}{
		{name: "over the cap names the biggest path", files: map[string]string{"big.bin": big, "small": "s"}, max: 1000,
			code: stratus.ETOOLARGE, mentions: []string{"big.bin (2.0 KiB (2000 bytes))", "2003 bytes", "cap of 1002 bytes"}},
		{name: "at the cap passes", files: map[string]string{"big.bin": big}, max: 2000},
		{name: "nested repository", files: map[string]string{"a": "a"}, nested: "vendor/lib",
			code: stratus.EINVALID, mentions: []string{"vendor/lib", "submodules are refused"}},
		{name: "nested repository without a commit", files: map[string]string{"a": "a"}, nested: "vendor/lib", empty: true,
			code: stratus.EINVALID, mentions: []string{"vendor/lib", "submodules are refused"}},
		{name: "absolute symlink", files: map[string]string{"pw": "-> /etc/passwd"},
			code: stratus.EINVALID, mentions: []string{"pw -> /etc/passwd"}},
		{name: "symlink up and out", files: map[string]string{"sub/out": "-> ../../outside"},
			code: stratus.EINVALID, mentions: []string{"sub/out -> ../../outside"}},
		{name: "symlink out through another symlink", files: map[string]string{"s": "-> .", "x": "-> s/.."},
			code: stratus.EINVALID, mentions: []string{"x -> s/.."}},
		{name: "symlinks inside pass", files: map[string]string{"a/f": "f", "l1": "-> a/../a/f", "a/l2": "-> ../l1", "d": "-> a", "l3": "-> d/../a/f"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := newRepo(t, map[string]string{"README": "r\n"})
			write(t, src, c.files)
			if c.nested != "" {
				nested := filepath.Join(src, filepath.FromSlash(c.nested))
				if err := os.MkdirAll(nested, 0o755); err != nil {
					t.Fatal(err)
				}
				gitT(t, nested, "init", "-q")
				if !c.empty {
					write(t, nested, map[string]string{"f": "f"})
					gitT(t, nested, "add", "f")
					gitT(t, nested, "commit", "-q", "-m", "nested")
				}
			}
			bundle := filepath.Join(t.TempDir(), "base.bundle")
			max := c.max
			if max > 0 {
				max += int64(len("r\n")) // the README
			}
			_, err := Freeze(ctx, src, bundle, FreezeOptions{MaxBytes: max})
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, c.code, c.mentions...)
			if _, err := os.Stat(bundle); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused freeze left a bundle (stat: %v)", err)
			}
		})
	}
}

// TestFreeze_SameInputsSameCommit: same content and time, same SHA.
func TestFreeze_SameInputsSameCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a": "a\n"})
	write(t, repo, map[string]string{"b": "untracked\n"})
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tmp := t.TempDir()
	one, err := Freeze(ctx, repo, filepath.Join(tmp, "1"), FreezeOptions{Time: at})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Freeze(ctx, repo, filepath.Join(tmp, "2"), FreezeOptions{Time: at})
	if err != nil {
		t.Fatal(err)
	}
	if one.Commit != two.Commit {
		t.Errorf("same inputs gave commits %s and %s", one.Commit, two.Commit)
	}
	later, err := Freeze(ctx, repo, filepath.Join(tmp, "3"), FreezeOptions{Time: at.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if later.Commit == one.Commit || later.Tree != one.Tree {
		t.Errorf("another time: commit %s tree %s; first %s tree %s", later.Commit, later.Tree, one.Commit, one.Tree)
	}
}

// setupRun freezes a fresh repository and materializes it: a run at its
// start.
type run struct {
	repo, dir, tmp string
	base           *Base
	bundles        []string
}

var runExclude = []string{".stratus", "workspace/tasks/t1/ctx"}

func setupRun(t *testing.T, files map[string]string) *run {
	t.Helper()
	r := &run{repo: newRepo(t, files), tmp: t.TempDir()}
	r.bundles = []string{filepath.Join(r.tmp, "0.bundle")}
	var err error
	if r.base, err = Freeze(context.Background(), r.repo, r.bundles[0], FreezeOptions{Exclude: runExclude}); err != nil {
		t.Fatal(err)
	}
	r.dir = filepath.Join(r.tmp, "w")
	if err := Materialize(context.Background(), r.dir, r.bundles, r.base.Commit, runExclude); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCommitStep_OneCommitAndAnIncrementalBundle: a step's changes become
// one commit and an incremental bundle.
func TestCommitStep_OneCommitAndAnIncrementalBundle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := setupRun(t, map[string]string{"a.txt": "a\n", "gone.txt": "g\n"})
	write(t, r.dir, map[string]string{
		"a.txt":                          "a, by step 1\n",
		"new/b.txt":                      "b\n",
		"bin.dat":                        binary,
		"l":                              "-> new/b.txt",
		".stratus/state.json":            "{}\n",
		"workspace/tasks/t1/ctx/in.md":   "context\n",
		"workspace/tasks/t1/out/o.md":    "output\n",
		"workspace/tasks/t1/ctx2/keep.m": "not the ctx dir\n",
	})
	if err := os.Remove(filepath.Join(r.dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	gitT(t, r.dir, "add", "-f", ".stratus/state.json") // forced into the index: still left out
	b1 := filepath.Join(r.tmp, "1.bundle")
	s1, changed, err := CommitStep(ctx, r.dir, r.base.Commit, "step 1: review", b1, 0)
	if err != nil || !changed {
		t.Fatalf("CommitStep = %s, %v, %v", s1, changed, err)
	}
	if head := gitT(t, r.dir, "rev-parse", "HEAD"); head != s1 {
		t.Errorf("HEAD = %s, want the step commit %s", head, s1)
	}
	if got := gitT(t, r.dir, "log", "-1", "--format=%P|%an <%ae>|%cn|%B", s1); got != r.base.Commit+"|Stratus <stratus@stratus.invalid>|Stratus|step 1: review" {
		t.Errorf("step commit = %q", got)
	}
	files := gitT(t, r.dir, "ls-tree", "-r", "--name-only", s1)
	if want := "a.txt\nbin.dat\nl\nnew/b.txt\nworkspace/tasks/t1/ctx2/keep.m\nworkspace/tasks/t1/out/o.md"; files != want {
		t.Errorf("step tree:\n%s\nwant\n%s", files, want)
	}
	// The bundle is incremental: it needs the base.
	if out := gitT(t, r.dir, "bundle", "list-heads", b1); !strings.Contains(out, s1) {
		t.Errorf("bundle heads %q lack %s", out, s1)
	}
	other := filepath.Join(r.tmp, "w2")
	if err := Materialize(ctx, other, []string{b1}, s1, nil); err == nil {
		t.Errorf("materializing the step bundle without the base worked; want a missing-prerequisite error")
	}
	other = filepath.Join(r.tmp, "w3")
	if err := Materialize(ctx, other, []string{r.bundles[0], b1}, s1, runExclude); err != nil {
		t.Fatal(err)
	}
	want := readTree(t, r.dir)
	delete(want, ".stratus/state.json")
	delete(want, "workspace/tasks/t1/ctx/in.md")
	if got := readTree(t, other); !reflect.DeepEqual(got, want) {
		t.Errorf("second materialization:\n got %q\nwant %q", got, want)
	}

	b2 := filepath.Join(r.tmp, "2.bundle")
	sha, changed, err := CommitStep(ctx, r.dir, s1, "step 2", b2, 0)
	if err != nil || changed || sha != s1 {
		t.Errorf("nothing changed: CommitStep = %s, %v, %v; want %s, false, nil", sha, changed, err, s1)
	}
	if _, err := os.Stat(b2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing changed yet a bundle was written (stat: %v)", err)
	}

	// An engine's own commit is folded into the step's.
	write(t, r.dir, map[string]string{"engine.txt": "committed by the engine\n"})
	gitT(t, r.dir, "add", "engine.txt")
	gitT(t, r.dir, "commit", "-q", "-m", "engine")
	write(t, r.dir, map[string]string{"after.txt": "uncommitted\n"})
	s2, changed, err := CommitStep(ctx, r.dir, s1, "step 2", b2, 0)
	if err != nil || !changed {
		t.Fatalf("CommitStep = %s, %v, %v", s2, changed, err)
	}
	if got := gitT(t, r.dir, "log", "--format=%s", s1+".."+s2); got != "step 2" {
		t.Errorf("commits after step 1: %q, want just step 2", got)
	}
	if got := gitT(t, r.dir, "diff-tree", "--no-commit-id", "--name-only", "-r", s2); got != "after.txt\nengine.txt" {
		t.Errorf("step 2 changes %q", got)
	}
}

// TestCommitStep_Limits: a step's changes follow the same cap and rules.
func TestCommitStep_Limits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name     string
		files    map[string]string
		nested   bool
		max      int64
		code     string
		mentions []string
	}{
		{name: "symlink leaving the tree", files: map[string]string{"x/up": "-> ../../etc"}, code: stratus.EINVALID, mentions: []string{"x/up -> ../../etc"}},
		{name: "symlink turning an old one outward", files: map[string]string{"s": "-> ."}, code: stratus.EINVALID, mentions: []string{"old -> s/.."}},
		{name: "nested repository", nested: true, code: stratus.EINVALID, mentions: []string{"nested", "submodules are refused"}},
		{name: ".GIT dir", files: map[string]string{".GIT/config": "[core]\n"}, code: stratus.EINVALID,
			mentions: []string{`.GIT/config: path component ".GIT" is a git dir`, "docs/security.md § Workspace commits"}},
		{name: "symlink into .git", files: map[string]string{"cfg": "-> .git/config"}, code: stratus.EINVALID,
			mentions: []string{"cfg -> .git/config: symlink resolves into a .git dir"}},
		{name: "bundle over the cap", files: map[string]string{"big.bin": noise(32 << 10)}, max: 500,
			code: stratus.ETOOLARGE, mentions: []string{"big.bin", "500 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := setupRun(t, map[string]string{"a": "a\n", "old": "-> s/.."})
			if err := os.Remove(filepath.Join(r.dir, "s")); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			write(t, r.dir, c.files)
			if c.nested {
				nested := filepath.Join(r.dir, "nested")
				if err := os.MkdirAll(nested, 0o755); err != nil {
					t.Fatal(err)
				}
				gitT(t, nested, "init", "-q")
				write(t, nested, map[string]string{"f": "f"})
				gitT(t, nested, "add", "f")
				gitT(t, nested, "commit", "-q", "-m", "nested")
			}
			bundle := filepath.Join(r.tmp, "1.bundle")
			_, _, err := CommitStep(ctx, r.dir, r.base.Commit, "step", bundle, c.max)
			wantCode(t, err, c.code, c.mentions...)
			if _, err := os.Stat(bundle); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused step left a bundle (stat: %v)", err)
			}
			if head := gitT(t, r.dir, "rev-parse", "HEAD"); head != r.base.Commit {
				t.Errorf("a refused step moved HEAD to %s", head)
			}
		})
	}
}

// TestPull_BranchOfUncommittedThenSteps: the pulled branch holds the
// operator's uncommitted changes, then one commit per step.
func TestPull_BranchOfUncommittedThenSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a.txt": "a\n", "keep.txt": "k\n", ".stratus/config.yaml": "operator config\n"})
	write(t, repo, map[string]string{"a.txt": "a, uncommitted\n", "u.txt": "untracked\n", ".stratus/run.json": "{}\n"})
	tmp := t.TempDir()
	bundles := []string{filepath.Join(tmp, "0.bundle")}
	base, err := Freeze(ctx, repo, bundles[0], FreezeOptions{Exclude: []string{".stratus"}})
	if err != nil {
		t.Fatal(err)
	}
	// Two steps, each on a fresh worker.
	head := base.Commit
	for i, change := range []func(dir string){
		func(dir string) { write(t, dir, map[string]string{"a.txt": "a, by step 1\n", "s1.txt": "s1\n"}) },
		func(dir string) {
			write(t, dir, map[string]string{"bin.dat": binary, ".stratus/config.yaml": "the worker's own\n"})
			if err := os.Remove(filepath.Join(dir, "u.txt")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		dir := filepath.Join(tmp, "w"+string(rune('1'+i)))
		if err := Materialize(ctx, dir, bundles, head, []string{".stratus"}); err != nil {
			t.Fatal(err)
		}
		change(dir)
		bundle := filepath.Join(tmp, string(rune('1'+i))+".bundle")
		sha, changed, err := CommitStep(ctx, dir, head, "step "+string(rune('1'+i)), bundle, 0)
		if err != nil || !changed {
			t.Fatalf("step %d: %v, %v", i+1, changed, err)
		}
		head, bundles = sha, append(bundles, bundle)
	}
	steps, err := Steps(ctx, filepath.Join(tmp, "w2"), base.Commit, head)
	if err != nil || len(steps) != 2 || steps[1] != head {
		t.Errorf("Steps in the second worker = %v, %v; want step 1, step 2 (%s)", steps, err, head)
	}

	before := stateOf(t, repo)
	tip, commits, err := Pull(ctx, repo, *base, bundles, head, "stratus/t1", []string{".stratus"})
	if err != nil {
		t.Fatal(err)
	}
	after := stateOf(t, repo)
	after.Refs = strings.ReplaceAll(after.Refs, tip+" commit\trefs/heads/stratus/t1", "")
	after.Refs = strings.TrimSuffix(after.Refs, "\n")
	before.Objects, after.Objects = "", "" // pull brings the run's objects in
	if !reflect.DeepEqual(before, after) {
		t.Errorf("pull touched more than its branch:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := gitT(t, repo, "log", "--format=%s|%an", "main..stratus/t1"); got != "step 2|Stratus\nstep 1|Stratus\nstratus: uncommitted changes at run start|Stratus" {
		t.Errorf("branch log:\n%s", got)
	}
	if len(commits) != 3 || commits[2] != tip || gitT(t, repo, "rev-parse", commits[0]+"^") != gitT(t, repo, "rev-parse", "main") {
		t.Errorf("commits %v, tip %s: want 3 on top of main, the last the tip", commits, tip)
	}
	wantTree := map[string]string{"a.txt": "a, by step 1\n", "keep.txt": "k\n", ".stratus/config.yaml": "operator config\n", "s1.txt": "s1\n", "bin.dat": binary}
	gotTree := map[string]string{}
	for _, p := range strings.Split(gitT(t, repo, "ls-tree", "-r", "--name-only", tip), "\n") {
		out, _ := exec.Command("git", "-C", repo, "cat-file", "blob", tip+":"+p).Output()
		gotTree[p] = string(out)
	}
	if !reflect.DeepEqual(gotTree, wantTree) {
		t.Errorf("tip tree:\n got %q\nwant %q", gotTree, wantTree)
	}
	if got := gitT(t, repo, "diff-tree", "--no-commit-id", "--name-only", "-r", commits[1]); got != "a.txt\ns1.txt" {
		t.Errorf("step 1 commit changes %q, want a.txt and s1.txt", got)
	}
	if refs := gitT(t, repo, "for-each-ref", "refs/stratus-pull/"); refs != "" {
		t.Errorf("temporary refs left: %s", refs)
	}

	again, _, err := Pull(ctx, repo, *base, bundles, head, "stratus/t1", []string{".stratus"})
	if err != nil || again != tip {
		t.Errorf("pulling again = %s, %v; want the same tip %s", again, err, tip)
	}
	gitT(t, repo, "stash", "-q", "--include-untracked") // the test's operator switches branches
	gitT(t, repo, "checkout", "-q", "stratus/t1")
	_, _, err = Pull(ctx, repo, *base, bundles, head, "stratus/t1", []string{".stratus"})
	wantCode(t, err, stratus.ECONFLICT, "stratus/t1", "checked out")
}

// TestPull_NoCommitAtRunStart: without an origin the branch starts with a
// root commit of the snapshot.
func TestPull_NoCommitAtRunStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	gitT(t, repo, "init", "-q")
	write(t, repo, map[string]string{"a.txt": "a\n"})
	gitT(t, repo, "add", "a.txt") // tracked, though in no commit yet
	tmp := t.TempDir()
	bundles := []string{filepath.Join(tmp, "0.bundle")}
	base, err := Freeze(ctx, repo, bundles[0], FreezeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if base.Origin != "" {
		t.Fatalf("origin = %q, want none", base.Origin)
	}
	dir := filepath.Join(tmp, "w")
	if err := Materialize(ctx, dir, bundles, base.Commit, nil); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"b.txt": "b\n"})
	s1, _, err := CommitStep(ctx, dir, base.Commit, "step 1", filepath.Join(tmp, "1.bundle"), 0)
	if err != nil {
		t.Fatal(err)
	}
	bundles = append(bundles, filepath.Join(tmp, "1.bundle"))
	tip, commits, err := Pull(ctx, repo, *base, bundles, s1, "stratus/t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 2 || gitT(t, repo, "log", "--format=%P", commits[0]) != "" {
		t.Errorf("commits %v: want a root commit then step 1", commits)
	}
	if got := gitT(t, repo, "ls-tree", "-r", "--name-only", tip); got != "a.txt\nb.txt" {
		t.Errorf("tip files %q", got)
	}
	if commits[0] != base.Commit || tip != s1 {
		t.Errorf("at the repository's top, the replay should be the run's own commits: %v vs base %s, head %s", commits, base.Commit, s1)
	}

	_, _, err = Pull(ctx, t.TempDir(), *base, bundles, s1, "stratus/t1", nil)
	wantCode(t, err, stratus.EINVALID, "git init")
}

// TestSteps_FirstParentChainOnly: Steps refuses a head that does not
// descend from the base.
func TestSteps_FirstParentChainOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a": "a"})
	first := gitT(t, repo, "rev-parse", "HEAD")
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "2")
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "3")
	head := gitT(t, repo, "rev-parse", "HEAD")
	steps, err := Steps(ctx, repo, first, head)
	if err != nil || len(steps) != 2 || steps[1] != head {
		t.Errorf("Steps = %v, %v", steps, err)
	}
	_, err = Steps(ctx, repo, head, first)
	wantCode(t, err, stratus.EINVALID, "does not descend")
}

// repoTop is this repository's top level.
func repoTop(b *testing.B) string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Skip("not in a git repository:", err)
	}
	return strings.TrimSpace(string(out))
}

// BenchmarkFreeze freezes this repository.
func BenchmarkFreeze(b *testing.B) {
	top := repoTop(b)
	bundle := filepath.Join(b.TempDir(), "base.bundle")
	var size int64
	for b.Loop() {
		if _, err := Freeze(context.Background(), top, bundle, FreezeOptions{Exclude: []string{".stratus"}}); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(bundle)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
	}
	b.ReportMetric(float64(size), "bundle-bytes")
}

// BenchmarkAnchorGitArchive is the floor for BenchmarkFreeze: git writing
// the committed tree of the same repository once.
func BenchmarkAnchorGitArchive(b *testing.B) {
	top := repoTop(b)
	for b.Loop() {
		cmd := exec.Command("git", "-C", top, "archive", "HEAD")
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// frozenRepo freezes this repository into a temporary dir: the dir, the
// base bundle and what Freeze returned.
func frozenRepo(b *testing.B) (tmp, bundle string, base *Base) {
	top := repoTop(b)
	tmp = b.TempDir()
	bundle = filepath.Join(tmp, "base.bundle")
	base, err := Freeze(context.Background(), top, bundle, FreezeOptions{Exclude: []string{".stratus"}})
	if err != nil {
		b.Fatal(err)
	}
	return tmp, bundle, base
}

// BenchmarkMaterialize checks this repository's snapshot out into a fresh
// dir from its base bundle: what every worker does before its engine
// starts (anchor: BenchmarkAnchorGitArchive).
func BenchmarkMaterialize(b *testing.B) {
	tmp, bundle, base := frozenRepo(b)
	n := 0
	for b.Loop() {
		n++
		if err := Materialize(context.Background(), filepath.Join(tmp, fmt.Sprintf("w%d", n)), []string{bundle}, base.Commit, []string{".stratus"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitStep commits a one-line change to a checkout of this
// repository and writes its incremental bundle: what a workspace-write
// step adds after its engine ends.
func BenchmarkCommitStep(b *testing.B) {
	tmp, bundle, base := frozenRepo(b)
	dir := filepath.Join(tmp, "w")
	if err := Materialize(context.Background(), dir, []string{bundle}, base.Commit, []string{".stratus"}); err != nil {
		b.Fatal(err)
	}
	head, n := base.Commit, 0
	var size int64
	for b.Loop() {
		n++
		f, err := os.OpenFile(filepath.Join(dir, "README.md"), os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "line %d\n", n)
		f.Close()
		step := filepath.Join(tmp, fmt.Sprintf("step%d.bundle", n))
		sha, changed, err := CommitStep(context.Background(), dir, head, fmt.Sprintf("s#%d", n), step, 0)
		if err != nil || !changed {
			b.Fatal(err, changed)
		}
		fi, _ := os.Stat(step)
		size, head = fi.Size(), sha
	}
	b.ReportMetric(float64(size), "bundle-bytes")
}

// A newcomer's repository: .stratus/ listed in .gitignore (its key and
// store live there) with tracked files under it, one of them edited since
// its commit (workspace: worktree just added to config.yaml). The
// snapshot leaves .stratus/ out and fails on neither.
func TestFreeze_StateDirIgnoredTrackedAndEdited(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for p, body := range map[string]string{".stratus/config.yaml": "a: 1\n", "src/a.go": "package a\n"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	mustGit := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	mustGit("init", "-q")
	mustGit("add", "-A")
	mustGit("commit", "-qm", "base")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".stratus/\nworkspace/\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".stratus/config.yaml"), []byte("a: 1\nworkspace: worktree\n"), 0o644)
	mustGit("add", "-f", ".stratus/config.yaml") // staged, and different from HEAD
	os.WriteFile(filepath.Join(dir, ".stratus/config.yaml"), []byte("a: 2\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "workspace/tasks/t1/ctx"), 0o755)
	os.WriteFile(filepath.Join(dir, "workspace/tasks/t1/ctx/x.md"), []byte("x\n"), 0o644)
	bundle := filepath.Join(t.TempDir(), "b.bundle")
	base, err := Freeze(ctx, dir, bundle, FreezeOptions{Exclude: []string{".stratus", "workspace/tasks/t1/ctx"}})
	if err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	w := filepath.Join(t.TempDir(), "w")
	if err := Materialize(ctx, w, []string{bundle}, base.Commit, nil); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", w, "ls-tree", "-r", "--name-only", base.Commit).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != ".gitignore src/a.go" {
		t.Errorf("snapshot files %q, want .gitignore src/a.go", got)
	}
}

// A branch is never moved over a commit of the operator's without Force
// (an earlier run's result, all Stratus's, is replaced: the reflog keeps
// it); a run that changed nothing makes no branch.
func TestPullWith_KeepsTheOperatorsCommitsAndMakesNoEmptyBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	tmp := t.TempDir()
	bundle := filepath.Join(tmp, "0.bundle")
	base, err := Freeze(ctx, repo, bundle, FreezeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing uncommitted, no step: nothing to pull.
	if _, commits, err := Pull(ctx, repo, *base, []string{bundle}, base.Commit, "stratus/t1", nil); err != nil || len(commits) != 0 {
		t.Fatalf("pull of an unchanged run: %v, %v; want no commits", commits, err)
	}
	if out, _ := exec.Command("git", "-C", repo, "branch", "--list", "stratus/t1").Output(); len(out) != 0 {
		t.Errorf("an unchanged run made branch stratus/t1")
	}
	// One step, pulled; then pulled again after a different run: replaced.
	step := func(body string) (string, []string) {
		dir := filepath.Join(tmp, "w-"+strings.TrimSpace(body))
		if err := Materialize(ctx, dir, []string{bundle}, base.Commit, nil); err != nil {
			t.Fatal(err)
		}
		write(t, dir, map[string]string{"a.txt": body})
		b := filepath.Join(tmp, strings.TrimSpace(body)+".bundle")
		sha, _, err := CommitStep(ctx, dir, base.Commit, "s#1", b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return sha, []string{bundle, b}
	}
	h1, b1 := step("one\n")
	if _, _, err := Pull(ctx, repo, *base, b1, h1, "stratus/t1", nil); err != nil {
		t.Fatal(err)
	}
	h2, b2 := step("two\n")
	tip2, _, err := Pull(ctx, repo, *base, b2, h2, "stratus/t1", nil)
	if err != nil {
		t.Fatalf("pull over an earlier run's result: %v", err)
	}
	// The operator commits on the branch: the next pull refuses, Force moves it.
	gitT(t, repo, "update-ref", "refs/heads/stratus/t1", gitT(t, repo, "commit-tree", "-p", tip2, "-m", "mine", tip2+"^{tree}"))
	mine := gitT(t, repo, "rev-parse", "stratus/t1")
	if _, _, err := Pull(ctx, repo, *base, b1, h1, "stratus/t1", nil); stratus.ErrorCode(err) != stratus.ECONFLICT || !strings.Contains(err.Error(), mine[:12]) {
		t.Errorf("pull over the operator's commit: %v, want ECONFLICT naming %.12s", err, mine)
	}
	if got := gitT(t, repo, "rev-parse", "stratus/t1"); got != mine {
		t.Errorf("the refused pull moved the branch to %s", got)
	}
	if _, _, err := PullWith(ctx, repo, *base, b1, h1, "stratus/t1", nil, PullOptions{Force: true}); err != nil {
		t.Errorf("pull --force: %v", err)
	}
}

// TestPull_RefusesACommitThatBreaksTheRules: docs/security.md § Workspace
// commits — pull checks again each commit it brings back: a run whose
// bundles were doctored to hold a hand-built commit (an absolute symlink,
// a gitlink, a .GIT dir) makes no branch, and the error names the commit,
// the paths and the rules.
func TestPull_RefusesACommitThatBreaksTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	tmp := t.TempDir()
	baseBundle := filepath.Join(tmp, "0.bundle")
	base, err := Freeze(ctx, repo, baseBundle, FreezeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The engine's side: the run's objects, and a commit made by hand.
	eng := workspacetest.NewRepo(t)
	eng.Fetch(baseBundle)
	x := eng.Blob("x\n")
	clean := eng.Commit(eng.Tree(workspacetest.File("a.txt", eng.Blob("a\n")), workspacetest.File("b.txt", x)), "step 1", base.Commit)
	bad := eng.Commit(eng.Tree(
		workspacetest.File("a.txt", eng.Blob("a\n")),
		workspacetest.Link("leak", eng.Blob("/etc/passwd")),
		workspacetest.Entry{Mode: "160000", Name: "sub", ID: base.Commit},
		workspacetest.Dir(".GIT", eng.Tree(workspacetest.File("config", x))),
	), "step 2", clean)
	bundles := []string{baseBundle, filepath.Join(tmp, "1.bundle"), filepath.Join(tmp, "2.bundle")}
	eng.Bundle(bundles[1], clean, base.Commit)
	eng.Bundle(bundles[2], bad, clean)

	before := stateOf(t, repo)
	_, _, err = Pull(ctx, repo, *base, bundles, bad, "stratus/t1", nil)
	wantCode(t, err, stratus.EUNPROCESSABLE, "the run's commit "+bad[:12], "docs/security.md § Workspace commits",
		"leak -> /etc/passwd: absolute symlink target", "sub: a submodule", `.GIT/config: path component ".GIT" is a git dir`, "nothing was pulled")
	after := stateOf(t, repo)
	before.Objects, after.Objects = "", "" // the fetched objects stay, unreferenced
	if !reflect.DeepEqual(before, after) {
		t.Errorf("a refused pull changed the repository:\nbefore %+v\nafter  %+v", before, after)
	}
	if tip, _, err := Pull(ctx, repo, *base, bundles[:2], clean, "stratus/t1", nil); err != nil || gitT(t, repo, "show", tip+":b.txt") != "x" {
		t.Errorf("pull of the clean step = %s, %v", tip, err)
	}
}

// TestPull_RefusesAStepCommitTouchingStratusOwnPaths: docs/security.md §
// Workspace commits (a hardening finding) — a run whose head holds a
// hand-built commit adding .stratus/task/task.md and .stratus/hooks/x, or
// a symlink notes.txt -> .stratus/config.yaml, was pulled: the first as
// an empty commit (the paths dropped without a word), the second into the
// operator's branch, where writing notes.txt rewrites Stratus's config.
// Pull now refuses each, naming the commit, the path and the rule, and
// makes no branch; the clean step before them still pulls.
func TestPull_RefusesAStepCommitTouchingStratusOwnPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a.txt": "a\n", ".stratus/config.yaml": "providers: {}\n"})
	tmp := t.TempDir()
	baseBundle := filepath.Join(tmp, "0.bundle")
	base, err := Freeze(ctx, repo, baseBundle, FreezeOptions{Exclude: runExclude})
	if err != nil {
		t.Fatal(err)
	}
	eng := workspacetest.NewRepo(t)
	eng.Fetch(baseBundle)
	a := workspacetest.File("a.txt", eng.Blob("a\n"))
	clean := eng.Commit(eng.Tree(a, workspacetest.File("b.txt", eng.Blob("b\n"))), "step 1", base.Commit)
	cleanBundle := filepath.Join(tmp, "1.bundle")
	eng.Bundle(cleanBundle, clean, base.Commit)
	x := eng.Blob("x\n")
	cases := []struct {
		name  string
		entry workspacetest.Entry
		says  string
	}{
		{"the task file", workspacetest.Dir(".stratus", eng.Tree(workspacetest.Dir("task", eng.Tree(workspacetest.File("task.md", x))))),
			`.stratus/task/task.md: inside ".stratus", Stratus's own path`},
		{"a hook", workspacetest.Dir(".stratus", eng.Tree(workspacetest.Dir("hooks", eng.Tree(workspacetest.Entry{Mode: "100755", Name: "x", ID: x})))),
			`.stratus/hooks/x: inside ".stratus"`},
		{"a file of the ctx dir", workspacetest.Dir("workspace", eng.Tree(workspacetest.Dir("tasks", eng.Tree(workspacetest.Dir("t1", eng.Tree(workspacetest.Dir("ctx", eng.Tree(workspacetest.File("plan.md", x))))))))),
			`workspace/tasks/t1/ctx/plan.md: inside "workspace/tasks/t1/ctx"`},
		{"a symlink into the config", workspacetest.Link("notes.txt", eng.Blob(".stratus/config.yaml")),
			`notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`},
	}
	for i, c := range cases {
		bad := eng.Commit(eng.Tree(a, workspacetest.File("b.txt", eng.Blob("b\n")), c.entry), "step 2", clean)
		badBundle := filepath.Join(tmp, fmt.Sprintf("bad%d.bundle", i))
		eng.Bundle(badBundle, bad, clean)
		before := stateOf(t, repo)
		_, _, err := Pull(ctx, repo, *base, []string{baseBundle, cleanBundle, badBundle}, bad, "stratus/t1", runExclude)
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) ||
			!strings.Contains(err.Error(), "the run's commit "+bad[:12]) || !strings.Contains(err.Error(), "nothing was pulled") {
			t.Errorf("%s: pull = %v; want EUNPROCESSABLE naming commit %.12s and saying %q", c.name, err, bad, c.says)
		}
		after := stateOf(t, repo)
		before.Objects, after.Objects = "", ""
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%s: a refused pull changed the repository:\nbefore %+v\nafter  %+v", c.name, before, after)
		}
	}
	if tip, _, err := Pull(ctx, repo, *base, []string{baseBundle, cleanBundle}, clean, "stratus/t1", runExclude); err != nil ||
		gitT(t, repo, "show", tip+":b.txt") != "b" || gitT(t, repo, "show", tip+":.stratus/config.yaml") != "providers: {}" {
		t.Errorf("pull of the clean step = %s, %v; want b.txt added and the operator's tracked config kept", tip, err)
	}
}

// TestCommitStep_StratusOwnPathsStayOut: docs/security.md § Workspace
// commits — the runner's own commit leaves the excluded paths out, as it
// did (a file under .stratus or the ctx dir is not committed, not
// refused), and refuses what would break the rule at the worker API: a
// spelling a case-insensitive file system folds into .stratus, a symlink
// into .stratus. Freeze refuses an operator's symlink into .stratus.
func TestCommitStep_StratusOwnPathsStayOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := setupRun(t, map[string]string{"a.txt": "a\n"})
	write(t, r.dir, map[string]string{
		"a.txt":                        "a, by step 1\n",
		".stratus/task/task.md":        "the task\n",
		"workspace/tasks/t1/ctx/in.md": "context\n",
	})
	s1, changed, err := CommitStep(ctx, r.dir, r.base.Commit, "step 1", filepath.Join(r.tmp, "1.bundle"), 0)
	if err != nil || !changed {
		t.Fatalf("CommitStep = %s, %v, %v", s1, changed, err)
	}
	if files := gitT(t, r.dir, "ls-tree", "-r", "--name-only", s1); files != "a.txt" {
		t.Errorf("step tree %q, want a.txt alone", files)
	}
	for name, files := range map[string]map[string]string{
		"capitals": {".STRATUS/hooks/x": "x\n"},
		"symlink":  {"notes.txt": "-> .stratus/config.yaml"},
	} {
		dir := filepath.Join(r.tmp, name)
		if err := Materialize(ctx, dir, []string{r.bundles[0], filepath.Join(r.tmp, "1.bundle")}, s1, runExclude); err != nil {
			t.Fatal(err)
		}
		write(t, dir, files)
		_, _, err := CommitStep(ctx, dir, s1, "step 2", filepath.Join(r.tmp, name+".bundle"), 0)
		wantCode(t, err, stratus.EINVALID, `Stratus's own path`, "docs/security.md § Workspace commits")
	}

	repo := newRepo(t, map[string]string{"a.txt": "a\n", "notes.txt": "-> .stratus/config.yaml"})
	_, err = Freeze(ctx, repo, filepath.Join(t.TempDir(), "b.bundle"), FreezeOptions{Exclude: runExclude})
	wantCode(t, err, stratus.EINVALID, `notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`)
}

// TestPull_UntrackedAtRunStartStayOutOfTheBranch: README § Workspaces —
// the branch holds the run's changes on top of the operator's HEAD and the
// tracked files' uncommitted edits; a file untracked at run start (the
// task file, another run's scratch) is seen by the engines but never
// committed, so the operator can merge the branch over their checkout.
func TestPull_UntrackedAtRunStartStayOutOfTheBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{".gitignore": "build/\n", "a.txt": "a\n", "keep.txt": "k\n"})
	write(t, repo, map[string]string{
		"a.txt":                          "a, edited before the run\n",
		"staged.txt":                     "staged, in no commit\n",
		"task.md":                        "the task\n",
		"workspace/tasks/prev/ctx/p.md":  "an earlier run's scratch\n",
		"build/out.bin":                  "ignored\n",
		".stratus/stratus.db":            "state\n",
		"workspace/tasks/t1/ctx/plan.md": "this run's ctx\n",
	})
	gitT(t, repo, "add", "staged.txt")
	tmp := t.TempDir()
	bundles := []string{filepath.Join(tmp, "0.bundle")}
	base, err := Freeze(ctx, repo, bundles[0], FreezeOptions{Exclude: runExclude, Message: "stratus: workspace of task t1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"task.md", "workspace"}; !reflect.DeepEqual(base.Untracked, want) {
		t.Errorf("base.Untracked = %q, want %q", base.Untracked, want)
	}
	dir := filepath.Join(tmp, "w")
	if err := Materialize(ctx, dir, bundles, base.Commit, runExclude); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, dir)["task.md"]; got != "the task\n" {
		t.Errorf("the engines' checkout holds task.md = %q, want the untracked file", got)
	}
	write(t, dir, map[string]string{"a.txt": "a, by the step\n", "new.txt": "new\n"})
	bundles = append(bundles, filepath.Join(tmp, "1.bundle"))
	head, _, err := CommitStep(ctx, dir, base.Commit, "implementation#1", bundles[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	tip, commits, err := Pull(ctx, repo, *base, bundles, head, "stratus/t1", runExclude)
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 2 {
		t.Fatalf("commits %v, want the uncommitted changes and the step", commits)
	}
	if got := gitT(t, repo, "diff-tree", "--no-commit-id", "--name-only", "-r", commits[0]); got != "a.txt\nstaged.txt" {
		t.Errorf("the first commit changes %q, want a.txt and staged.txt (tracked at run start) only", got)
	}
	if got := gitT(t, repo, "log", "-1", "--format=%B", commits[0]); got != "stratus: uncommitted changes at run start" {
		t.Errorf("the first commit's message = %q", got)
	}
	if got := gitT(t, repo, "ls-tree", "-r", "--name-only", tip); got != ".gitignore\na.txt\nkeep.txt\nnew.txt\nstaged.txt" {
		t.Errorf("tip files:\n%s", got)
	}
	// The branch carries the operator's edits: set aside, they come back
	// with the merge, a fast-forward that no untracked file stands in.
	gitT(t, repo, "stash", "-q")
	gitT(t, repo, "merge", "-q", "--ff-only", "stratus/t1")
	if got := readTree(t, repo); got["a.txt"] != "a, by the step\n" || got["new.txt"] != "new\n" || got["task.md"] != "the task\n" {
		t.Errorf("after the merge: a.txt %q, new.txt %q, task.md %q", got["a.txt"], got["new.txt"], got["task.md"])
	}
	if got := gitT(t, repo, "status", "--porcelain", "--untracked-files=no"); got != "" {
		t.Errorf("after the merge, git status: %s", got)
	}
}

// TestPull_WorkDirUntrackedAsAWhole: a work dir its repository does not
// track at all (a new dir) brings back the run's changes alone.
func TestPull_WorkDirUntrackedAsAWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"top.txt": "top\n"})
	work := filepath.Join(repo, "new")
	write(t, work, map[string]string{"task.md": "the task\n"})
	tmp := t.TempDir()
	bundles := []string{filepath.Join(tmp, "0.bundle")}
	base, err := Freeze(ctx, work, bundles[0], FreezeOptions{Exclude: []string{".stratus"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"."}; !reflect.DeepEqual(base.Untracked, want) {
		t.Errorf("base.Untracked = %q, want %q", base.Untracked, want)
	}
	dir := filepath.Join(tmp, "w")
	if err := Materialize(ctx, dir, bundles, base.Commit, nil); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"out.txt": "made by the run\n"})
	bundles = append(bundles, filepath.Join(tmp, "1.bundle"))
	head, _, err := CommitStep(ctx, dir, base.Commit, "s#1", bundles[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	tip, commits, err := Pull(ctx, repo, *base, bundles, head, "stratus/t1", []string{".stratus"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, repo, "ls-tree", "-r", "--name-only", tip); len(commits) != 1 || got != "new/out.txt\ntop.txt" {
		t.Errorf("commits %v, tip files %q: want the step alone, adding new/out.txt", commits, got)
	}
}

func TestUntrackedTrailers_RoundTrip(t *testing.T) {
	t.Parallel()
	paths := []string{"task.md", "a dir/with \"quotes\"", "line\nbreak", "é"}
	msg := withUntracked("stratus: workspace of task t1", paths)
	got, rest := untrackedOf([]byte(msg))
	if !reflect.DeepEqual(got, paths) || string(rest) != "stratus: workspace of task t1\n" {
		t.Errorf("untrackedOf(%q) = %q, %q", msg, got, rest)
	}
	if got, rest := untrackedOf([]byte("plain\n")); got != nil || string(rest) != "plain\n" {
		t.Errorf("a message without trailers: %q, %q", got, rest)
	}
}
