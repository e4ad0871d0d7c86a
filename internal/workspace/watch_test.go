package workspace

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestReadWorkDir_SeesWhatAnEngineWroteIntoTheWorkDir: docs/security.md §
// Workspace commits — with workspace: worktree the operator's work dir is
// stamped around each step; a file a commit would hold, added, changed
// (even back to its size and modification time) or removed, and the
// repository's hooks and config are seen; ignored files and Stratus's own
// paths are not.
func TestReadWorkDir_SeesWhatAnEngineWroteIntoTheWorkDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exclude := []string{".stratus", "workspace/tasks/t1/ctx"}
	cases := []struct {
		name  string
		repo  bool
		write func(t *testing.T, dir string)
		want  []string
	}{
		{"nothing", true, func(*testing.T, string) {}, nil},
		{"a new file", true, func(t *testing.T, dir string) { write(t, dir, map[string]string{"stray.txt": "x"}) }, []string{"stray.txt"}},
		{"a tracked file changed", true, func(t *testing.T, dir string) { write(t, dir, map[string]string{"src/main.go": "package evil\n"}) }, []string{"src/main.go"}},
		{"a change hidden behind its size and time", true, func(t *testing.T, dir string) {
			p := filepath.Join(dir, "README.md")
			fi, _ := os.Stat(p)
			clockPast(t, p)
			write(t, dir, map[string]string{"README.md": "README\n"}) // same size
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, []string{"README.md"}},
		{"an untracked file removed", true, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "notes.txt")) }, []string{"notes.txt"}},
		{"a symlink made", true, func(t *testing.T, dir string) { write(t, dir, map[string]string{"l": "-> /etc/passwd"}) }, []string{"l"}},
		{"a hook installed", true, func(t *testing.T, dir string) {
			write(t, dir, map[string]string{".git/hooks/pre-commit": "#!/bin/sh\n"})
		}, []string{".git/hooks/pre-commit"}},
		{"the repository's config changed", true, func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, ".git/config"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("[core]\n\tfsmonitor = /tmp/x\n")
			f.Close()
		}, []string{".git/config"}},
		{"ignored and Stratus's own files are not watched", true, func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"build/out.bin": "o", "debug.log": "l", ".stratus/stratus.db": "db", "workspace/tasks/t1/ctx/plan.md": "p"})
		}, nil},
		{"a dir in no repository", false, func(t *testing.T, dir string) {
			write(t, dir, map[string]string{"stray.txt": "x", "build/out.bin": "o"})
		}, []string{"stray.txt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"README.md": "readme\n", "src/main.go": "package main\n", ".gitignore": "build/\n*.log\n"}
			var dir string
			if c.repo {
				dir = newRepo(t, files)
			} else {
				dir = t.TempDir()
				write(t, dir, files)
			}
			write(t, dir, map[string]string{"notes.txt": "untracked\n"})
			before, err := ReadWorkDir(ctx, dir, exclude)
			if err != nil {
				t.Fatal(err)
			}
			c.write(t, dir)
			after, err := ReadWorkDir(ctx, dir, exclude)
			if err != nil {
				t.Fatal(err)
			}
			if got := before.Changed(after); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Changed = %q, want %q", got, c.want)
			}
		})
	}
}

// clockPast returns once the file system stamps a new file with a change
// time later than p's (its clock is coarse: a few ms), polling with a
// deadline, so that a write to p now gets a change time of its own.
func clockPast(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := sysStamp(fi)
	if old == 0 {
		t.Skip("no change time on this platform: a stamp is type, size and modification time")
	}
	probe := filepath.Join(t.TempDir(), "probe")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		pi, _ := os.Lstat(probe)
		if c, _ := sysStamp(pi); c > old {
			return
		}
	}
	t.Fatal("the file system's change time did not move in 5 s")
}
