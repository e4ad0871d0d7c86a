package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
)

// AuthorName and AuthorEmail are the author and committer of every commit
// Stratus makes.
const (
	AuthorName  = "Stratus"
	AuthorEmail = "stratus@stratus.invalid"
)

// DefaultMaxBytes is the default cap, in bytes, of a workspace snapshot
// (the sum of its file sizes) and of a step bundle.
const DefaultMaxBytes = 256 << 20

// gitEnv is gitwork.FixedConfig, set through the GIT_CONFIG_COUNT
// environment, followed by extra.
func gitEnv(extra []string) []string {
	return append(gitwork.ConfigEnv(gitwork.FixedConfig()...), extra...)
}

// git runs git in dir through gitwork.Run with the fixed configuration and
// env, and returns its stdout.
func git(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	return gitwork.Run(ctx, dir, gitEnv(env), args...)
}

// gitLine is git's stdout without surrounding whitespace.
func gitLine(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, err := git(ctx, dir, env, args...)
	return strings.TrimSpace(string(out)), err
}

// gitIn is git with stdin (gitwork.RunInput).
func gitIn(ctx context.Context, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	return gitwork.RunInput(ctx, dir, gitEnv(env), stdin, args...)
}

// commitEnv makes AuthorName/AuthorEmail the author and committer at t
// (now when zero).
func commitEnv(t time.Time) []string {
	if t.IsZero() {
		t = time.Now()
	}
	date := fmt.Sprintf("%d %s", t.Unix(), t.Format("-0700"))
	return []string{
		"GIT_AUTHOR_NAME=" + AuthorName, "GIT_AUTHOR_EMAIL=" + AuthorEmail, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + AuthorName, "GIT_COMMITTER_EMAIL=" + AuthorEmail, "GIT_COMMITTER_DATE=" + date,
	}
}

// CleanExcludes checks a run's exclude paths (relative to the work dir,
// slash-separated: ".stratus", "workspace/tasks/t1/ctx") and returns them
// cleaned, without trailing slashes, as TreeCheck.Exclude takes them.
// Errors: EINVALID (field exclude) naming a path that is empty, absolute,
// leaves the work dir or holds a newline or a backslash.
func CleanExcludes(exclude []string) ([]string, error) {
	return cleanExcludes("exclude", exclude)
}

// cleanExcludes is CleanExcludes with the error's field.
func cleanExcludes(field string, exclude []string) ([]string, error) {
	var out []string
	for _, x := range exclude {
		c := path.Clean(x)
		if x == "" || path.IsAbs(x) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsAny(x, "\n\\") {
			return nil, stratus.FieldErrorf(stratus.EINVALID, field,
				"exclude path %q is not a slash-separated path inside the work dir (such as \".stratus\" or \"workspace/tasks/t1/ctx\")", x)
		}
		out = append(out, c)
	}
	return out, nil
}

// excluded reports whether p (relative to the work dir) is one of the
// exclude paths or under one.
func excluded(p string, exclude []string) bool {
	for _, x := range exclude {
		if p == x || strings.HasPrefix(p, x+"/") {
			return true
		}
	}
	return false
}

// pathspecs are literal pathspecs, with magic ("exclude") when given.
func pathspecs(magic string, paths []string) []string {
	var out []string
	for _, p := range paths {
		if magic != "" {
			out = append(out, ":("+magic+",literal)"+p)
		} else {
			out = append(out, ":(literal)"+p)
		}
	}
	return out
}

// Modes git stores in a tree.
const (
	modeSymlink = "120000"
	modeGitlink = "160000"
)

// entry is one file of a tree (`git ls-tree -r -l`).
type entry struct {
	Mode, Type, Sha, Path string
	Size                  int64
}

// lsTree lists every file of tree, recursively, with blob sizes.
func lsTree(ctx context.Context, dir string, env []string, tree string) ([]entry, error) {
	out, err := git(ctx, dir, env, "ls-tree", "-r", "-l", "-z", "--full-tree", tree)
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			continue
		}
		e := entry{Mode: f[0], Type: f[1], Sha: f[2], Path: name}
		e.Size, _ = strconv.ParseInt(f[3], 10, 64) // "-" for a gitlink
		es = append(es, e)
	}
	return es, nil
}

// change is one record of `git diff-tree -r -z --no-renames`.
type change struct {
	OldMode, NewMode, OldSha, NewSha, Status, Path string
}

// diffTree lists the changes from tree-ish a to tree-ish b.
func diffTree(ctx context.Context, dir string, env []string, a, b string) ([]change, error) {
	out, err := git(ctx, dir, env, "diff-tree", "-r", "-z", "--no-renames", "--no-abbrev", a, b)
	if err != nil {
		return nil, err
	}
	recs := strings.Split(string(out), "\x00")
	var cs []change
	for i := 0; i+1 < len(recs); i++ {
		if !strings.HasPrefix(recs[i], ":") {
			continue
		}
		f := strings.Fields(recs[i][1:])
		i++
		if len(f) < 5 {
			continue
		}
		cs = append(cs, change{OldMode: f[0], NewMode: f[1], OldSha: f[2], NewSha: f[3], Status: f[4][:1], Path: recs[i]})
	}
	return cs, nil
}

// indexInfo is `git update-index -z --index-info` input making the index
// take changes, each path under prefix: a deletion removes the path, any
// other change sets its new mode and blob.
func indexInfo(prefix string, cs []change) []byte {
	var b bytes.Buffer
	for _, c := range cs {
		if c.Status == "D" {
			fmt.Fprintf(&b, "0 %s\t%s%s\x00", c.OldSha, prefix, c.Path)
		} else {
			fmt.Fprintf(&b, "%s %s\t%s%s\x00", c.NewMode, c.NewSha, prefix, c.Path)
		}
	}
	return b.Bytes()
}

// catBlobs returns the content of each blob (`git cat-file --batch`).
func catBlobs(ctx context.Context, dir string, env []string, shas []string) (map[string]string, error) {
	out, err := gitIn(ctx, dir, env, []byte(strings.Join(shas, "\n")+"\n"), "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for len(out) > 0 {
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			break
		}
		f := strings.Fields(string(out[:nl]))
		out = out[nl+1:]
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file --batch: unexpected header %q", strings.Join(f, " "))
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n+1 > len(out) {
			return nil, fmt.Errorf("git cat-file --batch: bad size in %q", strings.Join(f, " "))
		}
		m[f[0]] = string(out[:n])
		out = out[n+1:]
	}
	return m, nil
}

// checkTree applies the workspace commit rules (TreeCheck;
// docs/security.md § Workspace commits) to the files of a tree as `git
// ls-tree -r` lists them, reading the targets of its symlinks, with
// exclude (cleaned) as the run's exclude list. field and what name the
// input in the EINVALID error.
func checkTree(ctx context.Context, dir string, env []string, es []entry, exclude []string, field, what string) error {
	vs, err := treeViolations(ctx, dir, env, es, exclude)
	if err != nil {
		return err
	}
	return RulesError(stratus.EINVALID, field, what, vs,
		"make symlinks relative and inside, pointing nowhere into Stratus's own paths, remove submodules and nested repositories (or list them in .gitignore)")
}

// treeViolations is what TreeCheck, with exclude as its Exclude, finds in
// es, the symlinks' targets read from dir's repository.
func treeViolations(ctx context.Context, dir string, env []string, es []entry, exclude []string) ([]Violation, error) {
	var linkShas []string
	for _, e := range es {
		if e.Mode == modeSymlink {
			linkShas = append(linkShas, e.Sha)
		}
	}
	targets := map[string]string{}
	if len(linkShas) > 0 {
		var err error
		if targets, err = catBlobs(ctx, dir, env, linkShas); err != nil {
			return nil, err
		}
	}
	c := TreeCheck{Exclude: exclude}
	for _, e := range es {
		mode, err := strconv.ParseUint(e.Mode, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("git ls-tree: mode %q of %s: %w", e.Mode, e.Path, err)
		}
		te := TreeEntry{Path: e.Path, Mode: uint32(mode)}
		if e.Mode == modeSymlink {
			te.Target = targets[e.Sha]
		}
		c.Add(te)
	}
	return c.Violations(), nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// sized is a path and its size in bytes.
type sized struct {
	Path string
	Size int64
}

// biggest names the n biggest of ps with their sizes, biggest first.
func biggest(ps []sized, n int) string {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Size > ps[j].Size })
	var parts []string
	for i := 0; i < len(ps) && i < n; i++ {
		parts = append(parts, fmt.Sprintf("%s (%s)", ps[i].Path, human(ps[i].Size)))
	}
	return strings.Join(parts, ", ")
}

// human is n bytes for a reader: "300.0 MiB (314572800 bytes)".
func human(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n == 1 {
		return "1 byte"
	} else if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", v, units[u], n)
}

// nonce is a random hex string for a temporary ref namespace.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// resolveCommit is the full SHA of the commit rev names in dir, or an
// ENOTFOUND error naming what (field) was looked for.
func resolveCommit(ctx context.Context, dir string, env []string, field, rev string) (string, error) {
	if rev == "" {
		return "", stratus.FieldErrorf(stratus.EINVALID, field, "no commit given")
	}
	sha, err := gitLine(ctx, dir, env, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, field, "commit %s is not in the repository at %s", rev, dir)
	}
	return sha, nil
}
