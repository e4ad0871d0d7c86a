package worker

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus"
)

// FileSentinel starts a body that names a file instead of carrying it
// (seed 000 § Why OUT is a tool call: "the @file:<abs-path> sentinel").
const FileSentinel = "@file:"

// StateDirName is the directory under the work dir that holds Stratus's own
// state (config, store, HMAC key, logs); no worker output may come from it.
const StateDirName = ".stratus"

// resolveFileSentinel replaces an `@file:<abs-path>` body with the file's
// bytes. The sentinel is normally resolved on the worker side (runner,
// `stratus worker`); the server resolves it only in embedded mode and only
// for a path inside the run's work dir (symbolic links resolved first).
// Errors: EINVALID naming the path and the rule. A body that merely starts
// with the sentinel text on a longer first line is treated the same way;
// any other body is returned unchanged.
func (s *Service) resolveFileSentinel(c *Caller, body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(FileSentinel)) {
		return body, nil
	}
	p := strings.TrimSuffix(string(body[len(FileSentinel):]), "\n")
	if strings.ContainsAny(p, "\n\x00") {
		return body, nil // not a sentinel: a body that happens to start with the text
	}
	if !s.ResolveFiles {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "the %s sentinel is resolved by the worker (runner or `stratus worker`); send the file's bytes", FileSentinel)
	}
	if !filepath.IsAbs(p) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: the path must be absolute", FileSentinel, p)
	}
	root, err := filepath.EvalSymlinks(c.Run.WorkDir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: no such file", FileSentinel, p)
	} else if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: %v", FileSentinel, p, err)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is outside the run's work dir %s; only files inside it may be named", FileSentinel, p, c.Run.WorkDir)
	}
	if rel == StateDirName || strings.HasPrefix(rel, StateDirName+"/") {
		// The state dir holds the HMAC key and the store: never output.
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is inside %s, Stratus's own state; it cannot be output", FileSentinel, p, StateDirName)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is not a regular file", FileSentinel, p)
	}
	if s.MaxBodyBytes > 0 && fi.Size() > s.MaxBodyBytes {
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s%s is %d bytes; the limit is %d", FileSentinel, p, fi.Size(), s.MaxBodyBytes)
	}
	return os.ReadFile(real)
}
