package core

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus"
)

// FileSentinel starts a body that names a file instead of carrying it
// (docs/contracts.md § Output is a tool call).
const FileSentinel = "@file:"

// StateDirName is the directory under the work dir that holds Stratus's own
// state (config, store, HMAC key, logs); no worker output may come from it.
const StateDirName = ".stratus"

// ResolveFileSentinel replaces an `@file:<abs-path>` body with the file's
// bytes. The sentinel is normally resolved on the worker side (runner,
// `stratus worker`); the server resolves it only in embedded mode and only
// for a path inside the run's work dir (symbolic links resolved first).
// Errors: EINVALID naming the path and the rule. A body that merely starts
// with the sentinel text on a longer first line is treated the same way;
// any other body is returned unchanged.
func (s *Service) ResolveFileSentinel(c *Caller, body []byte) ([]byte, error) {
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
	return ReadOutputFile(p, s.MaxBodyBytes)
}

// ReadOutputFile reads the file an `@file:<abs-path>` sentinel names, for the
// server (embedded) and the worker side (runner, `stratus worker`) alike (pinned
// by TestResolveFileSentinel_RefusesStateAndHardLinks). Refused, with EINVALID
// (Field "body") naming the path and the rule: a path whose real location
// (symbolic links resolved) has a ".stratus" component — Stratus's state: the
// HMAC key, the store — ; anything but a regular file; a file with more than one
// hard link (a second name for a file elsewhere, such as the key) or not owned
// by this process's user. Over max bytes (0 = no limit) it is ETOOLARGE. The
// checks are made on the open file, not on its name.
func ReadOutputFile(path string, max int64) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: no such file", FileSentinel, path)
	} else if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: %v", FileSentinel, path, err)
	}
	for _, part := range strings.Split(filepath.ToSlash(real), "/") {
		if part == StateDirName {
			// The state dir holds the HMAC key and the store: never output.
			return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is inside a %s directory (%s), Stratus's own state; it cannot be output", FileSentinel, path, StateDirName, real)
		}
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: %v", FileSentinel, path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is a directory; name a regular file", FileSentinel, path)
	}
	if err != nil || !fi.Mode().IsRegular() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is not a regular file", FileSentinel, path)
	}
	if uid, links, ok := ownerLinks(fi); ok {
		if links > 1 {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s has %d hard links; only a file with one name may be output (write a copy)", FileSentinel, path, links)
		}
		if uid != uint32(os.Geteuid()) {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s is owned by uid %d, not this run's user (uid %d); only the run's own files may be output", FileSentinel, path, uid, os.Geteuid())
		}
	}
	if max > 0 && fi.Size() > max {
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s%s is %d bytes; the limit is %d", FileSentinel, path, fi.Size(), max)
	}
	r := io.Reader(f)
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "%s%s: %v", FileSentinel, path, err)
	}
	if max > 0 && int64(len(b)) > max {
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s%s grew past the limit of %d bytes while read", FileSentinel, path, max)
	}
	return b, nil
}
