package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of what Stratus creates in the state dir (before the process
// umask, which only ever removes bits): docs/security.md § Files under
// .stratus.
const (
	DirPerm  os.FileMode = 0o700 // every directory
	FilePerm os.FileMode = 0o600 // every file
	ExecPerm os.FileMode = 0o700 // a file that must stay executable (a tool)
)

// open is the group and other permission bits, none of which a file or
// directory in the state dir keeps.
const open os.FileMode = 0o077

// inputs are the entries of the state dir the operator edits (install
// writes them; an editor rewrites them with the umask's modes): Secure
// tightens them every time, however few files they hold.
// GitIgnore's allow-list is built from them (Committed).
var inputs = []string{"config.yaml", "scenario.yaml", "flows", "tools"}

// Secure readies the state dir state (DIR/.stratus) for writing: it is
// created 0700 when missing. When it exists with group or other bits (made
// by an older stratus), everything in it is tightened (Tighten) before the
// dir itself, so an interrupted pass is redone next time. Otherwise only
// its top-level entries and the operator's inputs (config.yaml,
// scenario.yaml, flows/, tools/) are tightened: the rest is written by
// Stratus alone, with these modes, and a walk of every run's files on
// every command would cost as much as the runs. Errors are the file
// system's, wrapped with the path.
func Secure(state string) error {
	fi, err := os.Stat(state)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(state, DirPerm); err != nil {
			return fmt.Errorf("create the state dir: %w", err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("the state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the state dir %s is not a directory", state)
	}
	if fi.Mode().Perm()&open != 0 {
		return Tighten(state)
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		return fmt.Errorf("the state dir: %w", err)
	}
	r, err := os.OpenRoot(state)
	if err != nil {
		return fmt.Errorf("the state dir: %w", err)
	}
	defer r.Close()
	for _, e := range entries {
		if err := tighten(r, e.Name(), e); err != nil {
			return err
		}
	}
	for _, name := range inputs {
		if err := tightenTree(r, name); err != nil {
			return err
		}
	}
	return nil
}

// Tighten removes the group and other bits from the directory root and
// everything below it. Every change goes through an os.Root opened on
// root, so neither a symbolic link met on the way nor one swapped in
// meanwhile makes it touch anything outside root; links themselves are
// left as they are (their mode means nothing). root itself is changed
// last, so that a pass cut short is redone by the next Secure.
func Tighten(root string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("tighten %s: %w", root, err)
	}
	defer r.Close()
	if err := tightenTree(r, "."); err != nil {
		return err
	}
	fi, err := r.Lstat(".")
	if err != nil {
		return fmt.Errorf("tighten %s: %w", root, err)
	}
	return tighten(r, ".", fs.FileInfoToDirEntry(fi))
}

// tightenTree tightens name (relative to r) and everything below it, but
// not "." itself; a missing name is no error.
func tightenTree(r *os.Root, name string) error {
	err := fs.WalkDir(r.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == "." {
			return nil
		}
		return tighten(r, p, d)
	})
	if err != nil {
		return fmt.Errorf("tighten %s: %w", filepath.Join(r.Name(), name), err)
	}
	return nil
}

// tighten removes the group and other bits of one entry of r, unless it is
// a symbolic link or has none.
func tighten(r *os.Root, name string, d fs.DirEntry) error {
	if d.Type()&fs.ModeSymlink != 0 {
		return nil
	}
	fi, err := d.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone meanwhile
	} else if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&open != 0 {
		if err := r.Chmod(name, perm&^open); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("tighten %s: %w", filepath.Join(r.Name(), name), err)
		}
	}
	return nil
}
