package workerclient

import (
	"bytes"
	"path/filepath"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
)

// FileSentinelPrefix starts a body that stands for a file's contents
// (docs/contracts.md § Output is a tool call: "Large or file-shaped content
// can use the `@file:<abs-path>` sentinel body").
const FileSentinelPrefix = "@file:"

// ResolveFileSentinel returns the bytes to send for a submit or artifact
// body. A body that is exactly "@file:<absolute path>" — one line, after
// trimming one trailing "\n" or "\r\n" — is replaced by the contents of that
// file; any other body is returned unchanged. The sentinel is resolved here,
// on the worker side, because the worker API may run where the worker's disk
// is not (DESIGN.md § Limits: the server never reads a worker's files).
//
// Errors: *stratus.Error EINVALID (Field "body") when the path is empty or
// relative (the rule is an absolute path, so the file a worker means never
// depends on the directory it ran in), or when worker.ReadOutputFile
// refuses the file (Stratus's state, a second hard link, another user's
// file) or cannot read it.
func ResolveFileSentinel(body []byte) ([]byte, error) {
	line := bytes.TrimSuffix(body, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if !bytes.HasPrefix(line, []byte(FileSentinelPrefix)) || bytes.ContainsAny(line, "\r\n") {
		return body, nil
	}
	path := string(line[len(FileSentinelPrefix):])
	if path == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body",
			"%q names no file; the sentinel is @file:<absolute path> (docs/child-contract.md § Output)", line)
	}
	if !filepath.IsAbs(path) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body",
			"@file: sentinel path %q is relative; the sentinel is @file:<absolute path> (docs/child-contract.md § Output)", path)
	}
	return worker.ReadOutputFile(path, 0)
}
