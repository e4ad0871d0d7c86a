// Package inputfile opens the files the CLI reads as its input — task
// files, flow and role files, config.yaml, a script engine's scenario, a
// JSON schema — and refuses any that is not a regular file, as bad input
// (EINVALID: the CLI exits 2).
//
// A named pipe (FIFO) blocks open(2) until a writer comes, and the
// process cannot be stopped while it waits (SIGINT and SIGTERM are only
// handled between system calls); a device may never end, or act when it
// is opened; a directory is not a file. So the path is checked before it
// is opened, and the file actually opened (with O_NONBLOCK, which makes
// opening a FIFO return at once) is checked again, in case the path was
// swapped in between.
//
// It does not cap what it reads: each caller has its own cap and error
// (task.MaxBytes, flow.MaxFlowBytes …), read from the file Open returns.
package inputfile

import (
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/stratusflow/stratus"
)

// Open opens the regular file at path (a symbolic link to one is
// followed) for reading. what names it in messages ("task file").
//
// Errors: the os package's when path cannot be found or opened
// (errors.Is(err, fs.ErrNotExist) for a missing file); EINVALID naming
// what, the path and what it is instead (`is a named pipe (FIFO), not a
// regular file`) for anything but a regular file.
func Open(what, path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(what, path, fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if err := regular(what, path, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the whole regular file at path (Open), for an input
// without a cap of its own. Errors are Open's, or the read's.
func ReadFile(what, path string) ([]byte, error) {
	f, err := Open(what, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// regular refuses (EINVALID) what fi describes unless it is a regular file.
func regular(what, path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return stratus.Errorf(stratus.EINVALID, "%s %s is %s, not a regular file; valid: a regular file", what, path, Kind(fi.Mode()))
}

// Kind is a file type in words, for a message: "a regular file", "a
// directory", "a named pipe (FIFO)"…
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}
