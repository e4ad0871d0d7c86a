//go:build !linux

package host

import "net"

// peerUID does not know the peer's uid on this system: SO_PEERCRED is
// Linux's. The host socket is then guarded by its directory alone
// (checkSocketDir: this user's, mode 0700), which no other user can enter
// to connect or to put a socket of theirs in (docs/security.md § The host
// socket).
func peerUID(net.Conn) (uid int, known bool, err error) { return 0, false, nil }
