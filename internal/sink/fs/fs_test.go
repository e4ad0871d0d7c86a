package fs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/sink/sinktest"
)

// seed 000 § Files are the server's job: the fs sink passes the one
// conformance suite.
func TestSink_Conformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return fs.New(t.TempDir()) })
}

// seed 000 § Files are the server's job: a key is a file under the root,
// created with dirs 0755 and files 0644, and no temporary file is left.
func TestSink_PutWritesFileUnderRootWithModes(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "not", "yet")
	s := fs.New(root)
	key := "workspace/tasks/T1/ctx/plan.md"
	if err := s.Put(context.Background(), key, []byte("# Plan\n")); err != nil {
		t.Fatal(err)
	}
	p := s.Path(key)
	if want := filepath.Join(root, "workspace", "tasks", "T1", "ctx", "plan.md"); p != want {
		t.Fatalf("Path(%q) = %q, want %q", key, p, want)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "# Plan\n" {
		t.Fatalf("ReadFile(%q) = %q, %v", p, got, err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(p)); fi.Mode().Perm()&^0o022 != 0o755&^0o022 {
		t.Errorf("dir mode %v, want 0755 (less umask)", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("ctx dir holds %d entries, want only plan.md (temp file left behind?)", len(entries))
	}
}

// seed 000 § Files are the server's job: Path is absolute and refuses keys
// the sink would refuse.
func TestSink_PathIsAbsoluteAndEmptyForInvalidKeys(t *testing.T) {
	t.Parallel()
	s := fs.New("relative/root")
	if p := s.Path("a/b"); !filepath.IsAbs(p) {
		t.Errorf("Path(%q) = %q, want an absolute path", "a/b", p)
	}
	for _, key := range sinktest.EscapingKeys {
		if p := s.Path(key); p != "" {
			t.Errorf("Path(%q) = %q, want \"\"", key, p)
		}
	}
}

// seed 000 § Files are the server's job: a symbolic link inside the root
// does not let a key reach outside it.
func TestSink_SymlinkOutOfRootRefused(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on windows")
	}
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	s := fs.New(root)
	err := s.Put(context.Background(), "link/x", []byte("x"))
	if stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Put through escaping symlink: %v, want EINVALID", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
		t.Errorf("file written outside the root (stat err %v)", err)
	}
	if _, err := s.Get(context.Background(), "link/x"); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Get through escaping symlink: %v, want EINVALID", err)
	}
}

// docs/security.md § Output that did not persist: a Put the disk refuses
// returns an error — a full disk (stratus.StorageFull) naming the file
// the key maps to, never the temporary file — leaves no temporary file,
// and leaves what the key held before whole. The root is a 1 MiB tmpfs
// (mounting one needs root and CAP_SYS_ADMIN: without them the test is
// skipped).
func TestSink_PutOnAFullDiskFailsAndKeepsTheOldBytes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", root).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", root).Run() })
	s := fs.New(root)
	ctx := context.Background()
	key := "workspace/tasks/T1/ctx/plan.md"
	if err := s.Put(ctx, key, []byte("# Plan\n")); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, key, bytes.Repeat([]byte("x"), 1500000))
	if !stratus.StorageFull(err) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), s.Path(key)+":") || strings.Contains(err.Error(), ".stratus-tmp-") {
		t.Fatalf("Put of 1.5 MB on a 1 MiB disk: %v; want ENOSPC naming %s", err, s.Path(key))
	}
	if got, _ := os.ReadFile(s.Path(key)); string(got) != "# Plan\n" {
		t.Errorf("the key holds %d bytes after the refused Put; want the old body", len(got))
	}
	if entries, _ := os.ReadDir(filepath.Dir(s.Path(key))); len(entries) != 1 {
		t.Errorf("the dir holds %d entries; want plan.md alone (a temporary file left behind?)", len(entries))
	}
}
