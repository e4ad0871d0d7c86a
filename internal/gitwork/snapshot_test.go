package gitwork

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// show renders a snapshot's paths as "<kind> [old→]path +a -d" lines.
func show(ps []ChangedPath) []string {
	var out []string
	for _, p := range ps {
		name := p.Path
		if p.Old != "" {
			name = p.Old + "→" + p.Path
		}
		out = append(out, fmt.Sprintf("%s %s +%d -%d", p.Kind, name, p.Added, p.Deleted))
	}
	slices.Sort(out)
	return out
}

// docs/contracts.md § Template variables: the snapshot is the full change
// against the base — tracked and untracked files, .gitignore respected,
// Stratus's own paths excluded — with each path's kind (A/M/D/R) and line
// counts (binary: -1), the patch exactly as `git diff` prints it, and the
// repository's own index untouched.
func TestSnapshot_KindsAndLineCounts(t *testing.T) {
	t.Parallel()
	dir := repo(t, map[string]string{".gitignore": "*.log\n", "mod.txt": "a\nb\nc\n", "old.txt": "one\ntwo\nthree\nfour\n", "del.txt": "x\ny\n", "link": "regular\n"})
	tr, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	base, err := tr.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "mod.txt"), "a\nB\nc\nd\n")
	if err := os.Rename(filepath.Join(dir, "old.txt"), filepath.Join(dir, "new.txt")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "del.txt"))
	write(t, filepath.Join(dir, "add.txt"), "new\n")
	write(t, filepath.Join(dir, "img.bin"), "\x00\x01\x02binary")
	write(t, filepath.Join(dir, "debug.log"), "ignored\n")
	write(t, filepath.Join(dir, ".stratus/state.db"), "excluded\n")
	write(t, filepath.Join(dir, "work/ctx/plan.md"), "excluded\n")
	os.Remove(filepath.Join(dir, "link"))
	if err := os.Symlink("mod.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	snap, err := tr.Snapshot(context.Background(), base, []string{".stratus", "work/ctx"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A add.txt +1 -0", "A img.bin +-1 --1", "D del.txt +0 -2", "M link +1 -1", "M mod.txt +2 -1", "R old.txt→new.txt +0 -0"}
	if got := show(snap.Paths); !slices.Equal(got, want) {
		t.Errorf("paths:\n got %q\nwant %q", got, want)
	}
	if snap.Base != base {
		t.Errorf("base = %q, want %q", snap.Base, base)
	}
	for _, p := range snap.Paths {
		if len(p.Blob) != 40 || (p.Kind == "D") != (strings.Trim(p.Blob, "0") == "") {
			t.Errorf("%s %s: blob %q, want a full id (zeros only for D)", p.Kind, p.Path, p.Blob)
		}
	}

	// The patch is byte for byte what `git diff` prints for the same index.
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	for _, args := range [][]string{{"read-tree", base}, {"add", "--all", "--", ".", ":(exclude).stratus", ":(exclude)work/ctx"}} {
		if _, err := Run(context.Background(), dir, idx, args...); err != nil {
			t.Fatal(err)
		}
	}
	patch, err := Run(context.Background(), dir, idx, "diff", "--cached", "--relative", "-M", "--no-color", "--no-ext-diff", base)
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Diff) != string(patch) {
		t.Errorf("snapshot diff differs from git diff:\n%s\n---\n%s", snap.Diff, patch)
	}
	if strings.Contains(string(snap.Diff), "debug.log") || strings.Contains(string(snap.Diff), "excluded") {
		t.Errorf("the diff holds an ignored or excluded path:\n%s", snap.Diff)
	}
	if staged := git(t, dir, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("the snapshot staged into the real index: %q", staged)
	}
}

// Paths are relative to the tree's dir and the change outside it is not
// part of the snapshot; no change is an empty snapshot.
func TestSnapshot_RelativeToASubdir(t *testing.T) {
	t.Parallel()
	root := repo(t, map[string]string{"app/a.txt": "a\n", "lib/b.txt": "b\n"})
	tr, err := Open(context.Background(), filepath.Join(root, "app"))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := tr.Head(context.Background())
	snap, err := tr.Snapshot(context.Background(), base, nil)
	if err != nil || len(snap.Paths) != 0 || len(snap.Diff) != 0 {
		t.Fatalf("unchanged tree: %+v, %v", snap, err)
	}
	write(t, filepath.Join(root, "app/a.txt"), "A\n")
	write(t, filepath.Join(root, "lib/b.txt"), "B\n")
	snap, err = tr.Snapshot(context.Background(), base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(snap.Paths); !slices.Equal(got, []string{"M a.txt +1 -1"}) {
		t.Errorf("paths = %q", got)
	}
	if strings.Contains(string(snap.Diff), "b.txt") || !strings.Contains(string(snap.Diff), "a/a.txt") {
		t.Errorf("diff:\n%s", snap.Diff)
	}
}

// The raw and numstat records of `git diff -z`: a rename's and a copy's two
// paths, a copy read as A, a type change as M, a binary's counts -1, then
// the patch after the empty record.
func TestParseDiff_RecordsThenPatch(t *testing.T) {
	t.Parallel()
	z := "\x00"
	out := ":100644 100644 aaa bbb R087" + z + "old name.go" + z + "new name.go" + z +
		":000000 100644 000 ccc C100" + z + "src.go" + z + "copy.go" + z +
		":100644 120000 ddd eee T" + z + "link" + z +
		":000000 100644 000 fff A" + z + "img.png" + z +
		"3\t1\t" + z + "old name.go" + z + "new name.go" + z +
		"0\t0\t" + z + "src.go" + z + "copy.go" + z +
		"1\t1\tlink" + z +
		"-\t-\timg.png" + z +
		z + "diff --git a/x b/x\n"
	paths, patch, err := parseDiff([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []ChangedPath{
		{Kind: "R", Path: "new name.go", Old: "old name.go", Added: 3, Deleted: 1, Blob: "bbb"},
		{Kind: "A", Path: "copy.go", Blob: "ccc"},
		{Kind: "M", Path: "link", Added: 1, Deleted: 1, Blob: "eee"},
		{Kind: "A", Path: "img.png", Added: -1, Deleted: -1, Blob: "fff"},
	}
	if !slices.Equal(paths, want) {
		t.Errorf("paths:\n got %+v\nwant %+v", paths, want)
	}
	if string(patch) != "diff --git a/x b/x\n" {
		t.Errorf("patch = %q", patch)
	}
	if p, patch, err := parseDiff(nil); err != nil || p != nil || len(patch) != 0 {
		t.Errorf("empty output: %v %q %v", p, patch, err)
	}
}

// A .gitignore that lists an excluded path (an operator ignoring .stratus/)
// does not break the snapshot: git add refuses a pathspec naming an
// ignored path, so ignored excludes are dropped from it.
func TestSnapshot_ExcludeThatIsIgnored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".stratus"), 0o755)
	os.WriteFile(filepath.Join(dir, ".stratus", "config.yaml"), []byte("c: 1\n"), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
	// .stratus/ tracked, then ignored, its tracked file edited.
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".stratus/\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".stratus", "config.yaml"), []byte("c: 2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".stratus", "x"), []byte("x\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "ctx"), 0o755)
	os.WriteFile(filepath.Join(dir, "ctx", "y"), []byte("y\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("b\n"), 0o644)
	tree, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := tree.Head(ctx)
	snap, err := tree.Snapshot(ctx, base, []string{".stratus", "ctx"})
	if err != nil {
		t.Fatalf("Snapshot with an ignored exclude: %v", err)
	}
	var got []string
	for _, p := range snap.Paths {
		got = append(got, p.Path)
	}
	if strings.Join(got, " ") != ".gitignore a.txt" {
		t.Errorf("paths %q, want .gitignore and a.txt", got)
	}
}
