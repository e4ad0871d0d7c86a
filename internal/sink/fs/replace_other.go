//go:build !linux

package fs

import "os"

// replace moves the written temporary file tmp of directory r to base,
// over a file there.
func replace(r *os.Root, tmp, base string) error { return r.Rename(tmp, base) }
