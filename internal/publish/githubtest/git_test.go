package githubtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/publish/githubtest"
)

// gitT runs git in dir with no operator configuration and a fixed
// identity, failing the test on error.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitE(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func gitE(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// gitRepo is a bare repository served as o/r and a clone pushing to it.
type gitRepo struct {
	api
	bare, work string
}

func (g gitRepo) commit(file, content, msg string) string {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.work, file), []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
	gitT(g.t, g.work, "add", file)
	gitT(g.t, g.work, "commit", "-q", "-m", msg)
	return gitT(g.t, g.work, "rev-parse", "HEAD")
}

func (g gitRepo) bareRev(rev string) string {
	g.t.Helper()
	return gitT(g.t, g.bare, "rev-parse", rev)
}

// setupGit makes a bare repository whose main holds one commit (a.txt),
// serves it as o/r, and returns a work clone on main.
func setupGit(t *testing.T) gitRepo {
	t.Helper()
	dir := t.TempDir()
	bare, work := filepath.Join(dir, "r.git"), filepath.Join(dir, "work")
	gitT(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	gitT(t, dir, "init", "-q", "-b", "main", work)
	gitT(t, work, "remote", "add", "origin", bare)
	srv := githubtest.New(t, tok)
	g := gitRepo{api: api{t: t, srv: srv}, bare: bare, work: work}
	g.commit("a.txt", "a\n", "base")
	gitT(t, work, "push", "-q", "origin", "main")
	if err := srv.AddGitRepo("o", "r", bare); err != nil {
		t.Fatal(err)
	}
	return g
}

// feature pushes branch feat with two commits (b.txt, c.txt) off main,
// then moves main on with d.txt (so no merge is a fast-forward), and
// opens a PR from feat into main.
func (g gitRepo) feature() {
	g.t.Helper()
	gitT(g.t, g.work, "checkout", "-q", "-b", "feat")
	g.commit("b.txt", "b\n", "add b")
	g.commit("c.txt", "c\n", "add c")
	gitT(g.t, g.work, "push", "-q", "origin", "feat")
	gitT(g.t, g.work, "checkout", "-q", "main")
	g.commit("d.txt", "d\n", "add d")
	gitT(g.t, g.work, "push", "-q", "origin", "main")
	if code, _, v := g.do("POST", "/repos/o/r/pulls", "Bearer "+tok, map[string]any{"title": "Feat", "head": "feat", "base": "main"}); code != 201 {
		g.t.Fatalf("create: %d %v", code, v)
	}
}

// A git-backed repository's branches are its bare repository's refs: a
// push makes a branch exist and moves an open PR's head (githubtest doc).
func TestGitRepo_BranchesAreTheBareRepoRefs(t *testing.T) {
	t.Parallel()
	g := setupGit(t)
	auth := "Bearer " + tok
	code, _, v := g.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})
	if code != 422 {
		t.Fatalf("PR for a branch never pushed: %d %v, want 422", code, v)
	}
	requireErrorBody(t, "422 head", v, true)
	if f := v.(map[string]any)["errors"].([]any)[0].(map[string]any)["field"]; f != "head" {
		t.Fatalf("422 names field %v, want head", f)
	}
	gitT(t, g.work, "checkout", "-q", "-b", "feat")
	gitT(t, g.work, "push", "-q", "origin", "feat")
	if code, _, v := g.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"}); code != 422 ||
		!strings.Contains(v.(map[string]any)["errors"].([]any)[0].(map[string]any)["message"].(string), "No commits between main and feat") {
		t.Fatalf("PR for a branch at main: %d %v, want 422 No commits between", code, v)
	}
	h1 := g.commit("b.txt", "b\n", "add b")
	gitT(t, g.work, "push", "-q", "origin", "feat")
	code, _, v = g.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})
	if code != 201 {
		t.Fatalf("create after the push: %d %v", code, v)
	}
	if sha := v.(map[string]any)["head"].(map[string]any)["sha"]; sha != h1 {
		t.Fatalf("head.sha %v, want the pushed %s", sha, h1)
	}
	h2 := g.commit("c.txt", "c\n", "add c")
	gitT(t, g.work, "push", "-q", "origin", "feat")
	_, _, v = g.do("GET", "/repos/o/r/pulls/1", auth, nil)
	if sha := v.(map[string]any)["head"].(map[string]any)["sha"]; sha != h2 {
		t.Fatalf("head.sha after a second push %v, want %s", sha, h2)
	}
	if code, _, _ := g.do("PUT", "/repos/o/r/pulls/1/merge", auth, map[string]any{"sha": h1}); code != 409 {
		t.Fatalf("merge at the old head: %d, want 409", code)
	}
	if got := g.srv.Branch("o/r", "feat"); got != h2 {
		t.Fatalf("Branch(feat) %q, want %s", got, h2)
	}
}

// REST pulls/merge, merge_method: merge makes a merge commit with base and
// head as parents; squash one commit on base's tip holding base..head;
// rebase replays head's commits onto base. The sha answered is the new
// base head.
func TestGitRepo_MergeMethodsMakeTheRealCommits(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"merge", "squash", "rebase"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			g := setupGit(t)
			g.feature()
			base, head := g.bareRev("main"), g.bareRev("feat")
			code, _, v := g.do("PUT", "/repos/o/r/pulls/1/merge", "Bearer "+tok, map[string]any{"merge_method": method, "sha": head})
			if code != 200 {
				t.Fatalf("merge: %d %v", code, v)
			}
			sha := v.(map[string]any)["sha"]
			if tip := g.bareRev("main"); sha != tip {
				t.Fatalf("answered sha %v, main is %s", sha, tip)
			}
			for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
				gitT(t, g.bare, "cat-file", "-e", "main:"+f)
			}
			parents := strings.Fields(gitT(t, g.bare, "rev-list", "--parents", "-n1", "main"))[1:]
			switch method {
			case "merge":
				if len(parents) != 2 || parents[0] != base || parents[1] != head {
					t.Fatalf("merge commit parents %v, want [%s %s]", parents, base, head)
				}
			case "squash":
				if len(parents) != 1 || parents[0] != base {
					t.Fatalf("squash commit parents %v, want [%s]", parents, base)
				}
				if subj := gitT(t, g.bare, "log", "-1", "--format=%s", "main"); subj != "Feat (#1)" {
					t.Fatalf("squash subject %q, want GitHub's default %q", subj, "Feat (#1)")
				}
			case "rebase":
				subjects := gitT(t, g.bare, "log", "--format=%s", base+"..main")
				if subjects != "add c\nadd b" || g.bareRev("main~2") != base {
					t.Fatalf("rebase: %s..main is %q on %s, want head's two commits replayed onto base", base, subjects, g.bareRev("main~2"))
				}
			}
			_, _, v = g.do("GET", "/repos/o/r/pulls/1", "Bearer "+tok, nil)
			if m := v.(map[string]any); m["merged"] != true || m["merge_commit_sha"] != sha {
				t.Fatalf("PR after merge: merged=%v merge_commit_sha=%v", m["merged"], m["merge_commit_sha"])
			}
		})
	}
}

// A merge the bare repository's pre-receive hook refuses is GitHub's
// protected-branch answer (pulls/merge 405) and changes nothing; a
// conflict is 405 "Pull Request is not mergeable".
func TestGitRepo_HookRefusalAndConflictAre405(t *testing.T) {
	t.Parallel()
	g := setupGit(t)
	g.feature()
	hook := filepath.Join(g.bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'main takes reviewed changes only' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := g.bareRev("main")
	code, _, v := g.do("PUT", "/repos/o/r/pulls/1/merge", "Bearer "+tok, map[string]any{"merge_method": "squash"})
	if code != 405 {
		t.Fatalf("merge the hook refuses: %d %v, want 405", code, v)
	}
	requireErrorBody(t, "405 hook", v, false)
	if msg := v.(map[string]any)["message"].(string); !strings.Contains(strings.ToLower(msg), "protected branch") || !strings.Contains(msg, "main takes reviewed changes only") {
		t.Fatalf("405 message %q, want GitHub's protected branch answer with the hook's words", msg)
	}
	if g.bareRev("main") != base {
		t.Fatal("main moved though the hook refused")
	}
	if p := g.srv.Pulls("o/r")[0]; p.State != "open" || p.Merged {
		t.Fatalf("PR after a refused merge: %+v, want open", p)
	}
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}

	// main changes b.txt too: feat's b.txt conflicts.
	g.commit("b.txt", "other b\n", "b on main")
	gitT(t, g.work, "push", "-q", "origin", "main")
	base = g.bareRev("main")
	for _, method := range []string{"merge", "squash", "rebase"} {
		code, _, v := g.do("PUT", "/repos/o/r/pulls/1/merge", "Bearer "+tok, map[string]any{"merge_method": method})
		if code != 405 || v.(map[string]any)["message"] != "Pull Request is not mergeable" {
			t.Fatalf("%s of a conflicting PR: %d %v, want 405 Pull Request is not mergeable", method, code, v)
		}
	}
	if g.bareRev("main") != base || g.srv.Pulls("o/r")[0].State != "open" {
		t.Fatal("a conflicting merge changed main or closed the PR")
	}
}

func TestCheckBare_RefusesWhatIsNotABareRepository(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	gitT(t, dir, "init", "-q", work)
	bare := filepath.Join(dir, "b.git")
	gitT(t, dir, "init", "-q", "--bare", bare)
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "is not a directory"},
		{dir, "is not a git repository"},
		{work, "with a work tree"},
		{filepath.Join(work, ".git"), "with a work tree"},
	} {
		if err := githubtest.CheckBare(c.dir); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.dir) {
			t.Errorf("CheckBare(%s): %v, want an error naming it and saying %q", c.dir, err, c.want)
		}
	}
	if err := githubtest.CheckBare(bare); err != nil {
		t.Errorf("CheckBare(bare): %v", err)
	}
}

// Auto-merge armed on a git-backed repository's PR makes the real merge,
// by the armed method, once the checks pass.
func TestGitRepo_AutoMergeMergesWhenChecksPass(t *testing.T) {
	t.Parallel()
	g := setupGit(t)
	g.feature()
	base := g.bareRev("main")
	_, _, v := g.do("GET", "/repos/o/r/pulls/1", "Bearer "+tok, nil)
	g.srv.SetChecksPending("o/r", true)
	if code, v := g.gql("/api/graphql", "Bearer "+tok, arm(v.(map[string]any)["node_id"].(string), "REBASE")); code != 200 || v.(map[string]any)["errors"] != nil {
		t.Fatalf("arm: %d %v", code, v)
	}
	if g.bareRev("main") != base {
		t.Fatal("main moved while the checks were pending")
	}
	if err := g.srv.CompleteChecks("o/r"); err != nil {
		t.Fatal(err)
	}
	if g.bareRev("main~2") != base || gitT(t, g.bare, "log", "--format=%s", base+"..main") != "add c\nadd b" {
		t.Fatalf("after the checks passed, main is not feat rebased onto %s", base)
	}
	if p := g.srv.Pulls("o/r")[0]; !p.Merged || p.MergeMethod != "rebase" || p.MergeCommitSHA != g.bareRev("main") {
		t.Fatalf("PR %+v", p)
	}
}
