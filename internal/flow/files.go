package flow

import (
	"fmt"
	"io"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// Size caps on what a flow reads: a flow file and a role file
// are hand-written YAML and Markdown; a run freezes and re-reads them, and
// a role file is rendered into every prompt of its node.
const (
	MaxFlowBytes     = 1 << 20 // a flow file, 1 MiB
	MaxRoleFileBytes = 1 << 20 // a role file (a node's or a supervisor prompt), 1 MiB
)

// StripBOM returns data without a leading UTF-8 byte order mark, which
// PyYAML (worc) skips (yamlast.StripBOM).
func StripBOM(data []byte) []byte { return yamlast.StripBOM(data) }

// InvalidUTF8 returns the byte offset of the first byte of data that is not
// part of a valid UTF-8 sequence, with its 1-based line and column (in
// bytes), or offset -1 when data is valid UTF-8 (yamlast.InvalidUTF8).
func InvalidUTF8(data []byte) (offset, line, col int) { return yamlast.InvalidUTF8(data) }

// tooLarge is the ETOOLARGE of a file over its cap.
func tooLarge(what, path string, size int64, limit int) error {
	return stratus.Errorf(stratus.ETOOLARGE, "%s %s is %d bytes, over the %d-byte (%d MiB) cap; valid: at most %d bytes",
		what, path, size, limit, limit>>20, limit)
}

// ReadRoleFile reads a role file (any prompt file a flow names) for
// validation and for a run: at most MaxRoleFileBytes, checked before the
// file is read (ETOOLARGE naming the size and the cap), valid UTF-8
// (EINVALID naming the file and the byte offset of the first bad byte),
// with a leading byte order mark removed. A path that is not a regular
// file (a FIFO, a device, a directory) is EINVALID (inputfile.Open); other
// opening errors are returned as the os package gives them
// (errors.Is(err, os.ErrNotExist) holds for a missing file).
func ReadRoleFile(path string) ([]byte, error) {
	f, err := inputfile.Open("role file", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxRoleFileBytes {
		return nil, tooLarge("role file", path, fi.Size(), MaxRoleFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRoleFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxRoleFileBytes {
		return nil, tooLarge("role file", path, int64(len(data)), MaxRoleFileBytes)
	}
	if off, line, col := InvalidUTF8(data); off >= 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "role file %s is not valid UTF-8: byte 0x%02x at byte offset %d (line %d, column %d); save it as UTF-8",
			path, data[off], off, line, col)
	}
	return StripBOM(data), nil
}

// readFlowFile reads a flow file for Load: a regular file
// (inputfile.Open), at most MaxFlowBytes, checked before the file is read.
func readFlowFile(path string) ([]byte, error) {
	f, err := inputfile.Open("flow file", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFlowBytes {
		return nil, flowTooLarge(path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFlowBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFlowBytes {
		return nil, flowTooLarge(path, int64(len(data)))
	}
	return data, nil
}

// flowTooLarge is the ParseError of a flow file over MaxFlowBytes.
func flowTooLarge(path string, size int64) error {
	return &ParseError{Problems: []Problem{{File: path, Fatal: true,
		Message: fmt.Sprintf("the flow file is %d bytes, over the %d-byte (%d MiB) cap on a flow file", size, MaxFlowBytes, MaxFlowBytes>>20)}}}
}
