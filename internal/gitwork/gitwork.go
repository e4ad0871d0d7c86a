package gitwork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotTree is the sentinel of every "not a git work tree" answer; the
// error carrying it is a *NotTreeError, which says why.
var ErrNotTree = errors.New("not a git work tree")

// NotTreeError says why Dir is not a git work tree Stratus can measure a
// change in: no repository contains it, git is not installed, the
// enclosing repository ignores it, or (from Head) the repository has no
// commit yet.
type NotTreeError struct {
	Dir    string
	Reason string
}

func (e *NotTreeError) Error() string { return e.Dir + " is not a git work tree: " + e.Reason }

// Unwrap makes errors.Is(err, ErrNotTree) hold.
func (e *NotTreeError) Unwrap() error { return ErrNotTree }

// Reason is the reason of a not-a-tree error, or "" when err is not one.
func Reason(err error) string {
	var nt *NotTreeError
	if errors.As(err, &nt) {
		return nt.Reason
	}
	return ""
}

// Run runs git in dir with the extra environment env (NAME=value) and
// returns its stdout. The caller's GIT_* variables (GIT_DIR,
// GIT_INDEX_FILE, ...) are dropped so they cannot point the command at
// another repository or index, and optional locks are off
// (GIT_OPTIONAL_LOCKS=0: a status never rewrites the repository's index).
// A failure's error is a *RunError naming the command and carrying git's
// stderr; it wraps the *exec.ExitError, or exec.ErrNotFound when git is
// not installed.
func Run(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	return RunInput(ctx, dir, env, nil, args...)
}

// RunInput is Run with stdin as git's standard input (nil: none).
func RunInput(ctx context.Context, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	// Once ctx ends and git is killed, a child it started (ssh, a remote
	// helper) may still hold its output open: Wait gives up on it after a
	// while rather than block the caller for good.
	cmd.WaitDelay = 5 * time.Second
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GIT_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(append(cmd.Env, "GIT_OPTIONAL_LOCKS=0"), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), ctx.Err())
		}
		return nil, &RunError{Args: args, Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// RunError is a git that failed to run or ran and failed: its arguments
// (after `-C dir`), the exec error (an *exec.ExitError, or one wrapping
// exec.ErrNotFound) and git's stderr, trimmed. Its text is "git ARGS:
// ERR: STDERR".
type RunError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *RunError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// Unwrap makes errors.Is(err, exec.ErrNotFound) and errors.As(err,
// **exec.ExitError) hold.
func (e *RunError) Unwrap() error { return e.Err }

// exitCode is the exit status of a git that ran and failed, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Tree is the git work tree a dir is in.
type Tree struct {
	Dir    string // the dir asked about, as given
	Root   string // the work tree's top level (git rev-parse --show-toplevel)
	Prefix string // Dir's path inside Root, slash-separated with a trailing "/"; "" at the root
}

// Open returns the git work tree dir is in. The error wraps ErrNotTree
// (a *NotTreeError with the reason) when no repository contains dir, git
// is not installed, or the enclosing repository ignores dir itself (`git
// check-ignore .`: its changes cannot be listed or staged, so an empty
// answer would be a false one). Any other error is git failing.
func Open(ctx context.Context, dir string) (*Tree, error) {
	if noRepository(dir) {
		// What git would answer, without starting it: a run in a work dir
		// outside any repository asks several times.
		return nil, &NotTreeError{dir, "no git repository contains it"}
	}
	out, err := Run(ctx, dir, nil, "rev-parse", "--show-toplevel", "--show-prefix")
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return nil, &NotTreeError{dir, "git is not installed"}
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		// 128 is git's fatal exit: not in a repository, inside .git, a
		// bare repository, a repository git refuses (safe.directory).
		reason := "no git repository contains it"
		if msg := err.Error(); !strings.Contains(msg, "not a git repository") {
			reason = "git rev-parse failed (" + strings.Join(strings.Fields(msg), " ") + ")"
		}
		return nil, &NotTreeError{dir, reason}
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 1 || lines[0] == "" {
		return nil, fmt.Errorf("git rev-parse --show-toplevel in %s printed no top level", dir)
	}
	t := &Tree{Dir: dir, Root: lines[0]}
	if len(lines) > 1 {
		t.Prefix = lines[1]
	}
	if t.Prefix == "" {
		return t, nil // a repository never ignores its own top level
	}
	_, err = Run(ctx, dir, nil, "check-ignore", "-q", ".")
	switch code := exitCode(err); {
	case err == nil:
		return nil, &NotTreeError{dir, "the repository at " + t.Root + " ignores it (git check-ignore: " + strings.TrimSuffix(t.Prefix, "/") + ")"}
	case code == 1:
		return t, nil // not ignored
	default:
		return nil, err
	}
}

// noRepository reports whether git's discovery (gitrepository-layout(5),
// the "GIT_DIR" search of git(1)) can find no repository for dir, an
// existing directory: neither dir nor any directory above it holds a
// ".git" entry (a directory or a gitfile) or is itself a git directory
// (HEAD, objects/ and refs/: a bare repository). It errs on the side of
// asking git: any doubt (dir missing, a stat failing) is false.
func noRepository(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return false
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); !errors.Is(err, os.ErrNotExist) {
			return false
		}
		if _, err := os.Lstat(filepath.Join(d, "HEAD")); !errors.Is(err, os.ErrNotExist) {
			return false // maybe a bare repository: git decides
		}
		if parent := filepath.Dir(d); parent == d {
			return true
		}
	}
}

// Head returns the full SHA of the commit HEAD names. The error wraps
// ErrNotTree when the repository has no commit yet: there is no base to
// measure a change from.
func (t *Tree) Head(ctx context.Context) (string, error) {
	out, err := Run(ctx, t.Dir, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		if exitCode(err) == 1 && ctx.Err() == nil {
			return "", &NotTreeError{t.Dir, "the repository at " + t.Root + " has no commit yet"}
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// StatusEntry is one change git status reports.
type StatusEntry struct {
	Code string // the porcelain v1 XY code: "M ", " M", "A ", "??", "R ", ...
	Path string // repository-relative, slash-separated
	Orig string // the source of a rename or copy; "" otherwise
}

// StatusOptions shape Status.
type StatusOptions struct {
	// Exclude are paths relative to the tree's Dir whose changes are left
	// out, each with everything under it.
	Exclude []string
	// InDir limits the changes to those under Dir (`git status -- .`);
	// otherwise the whole work tree's are listed.
	InDir bool
}

// Status lists the work tree's changes: `git status --porcelain=v1 -z
// --untracked-files=all`, untracked files included, ignored ones not.
// Excluded paths are left out: a rename from an excluded path keeps no
// Orig, and a rename into an excluded path reads as the deletion of its
// source ("D "), which is what it is to the paths that count.
func (t *Tree) Status(ctx context.Context, o StatusOptions) ([]StatusEntry, error) {
	args := []string{"status", "--porcelain=v1", "-z", "--untracked-files=all"}
	if o.InDir {
		args = append(args, "--", ".")
	}
	out, err := Run(ctx, t.Dir, nil, args...)
	if err != nil {
		return nil, err
	}
	var prefixes []string
	for _, e := range o.Exclude {
		prefixes = append(prefixes, path.Clean(path.Join(t.Prefix, e))+"/")
	}
	excluded := func(p string) bool {
		for _, pre := range prefixes {
			if strings.HasPrefix(p, pre) || p+"/" == pre {
				return true
			}
		}
		return false
	}
	entries := []StatusEntry{}
	for _, e := range parseStatus(out) {
		if e.Orig != "" && excluded(e.Orig) {
			e.Orig = ""
		}
		if excluded(e.Path) {
			if e.Orig == "" {
				continue
			}
			e = StatusEntry{Code: "D ", Path: e.Orig}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// parseStatus reads `git status --porcelain=v1 -z`: "XY path\0", and for a
// rename or copy "XY path\0orig\0".
func parseStatus(out []byte) []StatusEntry {
	recs := strings.Split(string(out), "\x00")
	var entries []StatusEntry
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 {
			continue
		}
		e := StatusEntry{Code: rec[:2], Path: rec[3:]}
		if strings.ContainsAny(e.Code, "RC") && i+1 < len(recs) {
			i++
			e.Orig = recs[i]
		}
		entries = append(entries, e)
	}
	return entries
}
