package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
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
