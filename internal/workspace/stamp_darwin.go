package workspace

import (
	"io/fs"
	"syscall"
)

// sysStamp is a file's change time (ns) and inode.
func sysStamp(fi fs.FileInfo) (ctime int64, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Sec*1e9 + st.Ctimespec.Nsec, st.Ino
	}
	return 0, 0
}
