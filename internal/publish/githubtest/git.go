package githubtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// AddGitRepo creates owner/name backed by the bare git repository at
// bareDir: its branches and their heads are the bare repository's
// refs/heads (a `git push` there is what makes a branch exist or move),
// and merging one of its pull requests makes the real merge, squash or
// rebase in a temporary clone and pushes it to the base branch with a
// normal push, so the bare repository's pre-receive hook decides (a
// refusal answers 405, as GitHub's protected branch). Errors: bareDir is
// not a bare git repository (CheckBare).
func (s *Server) AddGitRepo(owner, name, bareDir string) error {
	abs, err := filepath.Abs(bareDir)
	if err != nil {
		return err
	}
	if err := CheckBare(abs); err != nil {
		return err
	}
	r := &repo{owner: owner, name: name, bare: abs, branches: map[string]string{}}
	if err := refresh(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[owner+"/"+name] = r
	return nil
}

// CheckBare returns nil when dir is a bare git repository (git init
// --bare, git clone --bare); otherwise an error saying what dir is
// instead: missing, not a directory, not a git repository, or a
// repository with a work tree.
func CheckBare(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist; want a bare git repository (git init --bare)", dir)
	case err != nil:
		return fmt.Errorf("%q: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%q is not a directory; want a bare git repository (git init --bare)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return fmt.Errorf("%q is a git repository with a work tree; want a bare one (git clone --bare %s)", dir, dir)
	}
	out, err := runGit("", nil, "--git-dir="+dir, "rev-parse", "--is-bare-repository")
	if err != nil {
		return fmt.Errorf("%q is not a git repository; want a bare git repository (git init --bare)", dir)
	}
	if out != "true" {
		return fmt.Errorf("%q is a git repository with a work tree; want a bare one (git clone --bare %s)", dir, dir)
	}
	return nil
}

// refresh reads r's branches from its bare repository and moves its open
// pull requests' head and base to them, as GitHub follows a push.
func refresh(r *repo) error {
	if r.bare == "" {
		return nil
	}
	out, err := runGit("", nil, "--git-dir="+r.bare, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)", "refs/heads/")
	if err != nil {
		return err
	}
	b := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if ref, sha, ok := strings.Cut(l, " "); ok {
			b[ref] = sha
		}
	}
	r.branches = b
	for _, p := range r.pulls {
		if p.State != "open" {
			continue
		}
		if sha, ok := b[p.Head]; ok {
			p.HeadSHA = sha
		}
		if sha, ok := b[p.Base]; ok {
			p.BaseSHA = sha
		}
	}
	return nil
}

// contains reports whether commit a is an ancestor of (or is) b in r's
// bare repository.
func contains(r *repo, b, a string) bool {
	_, err := runGit("", nil, "--git-dir="+r.bare, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// gitEnv is the environment of every git the stand-in runs: the caller's
// without its GIT_* variables (a hook's GIT_DIR must not redirect it),
// with neither system nor global configuration (no operator hooks path,
// signing or identity), never prompting.
func gitEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	return append(env, extra...)
}

// gitError is a git that exited non-zero: its stderr is kept to tell a
// hook's refusal from a conflict.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, strings.TrimSpace(e.stderr))
}

func runGit(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(env)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", &gitError{args: args, stderr: stderr.String(), err: err}
	}
	return strings.TrimSpace(string(out)), nil
}

// GitHub's answers to a merge it cannot make (REST pulls/merge: 405
// "Method Not Allowed if merge cannot be performed").
const (
	notMergeable = "Pull Request is not mergeable"
	baseMoved    = "Base branch was modified. Review and try the merge again."
)

// gitMerge merges p into its base in r's bare repository by method
// (merge: a merge commit with base and head as parents; squash: one
// commit on base's tip holding base..head; rebase: head's commits
// replayed onto base), in a temporary clone, then pushes the result to
// the base branch with a normal push. It returns the new base head, or
// refused: why GitHub would answer 405 (a conflict, a hook's refusal, a
// base moved meanwhile), with nothing changed.
func gitMerge(r *repo, p *Pull, method, title, message string) (sha, refused string, err error) {
	tmp, err := os.MkdirTemp("", "githubtest-merge-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	wt := filepath.Join(tmp, "w")
	if _, err := runGit(tmp, nil, "clone", "-q", "--no-checkout", r.bare, wt); err != nil {
		return "", "", err
	}
	// Merges and squashes are authored by the merging user and committed
	// by GitHub, as github.com does; a rebase keeps each commit's author.
	env := []string{
		"GIT_AUTHOR_NAME=" + r.owner, "GIT_AUTHOR_EMAIL=" + r.owner + "@users.noreply.github.com",
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com",
	}
	g := func(args ...string) (string, error) { return runGit(wt, env, args...) }
	msg := title
	if message != "" {
		msg += "\n\n" + message
	}
	switch method {
	case "squash":
		if _, err := g("checkout", "-q", "-B", "githubtest-merge", p.BaseSHA); err != nil {
			return "", "", err
		}
		if _, err := g("merge", "-q", "--squash", p.HeadSHA); err != nil {
			return "", notMergeable, nil
		}
		if _, err := g("commit", "-q", "--allow-empty", "-m", msg); err != nil {
			return "", "", err
		}
	case "rebase":
		if _, err := g("checkout", "-q", "-B", "githubtest-merge", p.HeadSHA); err != nil {
			return "", "", err
		}
		if _, err := g("rebase", "-q", "--force-rebase", p.BaseSHA); err != nil {
			_, _ = g("rebase", "--abort")
			return "", notMergeable, nil
		}
	default: // merge, and a merge by hand
		if _, err := g("checkout", "-q", "-B", "githubtest-merge", p.BaseSHA); err != nil {
			return "", "", err
		}
		if _, err := g("merge", "-q", "--no-ff", "-m", msg, p.HeadSHA); err != nil {
			return "", notMergeable, nil
		}
	}
	if sha, err = g("rev-parse", "HEAD"); err != nil {
		return "", "", err
	}
	if _, err := g("push", "-q", "origin", "HEAD:refs/heads/"+p.Base); err != nil {
		var ge *gitError
		if !errors.As(err, &ge) {
			return "", "", err
		}
		switch {
		case strings.Contains(ge.stderr, "hook declined"):
			return "", protectedBranch(p.Base, ge.stderr), nil
		case strings.Contains(ge.stderr, "non-fast-forward"), strings.Contains(ge.stderr, "fetch first"):
			return "", baseMoved, nil
		}
		return "", "", err
	}
	return sha, "", nil
}

// protectedBranch is GitHub's answer to a merge its branch protection
// refuses, with what the hook said (its "remote:" lines).
func protectedBranch(base, stderr string) string {
	var said []string
	for _, l := range strings.Split(stderr, "\n") {
		if t, ok := strings.CutPrefix(l, "remote: "); ok && strings.TrimSpace(t) != "" {
			said = append(said, strings.TrimSpace(t))
		}
	}
	msg := fmt.Sprintf("Protected branch update failed for refs/heads/%s", base)
	if len(said) > 0 {
		msg += ": " + strings.Join(said, "; ")
	}
	return msg + "."
}
