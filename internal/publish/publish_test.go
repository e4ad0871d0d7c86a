package publish

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
)

// setup is one test's world: HOME a fresh temp dir (the operator's global
// git configuration takes no part), a local repository with one commit
// on branch stratus/t1, and an empty bare repository as its remote.
type world struct {
	home, local, remote string
}

func setup(t *testing.T) world {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	w := world{home: filepath.Join(root, "home"), local: filepath.Join(root, "local"), remote: filepath.Join(root, "remote.git")}
	t.Setenv("HOME", w.home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(w.home, ".config"))
	for _, d := range []string{w.home, w.local} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, root, "init", "--quiet", "--bare", w.remote)
	git(t, w.local, "init", "--quiet", "-b", "stratus/t1")
	commitFile(t, w.local, "a.txt", "one\n")
	return w
}

// git runs git in dir as a test's own setup, with a fixed identity.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitFile writes name and commits it; it returns the new head.
func commitFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", name)
	git(t, dir, "commit", "--quiet", "-m", "add "+name)
	return git(t, dir, "rev-parse", "HEAD")
}

func pushErr(t *testing.T, err error, want Kind) *PushError {
	t.Helper()
	var pe *PushError
	if !errors.As(err, &pe) || pe.Kind != want {
		t.Fatalf("err = %v (kind %q), want a *PushError of kind %q", err, KindOf(err), want)
	}
	return pe
}

// TestPush_CreatesBranchThenIsAlready: a first push creates the remote
// branch; pushing the same head again pushes nothing and says so, so a
// re-delivered publish step is a no-op (docs/architecture.md § Publishing).
func TestPush_CreatesBranchThenIsAlready(t *testing.T) {
	w := setup(t)
	head := git(t, w.local, "rev-parse", "HEAD")
	s := Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1"}
	got, err := Push(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Already || got.Commit != head || got.Previous != "" || got.Branch != "stratus/t1" {
		t.Fatalf("first push = %+v, want a new branch at %s", got, head)
	}
	if tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1"); tip != head {
		t.Fatalf("remote branch at %s, want %s", tip, head)
	}
	got, err = Push(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Already || got.Commit != head || got.Previous != head {
		t.Fatalf("second push = %+v, want Already at %s", got, head)
	}
}

// TestPush_FastForward: a remote branch the local head contains moves
// forward by a normal push (docs/architecture.md § Publishing).
func TestPush_FastForward(t *testing.T) {
	w := setup(t)
	s := Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1"}
	first, err := Push(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	next := commitFile(t, w.local, "b.txt", "two\n")
	got, err := Push(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Already || got.Commit != next || got.Previous != first.Commit {
		t.Fatalf("push = %+v, want %s on top of %s", got, next, first.Commit)
	}
	if tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1"); tip != next {
		t.Fatalf("remote branch at %s, want %s", tip, next)
	}
}

// TestPush_HeadAndDetachedCheckout: a detached checkout (the run's
// materialized workspace) pushes its HEAD, or Spec.Head, to the named
// branch.
func TestPush_HeadAndDetachedCheckout(t *testing.T) {
	w := setup(t)
	first := git(t, w.local, "rev-parse", "HEAD")
	second := commitFile(t, w.local, "b.txt", "two\n")
	git(t, w.local, "checkout", "--quiet", "--detach", first)
	got, err := Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "other"})
	if err != nil || got.Commit != first {
		t.Fatalf("push of detached HEAD = %+v, %v; want %s", got, err, first)
	}
	got, err = Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "other", Head: second})
	if err != nil || got.Commit != second || got.Previous != first {
		t.Fatalf("push of Head = %+v, %v; want %s over %s", got, err, second, first)
	}
	_, err = Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "other", Head: "no-such-rev"})
	if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Fatalf("push of a missing head: err = %v, want ENOTFOUND", err)
	}
}

// TestPush_RemoteMovedRefuses: when someone else pushed to the branch,
// the push is refused, never forced, naming both commits, and the remote
// keeps their commit (worc configuration.md § `git`: never force-pushes).
// Both ways it can be seen: a remote commit the local repository has
// never fetched, and one it has fetched but does not contain.
func TestPush_RemoteMovedRefuses(t *testing.T) {
	for _, fetched := range []bool{false, true} {
		t.Run(map[bool]string{false: "unknown commit", true: "fetched commit"}[fetched], func(t *testing.T) {
			w := setup(t)
			s := Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1"}
			if _, err := Push(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(t.TempDir(), "other")
			git(t, filepath.Dir(other), "clone", "--quiet", "-b", "stratus/t1", w.remote, other)
			theirs := commitFile(t, other, "theirs.txt", "theirs\n")
			git(t, other, "push", "--quiet", "origin", "stratus/t1")
			mine := commitFile(t, w.local, "mine.txt", "mine\n")
			if fetched {
				git(t, w.local, "fetch", "--quiet", w.remote, "stratus/t1")
			}
			_, err := Push(context.Background(), s)
			pe := pushErr(t, err, RemoteMoved)
			if pe.Local != mine || pe.RemoteCommit != theirs {
				t.Fatalf("error names local %s remote %s, want %s and %s", pe.Local, pe.RemoteCommit, mine, theirs)
			}
			for _, want := range []string{mine, theirs, w.remote, "stratus/t1", "resume"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1"); tip != theirs {
				t.Fatalf("remote branch at %s, want theirs %s kept", tip, theirs)
			}
			if h := git(t, w.local, "rev-parse", "HEAD"); h != mine {
				t.Fatalf("local head moved to %s, want %s", h, mine)
			}
		})
	}
}

// TestPush_HookRejects: a pre-receive hook that declines (a protected
// branch's stand-in) ends in Rejected, with the hook's message.
func TestPush_HookRejects(t *testing.T) {
	w := setup(t)
	hook := "#!/bin/sh\necho 'protected branch: pushes to stratus/* need review' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(w.remote, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1"})
	pe := pushErr(t, err, Rejected)
	if !strings.Contains(pe.Detail, "remote: protected branch: pushes to stratus/* need review") || !strings.Contains(pe.Detail, "pre-receive hook declined") {
		t.Fatalf("detail %q lacks the hook's message and reason", pe.Detail)
	}
	for _, want := range []string{w.remote, "stratus/t1", "resume the publish step"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestPush_NoRemote: a path with no repository, and a remote name the
// repository does not have, end in NoRemote naming what was asked for.
func TestPush_NoRemote(t *testing.T) {
	w := setup(t)
	for _, remote := range []string{filepath.Join(t.TempDir(), "missing.git"), "upstream"} {
		_, err := Push(context.Background(), Spec{Dir: w.local, Remote: remote, Branch: "stratus/t1"})
		pushErr(t, err, NoRemote)
		if !strings.Contains(err.Error(), remote) || !strings.Contains(err.Error(), "git remote -v") {
			t.Errorf("error %q does not name the remote %q and what to do", err, remote)
		}
	}
}

// TestPush_Unreachable: an HTTP remote nothing listens on ends in
// Unreachable.
func TestPush_Unreachable(t *testing.T) {
	w := setup(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = Push(context.Background(), Spec{Dir: w.local, Remote: "http://" + addr + "/r.git", Branch: "stratus/t1"})
	pushErr(t, err, Unreachable)
}

// httpRemote serves the bare repository w.remote over git's smart HTTP
// protocol (git http-backend under net/http/cgi) on 127.0.0.1, requiring
// HTTP basic authentication as user with password token. It returns the
// repository's URL and a count of the requests it served authorized.
func httpRemote(t *testing.T, w world, user, token string) (string, *atomic.Int32) {
	t.Helper()
	execPath := git(t, w.local, "--exec-path")
	backend := filepath.Join(execPath, "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git http-backend not installed (%v): the token's path over HTTP cannot be tested offline", err)
	}
	git(t, w.remote, "config", "http.receivepack", "true")
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(w.remote), "GIT_HTTP_EXPORT_ALL=1"}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
	var authorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			rw.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(rw, "authentication required", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(w.remote), &authorized
}

// TestPush_TokenThroughCredentialHelper: over HTTP, the token reaches the
// remote through the credential helper given to the pushing git alone; a
// wrong or missing token ends in Auth; the token is in neither
// .git/config nor any error (docs/architecture.md § Publishing).
func TestPush_TokenThroughCredentialHelper(t *testing.T) {
	w := setup(t)
	const token = "tok-s3cret-4b1d"
	u, seen := httpRemote(t, w, DefaultTokenUser, token)
	git(t, w.local, "remote", "add", "origin", u)
	head := git(t, w.local, "rev-parse", "HEAD")

	for name, tok := range map[string]string{"no token": "", "wrong token": "tok-wrong-9c2e"} {
		_, err := Push(context.Background(), Spec{Dir: w.local, Remote: "origin", Branch: "stratus/t1", Token: tok})
		pushErr(t, err, Auth)
		if tok != "" && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: error %q holds the token", name, err)
		}
	}
	got, err := Push(context.Background(), Spec{Dir: w.local, Remote: "origin", Branch: "stratus/t1", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if got.Commit != head {
		t.Fatalf("push = %+v, want %s", got, head)
	}
	if tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1"); tip != head {
		t.Fatalf("remote branch at %s, want %s", tip, head)
	}
	if seen.Load() == 0 {
		t.Fatal("the remote never saw credentials")
	}
	again, err := Push(context.Background(), Spec{Dir: w.local, Remote: u, Branch: "stratus/t1", Token: token})
	if err != nil || !again.Already {
		t.Fatalf("push again by URL = %+v, %v; want Already", again, err)
	}
	for _, f := range []string{filepath.Join(w.local, ".git", "config"), filepath.Join(w.home, ".gitconfig"), filepath.Join(w.home, ".git-credentials")} {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), token) {
			t.Errorf("%s holds the token", f)
		}
	}
}

// TestPush_TokenOnlyForHTTP: a token is not handed to a git talking to a
// local remote, whose hooks would see the pushing git's environment.
func TestPush_TokenOnlyForHTTP(t *testing.T) {
	w := setup(t)
	const token = "tok-local-77aa"
	dump := filepath.Join(t.TempDir(), "env")
	hook := "#!/bin/sh\nenv > '" + dump + "'\n"
	if err := os.WriteFile(filepath.Join(w.remote, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1", Token: token}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the remote's hook did not run: %v", err)
	}
	if strings.Contains(string(b), token) {
		t.Fatal("the remote's hook saw the token")
	}
}

// TestPush_BadSpec: a Spec without what a push needs is EINVALID naming
// the field.
func TestPush_BadSpec(t *testing.T) {
	w := setup(t)
	for _, tc := range []struct {
		spec  Spec
		field string
	}{
		{Spec{Remote: w.remote, Branch: "b"}, "dir"},
		{Spec{Dir: w.local, Branch: "b"}, "remote"},
		{Spec{Dir: w.local, Remote: "--upload-pack=x", Branch: "b"}, "remote"},
		{Spec{Dir: w.local, Remote: w.remote}, "branch"},
		{Spec{Dir: w.local, Remote: w.remote, Branch: "a..b"}, "branch"},
		{Spec{Dir: w.local, Remote: w.remote, Branch: "refs/heads/b"}, "branch"},
		{Spec{Dir: w.local, Remote: w.remote, Branch: "b", Token: "a\nb"}, "token"},
	} {
		_, err := Push(context.Background(), tc.spec)
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != tc.field {
			t.Errorf("Push(%+v) = %v, want EINVALID on %s", tc.spec, err, tc.field)
		}
	}
}

// TestClassify: git's messages map to the kinds the publish step branches
// on, including a push refused as not a fast-forward (the remote moved
// between the look and the push), and credentials never reach the detail.
func TestClassify(t *testing.T) {
	s := Spec{Remote: "https://u:tok-x@example.invalid/r.git", Branch: "b", Token: "tok-x"}
	for stderr, want := range map[string]Kind{
		" ! [rejected]        abc -> b (fetch first)\nerror: failed to push some refs to 'https://u:tok-x@example.invalid/r.git'": RemoteMoved,
		" ! [rejected]        abc -> b (non-fast-forward)":                                                                        RemoteMoved,
		"remote: nope\n ! [remote rejected] abc -> b (pre-receive hook declined)":                                                 Rejected,
		"fatal: Authentication failed for 'https://example.invalid/r.git/'":                                                       Auth,
		"fatal: unable to access 'https://x/': The requested URL returned error: 403":                                             Auth,
		"fatal: repository 'https://example.invalid/r.git/' not found":                                                            NoRemote,
		"fatal: unable to access 'https://example.invalid/': Could not resolve host":                                              Unreachable,
		"fatal: something else":        Failed,
		"fatal: the helper said tok-x": Failed,
	} {
		pe := pushErr(t, s.classify(&gitwork.RunError{Args: []string{"push"}, Err: errors.New("exit status 1"), Stderr: stderr}, "abc"), want)
		if strings.Contains(pe.Error(), "tok-x") {
			t.Errorf("error %q holds the token", pe)
		}
	}
}

// TestPush_RemoteMovedBetweenLookAndPush: when someone else pushes after
// Push looked at the remote branch and before it pushes, the push itself
// (never forced) is refused as not a fast-forward, and the error names
// where the branch is now. The remote's upload-pack, which answers the
// look, moves the branch as it finishes.
func TestPush_RemoteMovedBetweenLookAndPush(t *testing.T) {
	w := setup(t)
	git(t, w.local, "remote", "add", "origin", w.remote)
	s := Spec{Dir: w.local, Remote: "origin", Branch: "stratus/t1"}
	if _, err := Push(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	git(t, filepath.Dir(other), "clone", "--quiet", "-b", "stratus/t1", w.remote, other)
	theirs := commitFile(t, other, "theirs.txt", "theirs\n")
	git(t, other, "push", "--quiet", "origin", "HEAD:refs/heads/side")
	script := filepath.Join(t.TempDir(), "upload-pack")
	body := "#!/bin/sh\ngit upload-pack \"$@\"\nrc=$?\ngit -C '" + w.remote + "' update-ref refs/heads/stratus/t1 " + theirs + "\nexit $rc\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, w.local, "config", "remote.origin.uploadpack", script)
	mine := commitFile(t, w.local, "mine.txt", "mine\n")

	_, err := Push(context.Background(), s)
	pe := pushErr(t, err, RemoteMoved)
	if pe.Local != mine || pe.RemoteCommit != theirs {
		t.Fatalf("error names local %s remote %s, want %s and %s", pe.Local, pe.RemoteCommit, mine, theirs)
	}
	if tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1"); tip != theirs {
		t.Fatalf("remote branch at %s, want theirs %s kept", tip, theirs)
	}
}

// TestPush_OwnReplacesOnlyOwnCommits: with Spec.Own, a remote branch whose
// commits beyond the local head are all Own's (an earlier run's) is
// replaced; one holding anyone else's commit is RemoteMoved and kept
// (docs/architecture.md § Publishing: never a force-push over commits it
// did not make).
func TestPush_OwnReplacesOnlyOwnCommits(t *testing.T) {
	for _, theirs := range []bool{false, true} {
		t.Run(map[bool]string{false: "own commits", true: "someone else's"}[theirs], func(t *testing.T) {
			w := setup(t)
			base := git(t, w.local, "rev-parse", "HEAD")
			earlier := commitFile(t, w.local, "earlier.txt", "an earlier run\n") // by Tester
			if _, err := Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1"}); err != nil {
				t.Fatal(err)
			}
			git(t, w.local, "reset", "--quiet", "--hard", base)
			mine := commitFile(t, w.local, "mine.txt", "this run\n")
			own := "t@example.invalid" // the author of earlier
			if theirs {
				own = "stratus@stratus.invalid"
			}
			got, err := Push(context.Background(), Spec{Dir: w.local, Remote: w.remote, Branch: "stratus/t1", Own: own})
			tip := git(t, w.remote, "rev-parse", "refs/heads/stratus/t1")
			if theirs {
				pushErr(t, err, RemoteMoved)
				if tip != earlier {
					t.Fatalf("remote at %s, want %s kept", tip, earlier)
				}
				return
			}
			if err != nil || !got.Replaced || got.Previous != earlier || tip != mine {
				t.Fatalf("push = %+v, %v; remote at %s, want %s replacing %s", got, err, tip, mine, earlier)
			}
		})
	}
}
