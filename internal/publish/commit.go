package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
)

// Identity is the author and committer of the orchestrator's commit.
type Identity struct {
	Name  string // "Stratus"
	Email string // "stratus@stratus.invalid"
}

// Commit makes the orchestrator's own commit of what the run left
// uncommitted in the checkout at dir (worc configuration.md § `git`: the
// successful publishing path makes the orchestrator-owned commit): every
// change of the work tree — `git add --all`, so .gitignore and
// .git/info/exclude hold — as one commit on top of HEAD (the checked-out
// branch moves; a detached HEAD moves alone), with msg and who as author
// and committer, dated now. Neither the operator's git identity nor their
// hooks or signing take part. A repository without a commit gets a root
// commit.
//
// It returns the commit's full SHA; when nothing changed, HEAD's, and no
// commit is made (never an empty commit).
//
// Errors: EINVALID naming the field for an empty msg, or an identity
// without a name or an email or with a line break or <>; EINVALID when
// dir is in no git work tree; EUNPROCESSABLE when nothing changed and the
// repository has no commit yet; git's error otherwise.
func Commit(ctx context.Context, dir, msg string, who Identity) (string, error) {
	switch {
	case strings.TrimSpace(msg) == "":
		return "", stratus.FieldErrorf(stratus.EINVALID, "message", "the commit message is empty; give one (worc's default: \"chore(orchestrator): audit trail for {task_id}\")")
	case strings.TrimSpace(who.Name) == "" || strings.ContainsAny(who.Name, "<>\n\r\x00"):
		return "", stratus.FieldErrorf(stratus.EINVALID, "author.name", "%q is not an author name (one line, no < or >, such as \"Stratus\")", who.Name)
	case strings.TrimSpace(who.Email) == "" || strings.ContainsAny(who.Email, "<>\n\r\x00"):
		return "", stratus.FieldErrorf(stratus.EINVALID, "author.email", "%q is not an author email (one line, no < or >, such as \"stratus@stratus.invalid\")", who.Email)
	}
	tree, err := gitwork.Open(ctx, dir)
	if err != nil {
		if errors.Is(err, gitwork.ErrNotTree) {
			return "", stratus.FieldErrorf(stratus.EINVALID, "dir", "%s; publish commits in the run's git checkout", err)
		}
		return "", err
	}
	env := gitwork.ConfigEnv(gitwork.FixedConfig()...)
	head, err := tree.Head(ctx)
	if err != nil && !errors.Is(err, gitwork.ErrNotTree) {
		return "", err
	}
	if _, err := gitwork.Run(ctx, tree.Root, env, "add", "--all", "--", ":/"); err != nil {
		return "", err
	}
	// Exit 1: the index differs from HEAD (or there is no HEAD and the
	// index is not empty).
	args := []string{"diff", "--cached", "--quiet"}
	if head == "" {
		args = []string{"ls-files", "--cached", "--error-unmatch", "--", ":/"}
	}
	_, err = gitwork.Run(ctx, tree.Root, env, args...)
	var re *gitwork.RunError
	switch {
	case head != "" && err == nil:
		return head, nil
	case head == "" && err != nil && errors.As(err, &re) && exitCode(re) == 1:
		return "", stratus.FieldErrorf(stratus.EUNPROCESSABLE, "dir", "the repository at %s has no commit and nothing to commit", tree.Root)
	case !(errors.As(err, &re) && exitCode(re) == 1) && (head != "" || err != nil):
		return "", err
	}
	t := time.Now()
	date := fmt.Sprintf("%d %s", t.Unix(), t.Format("-0700"))
	env = append(env,
		"GIT_AUTHOR_NAME="+who.Name, "GIT_AUTHOR_EMAIL="+who.Email, "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME="+who.Name, "GIT_COMMITTER_EMAIL="+who.Email, "GIT_COMMITTER_DATE="+date)
	if _, err := gitwork.Run(ctx, tree.Root, env, "commit", "--quiet", "--no-verify", "--cleanup=verbatim", "-m", msg); err != nil {
		return "", err
	}
	out, err := gitwork.Run(ctx, tree.Root, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
