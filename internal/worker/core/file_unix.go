//go:build unix

package core

import (
	"os"
	"syscall"
)

// ownerLinks is fi's owner and hard-link count (ok false where the file
// system does not say).
func ownerLinks(fi os.FileInfo) (uid uint32, links uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, uint64(st.Nlink), true
}
