package taskpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/workspace"
)

// Move moves the task file of claim c from pending/ to state (Done or
// Failed) and writes summary beside it as <id>.summary.md (a claim without
// a run, a task refused: RefusedSummary). It returns the
// paths it touched, relative to the work dir dir: the file's old and new
// places and the summary. A file already moved (a watcher killed after the
// move) is found in done/ or failed/ and left there.
func (p *Pool) Move(dir string, c *Claim, state string, summary []byte) ([]string, error) {
	from := filepath.Join(p.Dir(Pending), c.File)
	to := filepath.Join(p.Dir(state), c.File)
	if err := os.MkdirAll(p.Dir(state), statedir.DirPerm); err != nil {
		return nil, err
	}
	if err := os.Rename(from, to); errors.Is(err, os.ErrNotExist) {
		for _, s := range []string{Done, Failed} {
			if _, err := os.Stat(filepath.Join(p.Dir(s), c.File)); err == nil {
				state, to = s, filepath.Join(p.Dir(s), c.File)
				break
			}
		}
		if _, err := os.Stat(to); err != nil {
			return nil, fmt.Errorf("task %s: its file %s is neither in %s/ nor moved: %w", c.TaskID, c.File, Pending, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("move task %s to %s/: %w", c.TaskID, state, err)
	}
	sum := filepath.Join(p.Dir(state), c.TaskID+SummarySuffix)
	if c.RunID == "" {
		// Refused: it never ran (RefusedSummary).
		sum = filepath.Join(p.Dir(state), RefusedSummary(c.File))
	}
	if err := os.WriteFile(sum, summary, statedir.FilePerm); err != nil {
		return nil, fmt.Errorf("write the summary of task %s: %w", c.TaskID, err)
	}
	var rel []string
	for _, a := range []string{from, to, sum} {
		r, err := filepath.Rel(dir, a)
		if err != nil {
			return nil, err
		}
		rel = append(rel, filepath.ToSlash(r))
	}
	return rel, nil
}

// AuditCommit is auditCommit under the pool's lock: two watchers of one
// pool (one repository, one index) never commit at once.
func (p *Pool) AuditCommit(ctx context.Context, dir, message string, paths []string) (commit, note string, err error) {
	unlock, err := p.lock()
	if err != nil {
		return "", "", err
	}
	defer unlock()
	return auditCommit(ctx, dir, message, paths)
}

// auditCommit commits exactly paths (relative to the work dir dir, as Move
// returns them) with message, authored and committed by Stratus's identity
// (workspace.AuthorName), with no hooks (gitwork.FixedConfig): worc's audit
// commit of one task's files (worc configuration.md § git.footprint), never
// anything else staged or changed. It returns the commit, or "" and a
// note when there is nothing to commit: the work dir is not a git work
// tree, or the files are ignored.
func auditCommit(ctx context.Context, dir, message string, paths []string) (commit, note string, err error) {
	env := append(gitwork.ConfigEnv(gitwork.FixedConfig()...),
		"GIT_AUTHOR_NAME="+workspace.AuthorName, "GIT_AUTHOR_EMAIL="+workspace.AuthorEmail,
		"GIT_COMMITTER_NAME="+workspace.AuthorName, "GIT_COMMITTER_EMAIL="+workspace.AuthorEmail)
	if _, err := gitwork.Run(ctx, dir, env, "rev-parse", "--is-inside-work-tree"); err != nil {
		return "", "not a git work tree: no audit commit", nil
	}
	var spec []string
	for _, p := range paths {
		lit := ":(literal)" + p
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
			// An ignored pool makes the audit commit a no-op (worc
			// configuration.md § paths).
			if _, err := gitwork.Run(ctx, dir, env, "check-ignore", "-q", "--", p); err == nil {
				continue
			}
			if _, err := gitwork.Run(ctx, dir, env, "add", "--", lit); err != nil {
				return "", "", err
			}
			spec = append(spec, lit)
			continue
		}
		// Gone from the disk: its removal is committed when HEAD has it.
		if _, err := gitwork.Run(ctx, dir, env, "rm", "--cached", "--quiet", "--ignore-unmatch", "--", lit); err != nil {
			return "", "", err
		}
		if out, err := gitwork.Run(ctx, dir, env, "ls-tree", "--name-only", "HEAD", "--", p); err == nil && len(out) > 0 {
			spec = append(spec, lit)
		}
	}
	if len(spec) == 0 {
		return "", "the task's files are ignored by git: no audit commit", nil
	}
	// With paths, commit takes only them (--only): whatever else the
	// operator staged stays staged and out of this commit.
	if _, err := gitwork.Run(ctx, dir, env, append([]string{"commit", "--no-verify", "--quiet", "-m", message, "--"}, spec...)...); err != nil {
		return "", "", err
	}
	out, err := gitwork.Run(ctx, dir, env, "rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	return string(out[:len(out)-1]), "", nil
}
