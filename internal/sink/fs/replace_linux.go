package fs

import (
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the directory entries old and new of the directory open
// as dirfd (renameat2(2) RENAME_EXCHANGE); a variable so that a test can
// count its calls or make it unsupported.
var exchange = func(dirfd int, old, new string) error {
	return unix.Renameat2(dirfd, old, dirfd, new, unix.RENAME_EXCHANGE)
}

// replace moves the written temporary file tmp of directory r to base.
// When base exists, the two are exchanged and the old file, now named tmp,
// is unlinked: a reader sees the old bytes or the new, as with a rename
// over base, but ext4 (auto_da_alloc, its default) starts writing back a
// file renamed over another inside the rename: a 64 KiB submit spent about
// half its time on its two files, a fifth with the exchange (README.md §
// Performance), for an early write this package does not promise (doc.go:
// it does not fsync). When base
// does not exist, or the file system cannot exchange, or base is a
// directory, it is r.Rename(tmp, base), errors included.
func replace(r *os.Root, tmp, base string) error {
	d, err := r.Open(".")
	if err != nil {
		return r.Rename(tmp, base)
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return r.Rename(tmp, base)
	}
	done := false
	if cerr := rc.Control(func(fd uintptr) {
		if exchange(int(fd), tmp, base) != nil {
			return // base missing (ENOENT), or no exchange here (EINVAL)
		}
		if unix.Unlinkat(int(fd), tmp, 0) == nil {
			done = true
			return
		}
		// base was a directory (EISDIR) or the unlink failed: put both
		// back, and let the rename say what a rename says.
		exchange(int(fd), tmp, base)
	}); cerr != nil || !done {
		return r.Rename(tmp, base)
	}
	return nil
}
