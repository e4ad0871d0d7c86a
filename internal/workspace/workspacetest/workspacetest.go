// Package workspacetest builds git objects and bundles by hand, as an
// engine holding a step's handle could: trees with any entry (a symlink to
// /etc/passwd, a gitlink, a .GIT dir, a mode git never writes), commits on
// any parent, bundles of any range. Tests of the workspace commit rules
// (docs/security.md § Workspace commits) use it on every path that checks
// them: the worker API (workspace/bundlecheck), `stratus pull`, the runner.
package workspacetest

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// Repo is a bare git repository of a test's own.
type Repo struct {
	Dir string
	tb  testing.TB
}

// NewRepo makes an empty bare repository in a temporary directory.
func NewRepo(tb testing.TB) *Repo {
	tb.Helper()
	testenv.MustHaveCommand(tb, "git", "the test builds git objects and bundles")
	r := &Repo{Dir: tb.TempDir(), tb: tb}
	r.Git(nil, "init", "-q", "--bare", ".")
	return r
}

// Git runs git in the repository with stdin (nil: none) and returns its
// trimmed stdout; it fails the test on an error.
func (r *Repo) Git(stdin []byte, args ...string) string {
	r.tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.Dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=engine", "GIT_AUTHOR_EMAIL=engine@example.com",
		"GIT_COMMITTER_NAME=engine", "GIT_COMMITTER_EMAIL=engine@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		r.tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// Blob writes content as a blob and returns its id.
func (r *Repo) Blob(content string) string {
	r.tb.Helper()
	return r.Git([]byte(content), "hash-object", "-w", "--stdin")
}

// Entry is one entry of a tree Tree writes: Mode as git stores it
// ("100644", "40000", "120000", "160000", or any other), Name (any bytes
// but NUL), the object id.
type Entry struct {
	Mode, Name, ID string
}

// File, Link and Dir are the usual entries; a gitlink is Entry{"160000",
// name, any commit id}.
func File(name, id string) Entry { return Entry{"100644", name, id} }
func Link(name, id string) Entry { return Entry{"120000", name, id} }
func Dir(name, id string) Entry  { return Entry{"40000", name, id} }

// Tree writes a tree object of entries exactly as given (git hash-object
// --literally: no check, no sorting, no canonical modes) and returns its id.
func (r *Repo) Tree(entries ...Entry) string {
	r.tb.Helper()
	var b bytes.Buffer
	for _, e := range entries {
		id, err := hex.DecodeString(e.ID)
		if err != nil || len(id) != 20 {
			r.tb.Fatalf("entry %q: %q is not an object id", e.Name, e.ID)
		}
		b.WriteString(e.Mode + " " + e.Name + "\x00")
		b.Write(id)
	}
	return r.Git(b.Bytes(), "hash-object", "-t", "tree", "-w", "--literally", "--stdin")
}

// Commit writes a commit of tree with parents and returns its id.
func (r *Repo) Commit(tree, message string, parents ...string) string {
	r.tb.Helper()
	args := []string{"commit-tree", tree, "-m", message}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	return r.Git(nil, args...)
}

// Bundle writes to path a bundle of tip (as ref refs/heads/tip-<tip>) without
// what exclude reaches (its prerequisites), as `git bundle create` does:
// a thin pack when exclude is given. It returns the bundle's bytes.
func (r *Repo) Bundle(path, tip string, exclude ...string) []byte {
	r.tb.Helper()
	ref := "refs/heads/tip-" + tip // one per tip: tests may bundle in parallel
	r.Git(nil, "update-ref", ref, tip)
	args := []string{"bundle", "create", "--quiet", path, ref}
	for _, x := range exclude {
		args = append(args, "^"+x)
	}
	r.Git(nil, args...)
	b, err := os.ReadFile(path)
	if err != nil {
		r.tb.Fatal(err)
	}
	return b
}

// Fetch fetches the bundles (local paths, in order) into the repository.
func (r *Repo) Fetch(bundles ...string) {
	r.tb.Helper()
	for i, b := range bundles {
		abs, err := filepath.Abs(b)
		if err != nil {
			r.tb.Fatal(err)
		}
		r.Git(nil, "fetch", "-q", abs, "+refs/*:refs/fetched/"+string(rune('a'+i))+"/*")
	}
}
