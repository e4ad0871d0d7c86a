package gitwork

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus/internal/english"
)

// ChangedPath is one path of a snapshot.
type ChangedPath struct {
	Kind    string // A, M, D or R (a copy counts as A, a type change as M)
	Path    string // the new path (the old one for D), relative to the tree's Dir
	Old     string // R only: the old path
	Added   int    // lines; -1 for a binary file
	Deleted int
	Blob    string // the post-image blob id (zeros for D): what tells two snapshots apart
}

// Snapshot is the change of a work dir against a base commit
// (docs/contracts.md § Template variables: {diff_path} is the full change
// against {diff_base}).
type Snapshot struct {
	Base  string
	Paths []ChangedPath
	Diff  []byte // the full patch (git diff), as git prints it
}

// Snapshot diffs the work tree under Dir — tracked and untracked files,
// .gitignore respected, the exclude paths (relative to Dir) left out —
// against commit base, with paths relative to Dir and renames detected.
// It stages into a throwaway index (GIT_INDEX_FILE), so the repository's
// own index, HEAD and refs are never touched. Three git processes: read
// the base into the index, stage the work tree, and one diff printing the
// raw records, the line counts and the patch together.
func (t *Tree) Snapshot(ctx context.Context, base string, exclude []string) (*Snapshot, error) {
	tmp, err := os.MkdirTemp("", "stratus-index-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := Run(ctx, t.Dir, env, "read-tree", base); err != nil {
		return nil, err
	}
	add := []string{"add", "--all", "--", "."}
	for _, x := range NotIgnored(ctx, t.Dir, nil, exclude) {
		add = append(add, ":(exclude)"+x)
	}
	if _, err := Run(ctx, t.Dir, env, add...); err != nil {
		return nil, err
	}
	// The excludes bound the diff too: a tracked file under an excluded
	// path that .gitignore also ignores was staged above.
	diff := []string{"diff", "--cached", "--relative", "-M", "--no-color", "--no-ext-diff",
		"--raw", "--no-abbrev", "--numstat", "--patch", "-z", base, "--", "."}
	for _, x := range exclude {
		diff = append(diff, ":(exclude,literal)"+x)
	}
	out, err := Run(ctx, t.Dir, env, diff...)
	if err != nil {
		return nil, err
	}
	paths, patch, err := parseDiff(out)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Base: base, Paths: paths, Diff: patch}, nil
}

// NotIgnored returns the paths of exclude (relative to dir) that git
// does not ignore there, in the repository env names (nil: dir's own):
// `git add` refuses a pathspec, even an exclude one, that names an ignored
// path (a .gitignore listing .stratus/), and an ignored path is left out
// anyway. --no-index: a directory ignored by a pattern counts as ignored
// though the index tracks files under it.
func NotIgnored(ctx context.Context, dir string, env []string, exclude []string) []string {
	if len(exclude) == 0 {
		return nil
	}
	out, _ := Run(ctx, dir, env, append([]string{"check-ignore", "--no-index", "--"}, exclude...)...) // exit 1: none ignored
	ignored := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ignored[strings.TrimSuffix(l, "/")] = true
	}
	var keep []string
	for _, x := range exclude {
		if !ignored[strings.TrimSuffix(x, "/")] {
			keep = append(keep, x)
		}
	}
	return keep
}

// parseDiff reads `git diff --raw --numstat --patch -z`: the raw records,
// then the numstat records, then an empty record, then the patch (which -z
// leaves as `git diff` prints it). Each path gets its line counts.
func parseDiff(out []byte) ([]ChangedPath, []byte, error) {
	r := &records{b: out}
	paths := parseRaw(r)
	counts := parseNumstat(r)
	if r.pos < len(out) {
		if out[r.pos] != 0 {
			return nil, nil, fmt.Errorf("git diff: unexpected output after the line counts at byte %d", r.pos)
		}
		r.pos++
	}
	for i := range paths {
		c := counts[paths[i].Path] // a path without a count (none seen) reads +0 -0
		paths[i].Added, paths[i].Deleted = c[0], c[1]
	}
	return paths, out[r.pos:], nil
}

// records reads NUL-terminated records.
type records struct {
	b   []byte
	pos int
}

// next returns the next record; ok is false at the end.
func (r *records) next() (string, bool) {
	if r.pos >= len(r.b) {
		return "", false
	}
	i := bytes.IndexByte(r.b[r.pos:], 0)
	if i < 0 {
		s := string(r.b[r.pos:])
		r.pos = len(r.b)
		return s, true
	}
	s := string(r.b[r.pos : r.pos+i])
	r.pos += i + 1
	return s, true
}

// at reports whether the next record starts with c.
func (r *records) at(c byte) bool { return r.pos < len(r.b) && r.b[r.pos] == c }

// parseRaw reads the `--raw -z` records: ":<modes> <old> <new> <status>\0<path>\0"
// or, for a rename or copy, ":…\0<old path>\0<new path>\0".
func parseRaw(r *records) []ChangedPath {
	var ps []ChangedPath
	for r.at(':') {
		meta, _ := r.next()
		name, ok := r.next()
		f := strings.Fields(meta[1:])
		if !ok || len(f) < 5 || f[4] == "" {
			continue
		}
		p := ChangedPath{Kind: f[4][:1], Blob: f[3], Path: name}
		switch p.Kind {
		case "R", "C":
			if to, ok := r.next(); ok {
				p.Old, p.Path = p.Path, to
			}
			if p.Kind == "C" {
				p.Kind, p.Old = "A", ""
			}
		case "T":
			p.Kind = "M"
		}
		ps = append(ps, p)
	}
	return ps
}

// parseNumstat reads the `--numstat -z` records, up to an empty record or
// the end, into path → {added, deleted} (-1, -1 for a binary file). A
// rename's record is "a\td\t\0old\0new\0".
func parseNumstat(r *records) map[string][2]int {
	m := map[string][2]int{}
	for r.pos < len(r.b) && !r.at(0) {
		rec, _ := r.next()
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			continue
		}
		name := f[2]
		if name == "" {
			r.next() // the old path
			name, _ = r.next()
		}
		a, errA := strconv.Atoi(f[0])
		d, errD := strconv.Atoi(f[1])
		if errA != nil || errD != nil {
			a, d = -1, -1
		}
		m[name] = [2]int{a, d}
	}
	return m
}

// MaxOverviewPaths bounds the paths change-overview.txt lists
// (docs/contracts.md § Template variables: at most 200 paths, then a count of
// the rest).
const MaxOverviewPaths = 200

// Overview renders change-overview.txt
// (docs/contracts.md § Template variables): a header with the totals, the
// base and the full diff's size and path, then one line per changed path —
// kind, path (old → new for a rename), +added -deleted or "binary" — at most
// MaxOverviewPaths, then a count of the rest.
func (snap *Snapshot) Overview(diffPath string) []byte {
	added, deleted := 0, 0
	for _, p := range snap.Paths {
		if p.Added > 0 {
			added += p.Added
		}
		if p.Deleted > 0 {
			deleted += p.Deleted
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Change overview: %s, +%d -%d lines, against base %s\n", english.Plural(len(snap.Paths), "path"), added, deleted, snap.Base)
	fmt.Fprintf(&b, "Full diff: %s (%d bytes)\n\n", diffPath, len(snap.Diff))
	for i, p := range snap.Paths {
		if i == MaxOverviewPaths {
			fmt.Fprintf(&b, "… and %s\n", morePaths(len(snap.Paths)-i))
			break
		}
		name := p.Path
		if p.Kind == "R" {
			name = p.Old + " → " + p.Path
		}
		lines := fmt.Sprintf("+%d -%d", p.Added, p.Deleted)
		if p.Added < 0 {
			lines = "binary"
		}
		fmt.Fprintf(&b, "%s %s %s\n", p.Kind, name, lines)
	}
	return b.Bytes()
}

func morePaths(n int) string {
	if n == 1 {
		return "1 more path"
	}
	return fmt.Sprintf("%d more paths", n)
}
