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

// docs/contracts.md § Files are the server's job: the fs sink passes the one
// conformance suite.
func TestSink_Conformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return fs.New(t.TempDir()) })
}

// docs/contracts.md § Files are the server's job: a key is a file under the
// root, created with dirs 0755 and files 0644, and no temporary file is left.
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

// docs/security.md § Files under .stratus: under the private dir, and
// everywhere in an owner-only sink, Put creates files 0600 and every
// missing directory 0700; the work dir's other files keep 0644 and 0755
// (the ctx files are the user's project files).
func TestSink_StateDirKeysAreTheOwnersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	work := fs.New(dir).Private(".stratus")
	state := fs.New(filepath.Join(dir, "elsewhere", "state")).OwnerOnly()
	for _, tc := range []struct {
		s                 *fs.Sink
		key               string
		top               string // the first directory Put creates
		wantFile, wantDir os.FileMode
	}{
		{work, ".stratus/logs/t1/stages/a/run-000001/rendered-prompt.md", ".stratus", 0o600, 0o700},
		{work, "workspace/tasks/t1/ctx/plan.md", "workspace", 0o644, 0o755},
		{state, "runs/r1/bundle/config.yaml", "", 0o600, 0o700},
	} {
		if err := tc.s.Put(ctx, tc.key, []byte("x")); err != nil {
			t.Fatal(err)
		}
		p := tc.s.Path(tc.key)
		if fi, _ := os.Stat(p); fi.Mode().Perm() != tc.wantFile {
			t.Errorf("%s: file mode %v, want %v", tc.key, fi.Mode().Perm(), tc.wantFile)
		}
		stop := tc.s.Root()
		if tc.top != "" {
			stop = filepath.Join(stop, tc.top)
		} else {
			stop = filepath.Dir(stop) // the root too
		}
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if fi, _ := os.Stat(d); fi.Mode().Perm()&^0o022 != tc.wantDir&^0o022 {
				t.Errorf("%s: dir %s mode %v, want %v", tc.key, d, fi.Mode().Perm(), tc.wantDir)
			}
			if d == stop {
				break
			}
		}
	}
}

// docs/contracts.md § Files are the server's job: Path is absolute and
// refuses keys the sink would refuse.
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

// docs/contracts.md § Files are the server's job: a symbolic link inside the
// root does not let a key reach outside it.
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
