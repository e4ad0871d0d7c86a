package fs

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/statedir"
)

// Permissions of what Put creates (before the process umask) outside the
// state dir: the ctx files are the user's project files. Under the private
// dir (Private), and everywhere in an owner-only sink (OwnerOnly), Put
// creates with statedir.DirPerm and statedir.FilePerm (0700 and 0600:
// docs/security.md § Files under .stratus).
const (
	DirPerm  os.FileMode = 0o755
	FilePerm os.FileMode = 0o644
)

// Sink stores each key as the file <root>/<key>. It is safe for
// concurrent use. It keeps a small cache of open directory handles (the
// parent directories Put writes into), so a Put into a known directory
// costs a few syscalls instead of a walk of every path component; a cached
// handle is used only while the path still names that same directory.
type Sink struct {
	root      string // absolute, cleaned
	private   string // first segment of the keys that follow no link (Private)
	ownerOnly bool   // every key is the owner's alone (OwnerOnly)

	mu   sync.Mutex
	dirs map[string]*os.Root // parent dir key ("." for the root) → open handle
}

// maxCachedDirs bounds the directory-handle cache (open descriptors).
const maxCachedDirs = 64

// dirRoot returns an open handle on <root>/<dir>, creating the directory
// when missing. The handle was opened through the sink's root, so nothing
// done through it leaves the root.
func (s *Sink) dirRoot(dir string, perm os.FileMode) (*os.Root, error) {
	full := filepath.Join(s.root, filepath.FromSlash(dir))
	s.mu.Lock()
	d := s.dirs[dir]
	s.mu.Unlock()
	if d != nil {
		// Still the same directory at that path? (It may have been moved,
		// e.g. archived by a rerun, or replaced.)
		if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
			if di, err := d.Stat("."); err == nil && os.SameFile(fi, di) {
				return d, nil
			}
		}
		s.mu.Lock()
		if s.dirs[dir] == d {
			delete(s.dirs, dir)
		}
		s.mu.Unlock()
		// Not closed: another Put may still be using it; the GC's
		// finalizer on the file releases it.
	}
	rootPerm := DirPerm
	if s.ownerOnly {
		rootPerm = statedir.DirPerm
	}
	if err := os.MkdirAll(s.root, rootPerm); err != nil {
		return nil, fmt.Errorf("fs sink: create root: %w", err)
	}
	r, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, fmt.Errorf("fs sink: open root: %w", err)
	}
	if dir == "." {
		d = r
	} else {
		defer r.Close()
		if err := r.MkdirAll(filepath.FromSlash(dir), perm); err != nil {
			return nil, err
		}
		if d, err = r.OpenRoot(filepath.FromSlash(dir)); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.dirs == nil || len(s.dirs) >= maxCachedDirs {
		s.dirs = map[string]*os.Root{} // dropped handles are released by the GC
	}
	s.dirs[dir] = d
	s.mu.Unlock()
	return d, nil
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Sink rooted at root (made absolute against the working
// directory). The directory need not exist: the first Put creates it.
func New(root string) *Sink {
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return &Sink{root: filepath.Clean(root)}
}

// Private makes the keys under the top-level directory dir (Stratus's
// state dir, ".stratus") the sink's own: a Put, Get or Delete of such a key
// reaches nothing through a symbolic link below dir (dir itself may be
// one) and reads only a regular file — EINVALID otherwise (a link planted
// in .stratus/uploads/ made uploads read and write outside it) — and a Put creates its file 0600 and its missing
// directories 0700 (docs/security.md § Files under .stratus). It returns s.
func (s *Sink) Private(dir string) *Sink {
	s.private = dir
	return s
}

// OwnerOnly makes every file a Put creates 0600 and every directory 0700,
// the root included: for a sink rooted in the state dir (docs/security.md
// § Files under .stratus). It returns s.
func (s *Sink) OwnerOnly() *Sink {
	s.ownerOnly = true
	return s
}

// perms returns the modes a Put of key creates its directories and its
// file with.
func (s *Sink) perms(key string) (dir, file os.FileMode) {
	if s.ownerOnly || s.isPrivate(key) {
		return statedir.DirPerm, statedir.FilePerm
	}
	return DirPerm, FilePerm
}

// plain refuses (EINVALID) a key one of whose existing components below
// its first segment is a symbolic link or, short of the last, not a
// directory; with regular, an existing last component must be a regular
// file. A missing component ends the check (Put creates it).
func (s *Sink) plain(key string, regular bool) error {
	segs := strings.Split(key, "/")
	p := filepath.Join(s.root, segs[0])
	for i := 1; i < len(segs); i++ {
		p = filepath.Join(p, segs[i])
		fi, err := os.Lstat(p)
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		} else if err != nil {
			return fmt.Errorf("fs sink: %q: %w", key, err)
		}
		last := i == len(segs)-1
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q reaches a symbolic link at %s; Stratus's state follows none", key, path.Join(segs[:i+1]...))
		case !last && !fi.IsDir():
			return stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q: %s is not a directory", key, path.Join(segs[:i+1]...))
		case last && regular && !fi.Mode().IsRegular():
			return stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q is not a regular file (%s)", key, fi.Mode().Type())
		}
	}
	return nil
}

func (s *Sink) isPrivate(key string) bool {
	return s.private != "" && strings.HasPrefix(key, s.private+"/")
}

// Root returns the absolute root directory.
func (s *Sink) Root() string { return s.root }

// Path returns the absolute file path key maps to, or "" when key is not
// a valid sink key (sink.CheckKey). The file need not exist.
func (s *Sink) Path(key string) string {
	if sink.CheckKey(key) != nil {
		return ""
	}
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Put writes body to <root>/<key> atomically: a temporary file in the same
// directory, then renamed over the target. Missing directories are
// created. Errors: EINVALID (Field "key") for an invalid key or one that
// resolves outside the root through a symbolic link; a wrapped I/O error
// otherwise (the temporary file is removed).
func (s *Sink) Put(ctx context.Context, key string, body []byte) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isPrivate(key) {
		if err := s.plain(key, false); err != nil {
			return err
		}
		if fi, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(key))); err == nil && fi.IsDir() {
			return stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q is a directory", key)
		}
	}
	dir, base := path.Split(key)
	dir = path.Clean(dir)
	if dir == "" {
		dir = "."
	}
	dirPerm, filePerm := s.perms(key)
	r, err := s.dirRoot(dir, dirPerm)
	if err != nil {
		return s.ioErr("put", key, err)
	}
	tmp, f, err := createTemp(r)
	if err != nil {
		return s.putErr(key, err)
	}
	cleanup := func(err error) error {
		f.Close()
		r.Remove(tmp)
		return s.putErr(key, err)
	}
	// Every error is checked, Close's included (a file system may report
	// a failed write only there): a Put that returns nil left the whole
	// body under key (docs/security.md § Output that did not persist).
	if _, err := f.Write(body); err != nil {
		return cleanup(err)
	}
	// OpenFile's mode is filtered by the umask; the contract is filePerm.
	if err := f.Chmod(filePerm); err != nil {
		return cleanup(err)
	}
	if err := f.Close(); err != nil {
		r.Remove(tmp)
		return s.putErr(key, err)
	}
	if err := r.Rename(tmp, base); err != nil {
		r.Remove(tmp)
		return s.putErr(key, err)
	}
	return nil
}

// putErr is the error of a Put that failed writing key: it names the
// file the key maps to, never the temporary file the bytes went to first
// ("fs sink: write /root/a/b.md: no space left on device"), and keeps the
// system error for errors.Is (stratus.StorageFull: ENOSPC, EDQUOT). An
// escape through a symbolic link is ioErr's EINVALID.
func (s *Sink) putErr(key string, err error) error {
	if escapes(err) {
		return s.ioErr("put", key, err)
	}
	var pe *iofs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("fs sink: write %s: %w", s.Path(key), err)
}

// Get returns the bytes of <root>/<key>. Errors: ENOTFOUND when no file is
// stored under key (a directory is not a stored key); EINVALID (Field
// "key") for an invalid or escaping key; a wrapped I/O error otherwise.
func (s *Sink) Get(ctx context.Context, key string) ([]byte, error) {
	if err := sink.CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isPrivate(key) {
		if err := s.plain(key, true); err != nil {
			return nil, err
		}
	}
	r, err := s.openRoot(key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	name := filepath.FromSlash(key)
	fi, err := r.Stat(name)
	if err != nil {
		return nil, s.ioErr("get", key, err)
	}
	if fi.IsDir() {
		return nil, notFound(key)
	}
	b, err := r.ReadFile(name)
	if err != nil {
		return nil, s.ioErr("get", key, err)
	}
	return b, nil
}

// Size returns the length of the file <root>/<key> without reading it
// (sink.Sink). Errors as Get's.
func (s *Sink) Size(ctx context.Context, key string) (int64, error) {
	if err := sink.CheckKey(key); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.isPrivate(key) {
		if err := s.plain(key, true); err != nil {
			return 0, err
		}
	}
	r, err := s.openRoot(key)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	fi, err := r.Stat(filepath.FromSlash(key))
	if err != nil {
		return 0, s.ioErr("size", key, err)
	}
	if fi.IsDir() {
		return 0, notFound(key)
	}
	return fi.Size(), nil
}

// openRoot opens the sink's root for reading key: ENOTFOUND (for key)
// when the root does not exist yet.
func (s *Sink) openRoot(key string) (*os.Root, error) {
	r, err := os.OpenRoot(s.root)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, notFound(key)
	} else if err != nil {
		return nil, fmt.Errorf("fs sink: open root: %w", err)
	}
	return r, nil
}

// GetMax is Get refusing a file over max bytes (sink.Sink): the size is
// read from the open file, and at most max+1 bytes are read whatever it
// says.
func (s *Sink) GetMax(ctx context.Context, key string, max int64) ([]byte, error) {
	if err := sink.CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.openRoot(key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Never through a link, never a FIFO or device (whose open or read
	// would block): an upload is a plain file.
	if err := s.plain(key, true); err != nil {
		return nil, err
	}
	f, err := r.OpenFile(filepath.FromSlash(key), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q is a symbolic link", key)
		}
		return nil, s.ioErr("get", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, s.ioErr("get", key, err)
	}
	if fi.IsDir() {
		return nil, notFound(key)
	}
	if !fi.Mode().IsRegular() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "key", "sink key %q is not a regular file (%s)", key, fi.Mode().Type())
	}
	b, err := sink.ReadMax(f, key, fi.Size(), max)
	if err != nil && stratus.ErrorCode(err) != stratus.ETOOLARGE {
		return nil, fmt.Errorf("fs sink: %w", err)
	}
	return b, err
}

// Delete removes <root>/<key> (sink.Sink); a missing file is no error.
func (s *Sink) Delete(ctx context.Context, key string) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := os.OpenRoot(s.root)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("fs sink: open root: %w", err)
	}
	defer r.Close()
	if err := s.plain(path.Dir(key)+"/x", false); err != nil && path.Dir(key) != "." {
		return err // the entry is removed, never what a link on the way points at
	}
	name := filepath.FromSlash(key)
	if fi, err := r.Lstat(name); err == nil && fi.IsDir() {
		return nil // a directory is not a stored key
	}
	if err := r.Remove(name); err != nil && !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return s.ioErr("delete", key, err)
	}
	return nil
}

// List returns the keys of the files under <root>/<dir>, sorted (the
// sink.Sink contract); a missing dir lists nothing. Temporary files of a
// Put in progress are not keys. Symbolic links are not followed.
func (s *Sink) List(ctx context.Context, dir string) ([]string, error) {
	if err := sink.CheckKey(dir); err != nil {
		return nil, err
	}
	var keys []string
	top := filepath.Join(s.root, filepath.FromSlash(dir))
	err := filepath.WalkDir(top, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) && p == top {
				return iofs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".stratus-tmp-") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fs sink: list %q: %w", dir, err)
	}
	sort.Strings(keys)
	return keys, nil
}

// createTemp creates an exclusive temporary file in the directory r. os.Root
// has no CreateTemp, so the random suffix is ours; O_EXCL makes a collision
// a retry, never a shared file. The name has a fixed length, so a key whose
// last segment is near NAME_MAX (255 bytes) still gets one.
func createTemp(r *os.Root) (string, *os.File, error) {
	var err error
	for range 10 {
		var rnd [8]byte
		for i := range rnd {
			rnd[i] = byte(rand.Uint32())
		}
		tmp := ".stratus-tmp-" + hex.EncodeToString(rnd[:])
		var f *os.File
		f, err = r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, statedir.FilePerm) // Put sets its mode once written
		if err == nil {
			return tmp, f, nil
		}
		if !errors.Is(err, iofs.ErrExist) {
			return "", nil, err
		}
	}
	return "", nil, err
}

func notFound(key string) error {
	return stratus.FieldErrorf(stratus.ENOTFOUND, "key", "nothing stored under sink key %q", key)
}

// ioErr maps what os.Root reports: a missing file (or a file where a
// directory was expected) is ENOTFOUND, a path that escapes the root
// through a symbolic link is EINVALID, the rest stays a wrapped I/O error.
// os does not export its escape error, so it is matched by its text.
func (s *Sink) ioErr(op, key string, err error) error {
	switch {
	case (op == "get" || op == "size") && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
		return notFound(key)
	case escapes(err):
		return stratus.FieldErrorf(stratus.EINVALID, "key",
			"sink key %q resolves outside the sink root %q through a symbolic link", key, s.root)
	}
	return fmt.Errorf("fs sink: %s %q: %w", op, key, err)
}

func escapes(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}
