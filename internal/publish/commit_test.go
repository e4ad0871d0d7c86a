package publish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus"
)

var orchestrator = Identity{Name: "Stratus", Email: "stratus@stratus.invalid"}

// hostileHome gives HOME a git configuration that would change the
// commit if it took part: another identity, a pre-commit hook that
// refuses, signing that cannot work.
func hostileHome(t *testing.T, w world) {
	t.Helper()
	hooks := filepath.Join(w.home, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "pre-commit"), []byte("#!/bin/sh\necho refused by the operator's hook >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "[user]\n\tname = Operator\n\temail = operator@example.invalid\n[core]\n\thooksPath = " + hooks +
		"\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = /bin/false\n"
	if err := os.WriteFile(filepath.Join(w.home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommit_OrchestratorOwnsTheCommit: what the run left uncommitted —
// changed, new and deleted files — becomes one commit on the checked-out
// branch with the given identity as author and committer; the operator's
// global identity, hooks and signing take no part (worc configuration.md
// § `git`: the orchestrator-owned commit).
func TestCommit_OrchestratorOwnsTheCommit(t *testing.T) {
	w := setup(t)
	before := git(t, w.local, "rev-parse", "HEAD")
	hostileHome(t, w)
	for name, content := range map[string]string{"a.txt": "changed\n", "new.txt": "new\n"} {
		if err := os.WriteFile(filepath.Join(w.local, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sha, err := Commit(context.Background(), w.local, "chore(orchestrator): audit trail for t1", orchestrator)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, w.local, "rev-parse", "refs/heads/stratus/t1"); got != sha {
		t.Fatalf("branch at %s, want the new commit %s", got, sha)
	}
	if parent := git(t, w.local, "rev-parse", sha+"^"); parent != before {
		t.Fatalf("parent %s, want %s", parent, before)
	}
	if who := git(t, w.local, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", sha); who != "Stratus <stratus@stratus.invalid>|Stratus <stratus@stratus.invalid>|chore(orchestrator): audit trail for t1" {
		t.Fatalf("commit = %q", who)
	}
	if files := git(t, w.local, "diff-tree", "--no-commit-id", "--name-status", "-r", sha); files != "M\ta.txt\nA\tnew.txt" {
		t.Fatalf("commit holds %q", files)
	}
	if st := git(t, w.local, "status", "--porcelain"); st != "" {
		t.Fatalf("work tree not clean after the commit: %q", st)
	}
}

// TestCommit_NothingToCommit: a clean checkout returns its head and makes
// no commit, never an empty one.
func TestCommit_NothingToCommit(t *testing.T) {
	w := setup(t)
	head := git(t, w.local, "rev-parse", "HEAD")
	sha, err := Commit(context.Background(), w.local, "m", orchestrator)
	if err != nil || sha != head {
		t.Fatalf("Commit = %s, %v; want the head %s", sha, err, head)
	}
	if n := git(t, w.local, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("%s commits, want 1", n)
	}
}

// TestCommit_DetachedAndUnborn: a detached checkout (the run's
// materialized workspace) moves HEAD alone; a repository without a
// commit gets a root commit, or EUNPROCESSABLE with nothing to commit.
func TestCommit_DetachedAndUnborn(t *testing.T) {
	w := setup(t)
	base := git(t, w.local, "rev-parse", "HEAD")
	git(t, w.local, "checkout", "--quiet", "--detach")
	if err := os.WriteFile(filepath.Join(w.local, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sha, err := Commit(context.Background(), w.local, "m", orchestrator)
	if err != nil || sha == base {
		t.Fatalf("Commit = %s, %v; want a new commit", sha, err)
	}
	if got := git(t, w.local, "rev-parse", "HEAD"); got != sha {
		t.Fatalf("HEAD at %s, want %s", got, sha)
	}
	if got := git(t, w.local, "rev-parse", "refs/heads/stratus/t1"); got != base {
		t.Fatalf("branch moved to %s, want it left at %s", got, base)
	}

	empty := filepath.Join(t.TempDir(), "empty")
	git(t, filepath.Dir(empty), "init", "--quiet", empty)
	if _, err := Commit(context.Background(), empty, "m", orchestrator); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE {
		t.Fatalf("Commit of an empty repository = %v, want EUNPROCESSABLE", err)
	}
	if err := os.WriteFile(filepath.Join(empty, "f"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := Commit(context.Background(), empty, "m", orchestrator)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, empty, "rev-list", "--count", root); got != "1" {
		t.Fatalf("root commit has history of %s, want 1", got)
	}
}

// TestCommit_BadInput: an empty message, an identity that is not one, or
// a dir in no repository is EINVALID naming the field.
func TestCommit_BadInput(t *testing.T) {
	w := setup(t)
	for _, tc := range []struct {
		dir, msg string
		who      Identity
		field    string
	}{
		{w.local, " ", orchestrator, "message"},
		{w.local, "m", Identity{Email: "e@x"}, "author.name"},
		{w.local, "m", Identity{Name: "A <b>", Email: "e@x"}, "author.name"},
		{w.local, "m", Identity{Name: "A"}, "author.email"},
		{t.TempDir(), "m", orchestrator, "dir"},
	} {
		_, err := Commit(context.Background(), tc.dir, tc.msg, tc.who)
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != tc.field {
			t.Errorf("Commit(%q, %q, %+v) = %v, want EINVALID on %s", tc.dir, tc.msg, tc.who, err, tc.field)
		}
	}
}
