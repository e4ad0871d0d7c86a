package stratus

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

// docs/security.md § Output that did not persist: a full disk is told apart
// from other internal errors — ENOSPC and EDQUOT however wrapped, and
// SQLite's SQLITE_FULL — as ENOSPACE (507), with a message that says so and
// leaks no path.
func TestStorageFull(t *testing.T) {
	for _, err := range []error{
		&fs.PathError{Op: "write", Path: "/x/.stratus-tmp-1", Err: syscall.ENOSPC},
		fmt.Errorf("fs sink: put %q: %w", "a.txt", &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}),
		errors.New("update attempt 1 of task \"r.x.1\": database or disk is full (13)"),
		Errorf(ENOSPACE, "full"),
	} {
		if !StorageFull(err) || ErrorCode(err) != ENOSPACE {
			t.Errorf("%v: StorageFull %v, code %q; want a full disk", err, StorageFull(err), ErrorCode(err))
		}
		if m := ErrorMessage(err); err.Error() != "full" && m != "the server's disk is full; what it accepted before is kept: free space and send this again" {
			t.Errorf("%v: message %q", err, m)
		}
	}
	for _, err := range []error{errors.New("boom"), &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, nil} {
		if StorageFull(err) || ErrorCode(err) == ENOSPACE {
			t.Errorf("%v taken for a full disk", err)
		}
	}
}

// A field is not said twice (not "provider: provider …").
func TestError_FieldNotRepeated(t *testing.T) {
	for _, c := range []struct{ field, msg, want string }{
		{"node", `node gate is not waiting`, `node gate is not waiting`},
		{"provider", `provider "x" is not allowed`, `provider "x" is not allowed`},
		{"node", `run r has no step of node "x"`, `node: run r has no step of node "x"`},
		{"nodes", `node gate`, `nodes: node gate`},
		{"", `plain`, `plain`},
	} {
		if got := FieldErrorf(EINVALID, c.field, "%s", c.msg).Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
