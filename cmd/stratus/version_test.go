package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// README command table (`stratus --version`): the version is the linked
// one (make build: git describe), else the main module's version the go
// command stamped from the VCS (a tagged commit's tag, go install …@tag),
// else dev; the commit is the linked one, else vcs.revision with +dirty.
func TestVersion_FromTheLinkerElseTheBuildInfo(t *testing.T) {
	t.Parallel()
	tagged := &debug.BuildInfo{Main: debug.Module{Path: "github.com/stratusflow/stratus", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "github.com/stratusflow/stratus", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"a tagged build", "dev", "", tagged, "stratus v1.4.0 (commit 0123456789ab, 2026-12-01T10:00:00Z, "},
		{"make build", "v1.4.0-2-g0123456789ab-dirty", "0123456789ab+dirty", tagged, "stratus v1.4.0-2-g0123456789ab-dirty (commit 0123456789ab+dirty, "},
		{"make build without a tag", "", "0123456789ab", tagged, "stratus v1.4.0 (commit 0123456789ab, "},
		{"a build with no version", "dev", "", devel, "stratus dev (commit 0123456789ab+dirty, "},
		{"no build info", "dev", "", nil, "stratus dev (commit unknown, "},
	} {
		if got := versionOf(c.version, c.commit, c.bi); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want it to start %q", c.name, got, c.want)
		}
	}
}

// A stratus built with go build from a tagged commit says the tag, not dev
// (the go command stamps it from the repository): built here from a copy
// of this module tagged v1.7.7.
func TestVersion_ABuildAtATagSaysTheTag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stratus")
	}
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "stratus")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// The tracked files as the work tree has them (5 MB), in a repository
	// of its own with one commit, tagged.
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	files, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		p := filepath.Join(repo, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q")
	git(repo, "add", "-A")
	git(repo, "commit", "-qm", "release")
	git(repo, "tag", "v1.7.7")
	bin := filepath.Join(t.TempDir(), "stratus")
	build := exec.Command("go", "build", "-tags", "slim", "-o", bin, "./cmd/stratus")
	build.Dir = repo
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "stratus v1.7.7 (commit ") {
		t.Errorf("--version of a build at tag v1.7.7: %q, %v", out, err)
	}
}
