package statedir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// GitIgnoreName is the state dir's own .gitignore (README § Workspaces).
const GitIgnoreName = ".gitignore"

// gitIgnoreMarker opens the block WriteGitIgnore writes: a .gitignore
// holding it has the block already.
const gitIgnoreMarker = "# stratus: runtime files stay out of git"

// Committed are the entries of the state dir the operator commits with
// the project: the inputs (config.yaml, flows/, tools/, scenario.yaml)
// and the .gitignore itself. Everything else in the state dir is written
// by runs — the store and its -wal/-shm files, hmac.key, logs/, locks/,
// runs/ (bundles, workspaces, definitions), uploads/, the host's socket
// dir and log, ctx dirs, pruned, flows.bak-*/tools.bak-* snapshots — and
// is ignored.
func Committed() []string { return append([]string{GitIgnoreName}, inputs...) }

// GitIgnore is the block WriteGitIgnore writes: an allow-list, so that a
// runtime file a later stratus adds is ignored too.
func GitIgnore() []byte {
	var b bytes.Buffer
	b.WriteString(gitIgnoreMarker + " (database, hmac.key, logs, locks, runs,\n")
	b.WriteString("# bundles, uploads, the host's socket, ctx dirs, backups): everything but the\n")
	b.WriteString("# files the operator edits and commits.\n/*\n")
	for _, name := range Committed() {
		b.WriteString("!/" + name + "\n")
	}
	return b.Bytes()
}

// WriteGitIgnore writes GitIgnore into state/.gitignore: a new file, or
// appended to an existing one that does not hold it yet (never
// overwritten: the operator's own lines stay, before it). It reports
// whether it wrote. The file is the operator's (FilePerm); the state dir
// is made when missing (DirPerm). A .gitignore that is not a regular file
// is an error naming it.
func WriteGitIgnore(state string) (bool, error) {
	p := filepath.Join(state, GitIgnoreName)
	if err := os.MkdirAll(state, DirPerm); err != nil {
		return false, err
	}
	old, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("read %s: %w", p, err)
	case bytes.Contains(old, []byte(gitIgnoreMarker)):
		return false, nil
	}
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s is not a regular file; remove it, then install again", p)
	}
	block := GitIgnore()
	if len(old) > 0 {
		sep := "\n"
		if !bytes.HasSuffix(old, []byte("\n")) {
			sep = "\n\n"
		}
		block = append([]byte(sep), block...)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, FilePerm)
	if err != nil {
		return false, err
	}
	if _, err := f.Write(block); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
