package host

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// longDir is a work dir whose socket path would pass the Unix limit (108
// bytes on Linux).
const longDir = "/home/someone/src/github.com/an-organisation/" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + "/project"

// A work dir whose socket path would pass the Unix limit gets its socket in
// a directory of the user's elsewhere, named after the dir: every caller
// finds the same one, and two dirs never share it (newcomer: `run
// --detach` failed with "bind: invalid argument"). The directory is
// XDG_RUNTIME_DIR when that is the user's alone, else one in the temporary
// directory named with the uid (docs/security.md § The host socket).
func TestSocketPath_LongDirGoesToADirectoryOfTheUsers(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	tmp := shortTemp(t)
	t.Setenv("TMPDIR", tmp)
	if got := SocketPath("/srv/work"); got != "/srv/work/.stratus/host/host.sock" {
		t.Errorf("SocketPath(/srv/work) = %q", got)
	}
	got := SocketPath(longDir)
	if !strings.HasPrefix(got, filepath.Join(tmp, "stratus-"+strconv.Itoa(os.Geteuid())+"-")) || len(got) > maxSocketPath || got != SocketPath(longDir) {
		t.Errorf("SocketPath(long) = %q (%d bytes); want a stable path of at most %d bytes in %s/stratus-<uid>-<hash>/", got, len(got), maxSocketPath, tmp)
	}
	if SocketPath(longDir+"2") == got {
		t.Error("two work dirs share a socket")
	}
	ln, err := listen(got)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ln.Close()
	if fi, err := os.Lstat(filepath.Dir(got)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the socket's directory: %v, %v; want mode 0700", fi.Mode(), err)
	}

	rt := filepath.Join(tmp, "run")
	if err := os.Mkdir(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
	if got := SocketPath(longDir); filepath.Dir(got) != rt {
		t.Errorf("with XDG_RUNTIME_DIR %s (0700, ours): SocketPath(long) = %q", rt, got)
	}
	os.Chmod(rt, 0o755)
	if got := SocketPath(longDir); filepath.Dir(got) == rt {
		t.Errorf("with XDG_RUNTIME_DIR %s open to others: SocketPath(long) = %q", rt, got)
	}
}

// The directory of a long work dir's socket has a predictable name in the
// temporary directory, so anyone may make it first. The client and the
// host refuse it unless it is a directory (not a link) of the user's with
// no group or other bits: they never connect to or listen on a socket in
// it, and say which path and why (the finding: another uid listening there
// got `run --detach`'s task path and made it report a fake run id).
// docs/security.md § The host socket.
func TestSocketDir_OnlyTheUsersOwnIsUsed(t *testing.T) {
	for name, tc := range map[string]struct {
		make func(t *testing.T, dir string)
		want string
	}{
		"another uid's": {func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 65534"},
		"open to others": {func(t *testing.T, dir string) { mkdir(t, dir, 0o777) }, "has mode 0777"},
		"a link to a directory of ours": {func(t *testing.T, dir string) {
			target := dir + ".real"
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("XDG_RUNTIME_DIR", "")
			t.Setenv("TMPDIR", shortTemp(t))
			path := SocketPath(longDir)
			tc.make(t, filepath.Dir(path))
			ln, err := net.Listen("unix", path) // the squatter
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			reached := make(chan struct{}, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					reached <- struct{}{}
					c.Close()
				}
			}()
			for what, err := range map[string]error{
				"Dial":   func() error { _, err := Dial(longDir); return err }(),
				"Ensure": func() error { _, err := Ensure(longDir, "/bin/false", 0, 0); return err }(),
				"listen": func() error {
					ln, err := listen(path)
					if err == nil {
						ln.Close()
					}
					return err
				}(),
			} {
				if stratus.ErrorCode(err) != stratus.EFORBIDDEN || !strings.Contains(err.Error(), filepath.Dir(path)) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v; want EFORBIDDEN naming %s and saying it %s", what, err, filepath.Dir(path), tc.want)
				}
			}
			ln.Close()
			select {
			case <-reached:
				t.Error("the squatter's socket was reached")
			default:
			}
		})
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// shortTemp is a fresh directory directly in the temporary directory, so
// that socket paths in it stay short; removed when the test ends.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
