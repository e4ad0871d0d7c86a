package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/publish/github"
)

func devGitHubGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// stratus dev github serves a bare repository's branches as GitHub's API
// does (docs/architecture.md § Publishing): a pushed branch gets a pull
// request, and merging it moves the bare repository's base branch.
func TestDevGitHub_ServesABareRepository(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bare, work := filepath.Join(dir, "widgets.git"), filepath.Join(dir, "work")
	devGitHubGit(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	devGitHubGit(t, dir, "init", "-q", "-b", "main", work)
	devGitHubGit(t, work, "commit", "-q", "--allow-empty", "-m", "base")
	devGitHubGit(t, work, "checkout", "-q", "-b", "stratus/run-1")
	if err := os.WriteFile(filepath.Join(work, "f.txt"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	devGitHubGit(t, work, "add", "f.txt")
	devGitHubGit(t, work, "commit", "-q", "-m", "work")
	devGitHubGit(t, work, "push", "-q", bare, "main", "stratus/run-1")
	tokenFile, urlFile := filepath.Join(dir, "token"), filepath.Join(dir, "url")
	if err := os.WriteFile(tokenFile, []byte("ghs_dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	ready, stop, done := make(chan string, 1), make(chan struct{}), make(chan error, 1)
	o := &DevGitHubOptions{IO: IO{Out: &out, Err: &out}, Repos: []string{"acme/widgets=" + bare}, Addr: "127.0.0.1:0",
		TokenFile: tokenFile, URLFile: urlFile, ready: func(u string) { ready <- u }, stop: stop}
	go func() { done <- runDevGitHub(o) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("dev github ended: %v", err)
	}
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("dev github: %v", err)
		}
	}()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/api/v3/") {
		t.Fatalf("URL %q, want http://127.0.0.1:PORT/api/v3/", url)
	}
	if want := "github API stand-in: " + url + " (repos: acme/widgets)\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	if b, err := os.ReadFile(urlFile); err != nil || string(b) != url+"\n" {
		t.Fatalf("--url-file holds %q (%v), want %q", b, err, url)
	}

	c, err := github.New(url, "ghs_dev", "acme", "widgets", github.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pr, outcome, err := c.Ensure(ctx, github.EnsureRequest{Base: "main", Head: "stratus/run-1", Title: "Run 1"})
	if err != nil || outcome != github.Created {
		t.Fatalf("Ensure: %v %v", outcome, err)
	}
	if err := c.EnableAutoMerge(ctx, pr.Number, github.StrategySquash); err != nil {
		t.Fatal(err)
	}
	if main := devGitHubGit(t, dir, "--git-dir="+bare, "log", "-1", "--format=%s", "main"); main != "Run 1 (#1)" {
		t.Fatalf("main's head after auto-merge: %q, want the squash commit %q", main, "Run 1 (#1)")
	}
}

// Bad flags are usage errors (exit 2) naming the flag, the value and
// what is valid (STYLE.md § Errors).
func TestDevGitHub_BadFlagsExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	devGitHubGit(t, dir, "init", "-q", work)
	bare := filepath.Join(dir, "b.git")
	devGitHubGit(t, dir, "init", "-q", "--bare", bare)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--token", "t"}, []string{"--repo", "OWNER/NAME=PATH"}},
		{[]string{"--token", "t", "--repo", "acme/widgets=" + filepath.Join(dir, "missing.git")}, []string{"--repo", "missing.git", "does not exist", "bare git repository"}},
		{[]string{"--token", "t", "--repo", "acme/widgets=" + work}, []string{"--repo", work, "work tree", "bare"}},
		{[]string{"--token", "t", "--repo", "widgets=" + bare}, []string{"--repo", "widgets=", "OWNER/NAME=PATH"}},
		{[]string{"--token", "t", "--repo", "acme/widgets=" + bare, "--addr", "0.0.0.0:0"}, []string{"--addr", "0.0.0.0:0", "127.0.0.1"}},
		{[]string{"--repo", "acme/widgets=" + bare}, []string{"--token", "--token-file"}},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"dev", "github"}, tc.args...), IO{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
		if code != ExitUsage {
			t.Errorf("dev github %v: exit %d, want %d; stderr %s", tc.args, code, ExitUsage, stderr.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("dev github %v: stderr %q does not name %q", tc.args, stderr.String(), w)
			}
		}
	}
}
