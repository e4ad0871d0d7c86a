package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A work dir whose socket path would pass the Unix limit (108 bytes on
// Linux) gets its socket in the temporary directory, named after the dir:
// every caller finds the same one, and two dirs never share it (newcomer,
// issue 16 § 5: `run --detach` failed with "bind: invalid argument").
func TestSocketPath_LongDirGoesToTheTemporaryDirectory(t *testing.T) {
	short := "/srv/work"
	if got := SocketPath(short); got != "/srv/work/.stratus/host.sock" {
		t.Errorf("SocketPath(%q) = %q", short, got)
	}
	long := "/home/someone/src/github.com/an-organisation/" + strings.Repeat("a", 60) + "/project"
	got := SocketPath(long)
	if !strings.HasPrefix(got, os.TempDir()) || len(got) > maxSocketPath || got != SocketPath(long) {
		t.Errorf("SocketPath(long) = %q (%d bytes); want a stable path of at most %d bytes under %s", got, len(got), maxSocketPath, os.TempDir())
	}
	if SocketPath(long+"2") == got {
		t.Error("two work dirs share a socket")
	}
	if ln, err := listen(filepath.Join(t.TempDir(), "h.sock")); err != nil {
		t.Errorf("listen: %v", err)
	} else {
		ln.Close()
	}
}
