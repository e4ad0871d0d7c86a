package private

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/stratusflow/stratus"
)

// DirPerm and FilePerm are the modes a private directory and file are
// created with (before the umask, which only ever removes bits).
const (
	DirPerm  os.FileMode = 0o700
	FilePerm os.FileMode = 0o600
)

// open is the group and other permission bits, none of which a private
// directory or file keeps.
const open os.FileMode = 0o077

// Owner returns the uid owning the file fi describes, when the system
// says (false on a system without Unix owners).
func Owner(fi fs.FileInfo) (uid int, known bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// CheckDir refuses a directory another user made or may enter: dir must
// be a directory (not a symbolic link: Lstat), owned by this process's
// effective uid, with no group or other permission bits. what names the
// directory in messages ("host socket directory"); fix, when not empty,
// ends each refusal (what the user can do about it).
//
// Errors: ENOTFOUND when dir does not exist; EFORBIDDEN naming the path
// and what is wrong (`is a symbolic link`, `is not a directory`, `belongs
// to uid N, not to you (uid M)`, `has mode 0777`); the file system's
// error, wrapped with the path, otherwise.
func CheckDir(what, dir, fix string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return stratus.Errorf(stratus.ENOTFOUND, "%s %s does not exist", what, dir)
	} else if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	return checkDirInfo(what, dir, fix, fi)
}

func checkDirInfo(what, dir, fix string, fi fs.FileInfo) error {
	if fix != "" {
		fix = "; " + fix
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s is a symbolic link%s", what, dir, fix)
	case !fi.IsDir():
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s is not a directory (%s)%s", what, dir, fi.Mode().Type(), fix)
	}
	if uid, ok := Owner(fi); ok && uid != os.Geteuid() {
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s belongs to uid %d, not to you (uid %d): another user may have made it to read or replace what you put there%s", what, dir, uid, os.Geteuid(), fix)
	}
	if perm := fi.Mode().Perm(); perm&open != 0 {
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s has mode %04o: other users may enter it (want 0700)%s", what, dir, perm, fix)
	}
	return nil
}

// MakeDir creates dir with mode 0700 when it is missing (its parent must
// exist), then checks it (CheckDir). A directory that exists is never
// changed: one that is not this user's, or that others may enter, is
// refused. Errors are CheckDir's, or Mkdir's wrapped with the path.
func MakeDir(what, dir, fix string) error {
	if err := os.Mkdir(dir, DirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	return CheckDir(what, dir, fix)
}

// maxTries bounds the names CreateIn tries for one file.
const maxTries = 1000

// CreateIn creates a new file in dir, a directory only this user may enter
// (MakeDir: made 0700 when missing, then checked, and the directory
// actually opened is checked again, so that a name swapped for another
// user's directory in between is refused too), and returns it open for
// writing with its path. The file is name, or, when that is taken, name
// with "-2", "-3"… before its extension: it is created with
// O_CREATE|O_EXCL|O_NOFOLLOW and mode 0600, so an existing file or a
// symbolic link is never reused or followed.
//
// Errors: MakeDir's; EFORBIDDEN when the opened directory fails the check;
// the file system's, wrapped with the path.
func CreateIn(what, dir, fix, name string) (*os.File, string, error) {
	if err := MakeDir(what, dir, fix); err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if err := checkDirInfo(what, dir, fix, fi); err != nil {
		return nil, "", err
	}
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= maxTries; i++ {
		n := name
		if i > 1 {
			n = stem + "-" + strconv.Itoa(i) + ext
		}
		f, err := root.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, FilePerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return nil, "", fmt.Errorf("%s %s: %w", what, dir, err)
		}
		return f, filepath.Join(dir, n), nil
	}
	return nil, "", fmt.Errorf("%s %s: %s and %d more names are taken", what, dir, name, maxTries-1)
}

// ReadFile reads a secret file the user names (what names it in messages,
// "--token-file"): at most max bytes, and only when no other user could
// have written or read it, as ssh requires of its key files:
//
//   - path itself is a regular file, not a symbolic link (Lstat);
//   - it belongs to this process's effective uid;
//   - its mode has no group or other bits (0600 or 0400);
//   - its directory belongs to this uid or to root, and neither group nor
//     others may write it (or they could swap the file for their own).
//
// The file is opened without following a symbolic link, and the file
// opened must be the one checked. Errors: ENOTFOUND when it does not
// exist; EFORBIDDEN naming the path and the rule it breaks; ETOOLARGE
// over max bytes; the file system's, wrapped with the path.
func ReadFile(what, path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "%s %s does not exist", what, path)
	} else if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if err := checkFileInfo(what, path, fi); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %s: its directory: %w", what, path, err)
	}
	if uid, ok := Owner(di); ok && uid != os.Geteuid() && uid != 0 {
		return nil, stratus.Errorf(stratus.EFORBIDDEN, "%s %s is in directory %s, which belongs to uid %d, not to you (uid %d) or root: its owner could replace the file; valid: a file in a directory of yours", what, path, dir, uid, os.Geteuid())
	}
	if perm := di.Mode().Perm(); perm&0o022 != 0 {
		return nil, stratus.Errorf(stratus.EFORBIDDEN, "%s %s is in directory %s, which has mode %04o: other users may write it and replace the file; valid: a directory only you may write (chmod go-w %s)", what, path, dir, perm, dir)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	defer f.Close()
	oi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !os.SameFile(fi, oi) {
		return nil, stratus.Errorf(stratus.EFORBIDDEN, "%s %s was replaced while it was checked; valid: a file no one else may replace", what, path)
	}
	if err := checkFileInfo(what, path, oi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(b)) > max {
		return nil, stratus.Errorf(stratus.ETOOLARGE, "%s %s is over %d bytes", what, path, max)
	}
	return b, nil
}

// checkFileInfo is ReadFile's rule for the file itself.
func checkFileInfo(what, path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s is a symbolic link; valid: the file itself (a link's owner could point it elsewhere)", what, path)
	case !fi.Mode().IsRegular():
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s is not a regular file (%s)", what, path, fi.Mode().Type())
	}
	if uid, ok := Owner(fi); ok && uid != os.Geteuid() {
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s belongs to uid %d, not to you (uid %d): its owner could read or change it; valid: a file of yours (chown)", what, path, uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&open != 0 {
		return stratus.Errorf(stratus.EFORBIDDEN, "%s %s has mode %04o: another user could read or change it; valid: 0600 (chmod 600 %s)", what, path, perm, path)
	}
	return nil
}
