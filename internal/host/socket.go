package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/private"
)

// SocketName is the host's socket, in its directory (SocketPath).
const SocketName = "host.sock"

// SocketDir is the directory of the host socket in the state dir,
// DIR/.stratus/host/: the socket's own, so that it can be made and checked
// 0700 whatever .stratus is (docs/security.md § The host socket).
const SocketDir = "host"

// maxSocketPath is the longest Unix socket path this host uses in the work
// dir: Linux's sockaddr_un holds 108 bytes with its terminating NUL, and
// some systems fewer.
const maxSocketPath = 100

// maxSocketAddr is the longest path Linux's sockaddr_un takes.
const maxSocketAddr = 107

// SocketPath is the host socket of work dir dir (absolute), in a directory
// only this user may enter (docs/security.md § The host socket):
//
//   - DIR/.stratus/host/host.sock, when that path fits a Unix socket
//     address (at most maxSocketPath bytes);
//   - otherwise $XDG_RUNTIME_DIR/stratus-host-<hash>.sock, when
//     XDG_RUNTIME_DIR is set, absolute, and a directory of this user's that
//     no one else may enter (as the XDG spec makes it);
//   - otherwise <temporary directory>/stratus-<euid>-<hash>/host.sock.
//
// <hash> is the first 16 hex digits of the SHA-256 of the cleaned dir: the
// same for every caller of one user, never shared by two dirs. The name in
// the temporary directory is predictable, so anyone may take it first:
// checkSocketDir refuses it then, and neither host nor client uses it.
func SocketPath(dir string) string {
	p := filepath.Join(dir, orchestrator.StateDir, SocketDir, SocketName)
	if len(p) <= maxSocketPath {
		return p
	}
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	hash := hex.EncodeToString(sum[:8])
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) && checkSocketDir(rt) == nil {
		if p := filepath.Join(rt, "stratus-host-"+hash+".sock"); len(p) <= maxSocketPath {
			return p
		}
	}
	return filepath.Join(os.TempDir(), "stratus-"+strconv.Itoa(os.Geteuid())+"-"+hash, SocketName)
}

// makeSocketDir creates the directory of socket path (mode 0700; its
// parent too when it is the state dir) when missing, then checks it
// (checkSocketDir). A directory that exists is never changed: one that is
// not this user's, or that others may enter, is refused.
func makeSocketDir(path string) error {
	if len(path) > maxSocketAddr {
		return stratus.Errorf(stratus.EINVALID, "host socket %s is %d bytes, longer than a Unix socket address takes (%d); set TMPDIR or XDG_RUNTIME_DIR to a shorter directory of yours", path, len(path), maxSocketAddr)
	}
	dir := filepath.Dir(path)
	if filepath.Base(filepath.Dir(dir)) == orchestrator.StateDir {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return err
		}
	}
	return private.MakeDir("host socket directory", dir, socketDirFix)
}

// checkSocketDir refuses a host socket directory that someone else could
// have placed a socket in (private.CheckDir): it must be a directory (not
// a symbolic link), owned by this process's effective uid, with no group
// or other permission bits. Errors: ENOTFOUND when it does not exist;
// EFORBIDDEN naming the path and what is wrong otherwise.
func checkSocketDir(dir string) error {
	return private.CheckDir("host socket directory", dir, socketDirFix)
}

// socketDirFix ends a refusal of the socket directory.
const socketDirFix = "stratus never uses it (docs/security.md § The host socket); remove it, or set XDG_RUNTIME_DIR to a directory of yours with mode 0700"

// checkSocketFile refuses a socket file at path owned by another uid
// (EFORBIDDEN); a missing file is no error.
func checkSocketFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if uid, ok := private.Owner(fi); ok && uid != os.Geteuid() {
		return stratus.Errorf(stratus.EFORBIDDEN, "host socket %s belongs to uid %d, not to you (uid %d); stratus never talks to it (docs/security.md § The host socket)", path, uid, os.Geteuid())
	}
	return nil
}

// checkPeer refuses (EFORBIDDEN) a connection whose other end runs as
// another uid than this process (peerUID); who names that end ("host",
// "client") in the message.
func checkPeer(c net.Conn, path, who string) error {
	uid, known, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("the %s on %s: its credentials: %w", who, path, err)
	}
	if known && uid != os.Geteuid() {
		return stratus.Errorf(stratus.EFORBIDDEN, "the %s on %s runs as uid %d, not as you (uid %d): refused (docs/security.md § The host socket)", who, path, uid, os.Geteuid())
	}
	return nil
}

// dialHost connects to the host socket at path and checks that the host
// is this user's (checkPeer).
func dialHost(ctx context.Context, path string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(c, path, "host"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
