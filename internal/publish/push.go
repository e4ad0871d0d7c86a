package publish

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
)

// TokenEnv is the environment variable that carries Spec.Token to the
// credential helper. It is set in the environment of the one git child
// that talks to an HTTP(S) remote, and nowhere else.
const TokenEnv = "STRATUS_PUBLISH_GIT_TOKEN"

// DefaultTokenUser is the user name sent with a token when Spec.TokenUser
// is empty: GitHub takes any user name with a token and documents this one
// for installation tokens ("x-access-token").
const DefaultTokenUser = "x-access-token"

// SSHCommand is the ssh a push or fetch runs when the operator chose none
// (GIT_SSH_COMMAND, GIT_SSH, core.sshCommand): never prompting, and giving
// up on a server silent for 30 s at connect or for a minute after.
const SSHCommand = "ssh -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"

// tokenHelper answers git's credential "get" with TokenUser and the token
// read from the helper's own environment (TokenEnv); "store" and "erase"
// are ignored, so the token is never handed to another helper to keep.
const tokenHelper = `!f() { test "$1" = get || exit 0; echo "username=$STRATUS_PUBLISH_GIT_USER"; echo "password=$` + TokenEnv + `"; }; f`

// Spec is one push of a task branch.
type Spec struct {
	// Dir is the local repository: a work tree or a git dir (the run's
	// workspace checkout embedded; on AWS, the publisher's checkout of the
	// run's bundles).
	Dir string
	// Remote is a remote's name ("origin") or a URL (https://…, file://…,
	// ssh://…, a path to a repository).
	Remote string
	// Branch is the branch name on the remote, without refs/heads/
	// ("stratus/t1").
	Branch string
	// Head is the commit to push (a SHA or a rev of Dir). Empty: the local
	// branch refs/heads/<Branch> when Dir has one, else HEAD.
	Head string
	// Token, when set, answers the remote's HTTP(S) authentication
	// through a credential helper given only to the git that pushes; it
	// replaces the operator's credential helpers for that git. It is never
	// written to disk, put in argv or in a remote URL, and never appears in
	// an error. Remotes other than http(s) ignore it (ssh and local paths
	// authenticate their own way).
	Token string
	// TokenUser is the user name sent with Token; DefaultTokenUser when
	// empty.
	TokenUser string
	// Own, when set, is the author and committer email of the commits a
	// push may drop from the remote branch: when every commit the remote
	// branch holds beyond the local head is Own's (an earlier run of the
	// task, made by the orchestrator), the branch is replaced, with a lease
	// on the tip that was read, so a commit pushed meanwhile is never lost.
	// Empty: never (a remote branch the head does not contain is
	// RemoteMoved).
	Own string
}

// Pushed is the outcome of a push that left the remote branch at the
// local head.
type Pushed struct {
	Remote string // Spec.Remote, any credentials in a URL replaced by ***
	Branch string // Spec.Branch
	// Commit is the full SHA the remote branch now points at: the local
	// head.
	Commit string
	// Previous is the remote branch's tip before the push: an ancestor of
	// Commit, Commit itself when Already, "" when the push created the
	// branch.
	Previous string
	// Already is true when the remote branch already pointed at Commit and
	// nothing was pushed: a resumed or re-delivered publish step.
	Already bool
	// Replaced is true when the push replaced commits of Spec.Own's that
	// Commit does not contain (an earlier run's branch).
	Replaced bool
}

// Kind classifies a failed push, so that the publish step can decide
// between ending the run resumable and ending it failed.
type Kind string

// The kinds of PushError.
const (
	// RemoteMoved: the remote branch holds commits the local branch does
	// not (someone else pushed). Nothing is overwritten; the run's work
	// stays in its branch and the step can be resumed once the branch is
	// reconciled.
	RemoteMoved Kind = "remote_moved"
	// Rejected: the remote refused the update (a pre-receive or update
	// hook declined: a protected branch, a policy).
	Rejected Kind = "rejected"
	// Auth: the remote asked for credentials that were missing or wrong,
	// or refused the ones given (HTTP 401/403, ssh publickey).
	Auth Kind = "auth"
	// NoRemote: no such remote name, no repository at the path or URL.
	NoRemote Kind = "no_remote"
	// Unreachable: the remote's host could not be resolved or reached.
	// Retrying later may succeed.
	Unreachable Kind = "unreachable"
	// Failed: git failed for another reason; Detail has git's words.
	Failed Kind = "failed"
)

// PushError is a push that did not leave the remote branch at the local
// head. Nothing local is changed by a failed push.
type PushError struct {
	Kind   Kind
	Remote string // Spec.Remote, any credentials in a URL replaced by ***
	Branch string
	// Local is the full SHA of the commit the push was for.
	Local string
	// RemoteCommit is the remote branch's tip when it is known (always for
	// RemoteMoved), "" otherwise.
	RemoteCommit string
	// Detail is what git or the remote said (the remote's message lines
	// for Rejected), the token and URL credentials redacted.
	Detail string
	// Fetch: the failure was of the fetch before the push (Fetch), not of
	// the push.
	Fetch bool
}

func (e *PushError) Error() string {
	var b strings.Builder
	if e.Fetch {
		fmt.Fprintf(&b, "fetch of branch %s from remote %s", e.Branch, e.Remote)
	} else {
		fmt.Fprintf(&b, "push of %s to branch %s of remote %s", short(e.Local), e.Branch, e.Remote)
	}
	switch e.Kind {
	case RemoteMoved:
		fmt.Fprintf(&b, " refused: the remote branch is at %s, which the local branch (at %s) does not contain: someone else pushed to it", e.RemoteCommit, e.Local)
	case Rejected:
		b.WriteString(" rejected by the remote")
	case Auth:
		b.WriteString(" failed: the remote refused the credentials")
	case NoRemote:
		b.WriteString(" failed: no such remote or repository")
	case Unreachable:
		b.WriteString(" failed: the remote cannot be reached")
	default:
		b.WriteString(" failed")
	}
	if e.Detail != "" {
		b.WriteString(" (" + e.Detail + ")")
	}
	b.WriteString("; " + e.Hint())
	return b.String()
}

// Hint says what to do about the error, in one sentence.
func (e *PushError) Hint() string {
	switch e.Kind {
	case RemoteMoved:
		return fmt.Sprintf("nothing was overwritten and the run's work stays in its local branch: fetch %s, reconcile it with the local branch (or push the run under another branch name), then resume the publish step", e.Branch)
	case Rejected:
		return "the remote's policy refused the branch (a protected branch or a hook): push under a branch name the remote accepts, or change its rules, then resume the publish step"
	case Auth:
		return "give a token with write access to the repository (GITHUB_TOKEN, GH_TOKEN or `gh auth token`) or configure git's credential helper for the remote, then resume the publish step"
	case NoRemote:
		return "check the remote's name or URL (git remote -v) and that the repository exists, then resume the publish step"
	case Unreachable:
		return "check the network and the remote's host name, then resume the publish step"
	default:
		return "read git's message above, fix the cause, then resume the publish step"
	}
}

// KindOf is the Kind of a *PushError in err's chain, or "" when there is
// none.
func KindOf(err error) Kind {
	var pe *PushError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return ""
}

// Push makes the remote branch Spec.Branch point at the local head, once,
// never by force (worc configuration.md § `git`: the orchestrator never
// force-pushes; docs/architecture.md § Publishing):
//
//   - the remote branch already at the local head: nothing is pushed,
//     Pushed.Already;
//   - no remote branch, or one the local head contains: a fast-forward
//     push;
//   - a remote branch holding commits the local head does not contain
//     (it moved): nothing is pushed, a *PushError of Kind RemoteMoved
//     naming both commits. A push the remote refuses as not a fast-forward
//     (it moved between the look and the push) is the same error.
//
// Errors: EINVALID naming the field of a Spec without a Dir, Remote or
// valid Branch, a Remote starting with "-", or a Token holding a newline;
// ENOTFOUND when Head (or the default) names no commit of Dir; a
// *PushError (KindOf) for everything the remote answers; ctx's error when
// it ends first. Nothing local is changed either way, except the
// remote-tracking ref git updates for a named remote.
func Push(ctx context.Context, s Spec) (Pushed, error) {
	if err := s.check(ctx); err != nil {
		return Pushed{}, err
	}
	local, err := s.head(ctx)
	if err != nil {
		return Pushed{}, err
	}
	env, err := s.env(ctx)
	if err != nil {
		return Pushed{}, err
	}
	out := Pushed{Remote: redactURL(s.Remote), Branch: s.Branch, Commit: local}
	ref := "refs/heads/" + s.Branch
	remote, err := s.remoteTip(ctx, env, ref)
	if err != nil {
		return Pushed{}, s.classify(err, local)
	}
	if remote == local {
		out.Already, out.Previous = true, remote
		return out, nil
	}
	args := []string{"push", "--quiet", "--no-verify"}
	if remote != "" {
		contained, err := s.contains(ctx, local, remote)
		if err != nil {
			return Pushed{}, err
		}
		if !contained {
			if !s.ownBeyond(ctx, local, remote) {
				return Pushed{}, &PushError{Kind: RemoteMoved, Remote: out.Remote, Branch: s.Branch, Local: local, RemoteCommit: remote}
			}
			args = append(args, "--force-with-lease="+ref+":"+remote)
			out.Replaced = true
		}
	}
	out.Previous = remote
	if _, err := gitwork.Run(ctx, s.Dir, env, append(args, "--", s.Remote, local+":"+ref)...); err != nil {
		pe := s.classify(err, local)
		if KindOf(pe) == RemoteMoved {
			// Moved between the look and the push: name where it is now.
			if tip, terr := s.remoteTip(ctx, env, ref); terr == nil && tip != "" {
				if tip == local {
					out.Already, out.Previous = true, tip
					return out, nil
				}
				pe.(*PushError).RemoteCommit = tip
			}
		}
		return Pushed{}, pe
	}
	return out, nil
}

// Fetch fetches refs (refspecs such as "refs/heads/main:refs/x/main", or
// commit ids) from s.Remote into s.Dir, with the same credentials and
// failure kinds as Push (*PushError with Fetch set; Branch names s.Branch).
// A ref the remote does not have is not an error when optional: git's
// "couldn't find remote ref" answer returns (false, nil).
func Fetch(ctx context.Context, s Spec, optional bool, refs ...string) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	env, err := s.env(ctx)
	if err != nil {
		return false, err
	}
	args := append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", s.Remote}, refs...)
	if _, err := gitwork.Run(ctx, s.Dir, env, args...); err != nil {
		var re *gitwork.RunError
		if optional && errors.As(err, &re) && strings.Contains(re.Stderr, "couldn't find remote ref") {
			return false, nil
		}
		pe := s.classify(err, "")
		if e, ok := pe.(*PushError); ok {
			e.Fetch = true
		}
		return false, pe
	}
	return true, nil
}

// check validates s.
func (s *Spec) check(ctx context.Context) error {
	switch {
	case s.Dir == "":
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "no local repository given; give the run's workspace checkout")
	case s.Remote == "":
		return stratus.FieldErrorf(stratus.EINVALID, "remote", "no remote given; give a remote's name (such as \"origin\") or a repository URL")
	case strings.HasPrefix(s.Remote, "-") || strings.ContainsAny(s.Remote, "\n\x00"):
		return stratus.FieldErrorf(stratus.EINVALID, "remote", "%q is not a remote name or URL (such as \"origin\" or \"https://github.com/o/r.git\")", redactURL(s.Remote))
	case strings.ContainsAny(s.Token, "\n\r\x00"):
		return stratus.FieldErrorf(stratus.EINVALID, "token", "the token holds a line break or NUL; give the token alone, on one line")
	case strings.ContainsAny(s.TokenUser, "\n\r\x00"):
		return stratus.FieldErrorf(stratus.EINVALID, "token_user", "%q holds a line break or NUL; give a user name on one line (default %q)", s.TokenUser, DefaultTokenUser)
	}
	if s.Branch == "" || strings.HasPrefix(s.Branch, "-") || strings.HasPrefix(s.Branch, "refs/") {
		return stratus.FieldErrorf(stratus.EINVALID, "branch", "%q is not a branch name (such as \"stratus/t1\", without refs/heads/)", s.Branch)
	}
	if _, err := gitwork.Run(ctx, s.Dir, nil, "check-ref-format", "refs/heads/"+s.Branch); err != nil {
		var re *gitwork.RunError
		if errors.As(err, &re) && exitCode(re) > 0 {
			return stratus.FieldErrorf(stratus.EINVALID, "branch", "%q is not a valid branch name (such as \"stratus/t1\")", s.Branch)
		}
		return err
	}
	return nil
}

// head resolves the commit to push.
func (s *Spec) head(ctx context.Context) (string, error) {
	rev, field := s.Head, "head"
	if rev == "" {
		rev, field = "HEAD", "dir"
		if _, err := gitwork.Run(ctx, s.Dir, nil, "show-ref", "--verify", "--quiet", "refs/heads/"+s.Branch); err == nil {
			rev = "refs/heads/" + s.Branch
		}
	}
	out, err := gitwork.Run(ctx, s.Dir, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, field, "%s names no commit of the repository at %s", rev, s.Dir)
	}
	return strings.TrimSpace(string(out)), nil
}

// env is the environment of every git that talks to the remote: the fixed
// configuration, no prompt (a missing credential fails rather than
// waits), and, for an http(s) remote with a token, the token helper and
// the token itself, in this child's environment only.
func (s *Spec) env(ctx context.Context) ([]string, error) {
	config := gitwork.FixedConfig()
	// A remote that stops answering fails the step instead of holding it:
	// an HTTP transfer slower than 1 byte/s for 2 minutes is aborted, and
	// ssh (unless the operator chose their own) gives up on a server
	// silent for 30 s at connect or a minute after.
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "GIT_HTTP_LOW_SPEED_LIMIT=1", "GIT_HTTP_LOW_SPEED_TIME=120"}
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		if out, err := gitwork.Run(ctx, s.Dir, nil, "config", "--get", "core.sshCommand"); err != nil || strings.TrimSpace(string(out)) == "" {
			env = append(env, "GIT_SSH_COMMAND="+SSHCommand)
		}
	}
	if s.Token != "" {
		out, err := gitwork.Run(ctx, s.Dir, nil, "ls-remote", "--get-url", "--", s.Remote)
		if err != nil {
			return nil, err
		}
		if u := strings.TrimSpace(string(out)); strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
			user := s.TokenUser
			if user == "" {
				user = DefaultTokenUser
			}
			config = append(config, [2]string{"credential.helper", ""}, [2]string{"credential.helper", tokenHelper})
			env = append(env, "STRATUS_PUBLISH_GIT_USER="+user, TokenEnv+"="+s.Token)
		}
	}
	return append(gitwork.ConfigEnv(config...), env...), nil
}

// remoteTip is the SHA the remote's ref points at, "" when it has none.
func (s *Spec) remoteTip(ctx context.Context, env []string, ref string) (string, error) {
	out, err := gitwork.Run(ctx, s.Dir, env, "ls-remote", "--refs", "--", s.Remote, ref)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if sha, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return sha, nil
		}
	}
	return "", nil
}

// ownBeyond reports whether every commit of remote that local does not
// hold is authored and committed by s.Own (false when s.Own is empty or
// remote's commits are not in Dir).
func (s *Spec) ownBeyond(ctx context.Context, local, remote string) bool {
	return s.Own != "" && onlyBy(ctx, s.Dir, s.Own, remote, local)
}

// onlyBy reports whether every commit of dir reachable from tip and not
// from base is authored and committed by email (true for none; false when
// tip is not in dir).
func onlyBy(ctx context.Context, dir, email, tip, base string) bool {
	if _, err := gitwork.Run(ctx, dir, nil, "cat-file", "-e", tip+"^{commit}"); err != nil {
		return false
	}
	out, err := gitwork.Run(ctx, dir, nil, "log", "--format=%ae %ce", tip, "^"+base, "--")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && l != email+" "+email {
			return false
		}
	}
	return true
}

// contains reports whether local's history holds remote. A remote commit
// Dir has not got cannot be in local's history.
func (s *Spec) contains(ctx context.Context, local, remote string) (bool, error) {
	if _, err := gitwork.Run(ctx, s.Dir, nil, "cat-file", "-e", remote+"^{commit}"); err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		return false, nil
	}
	_, err := gitwork.Run(ctx, s.Dir, nil, "merge-base", "--is-ancestor", remote, local)
	var re *gitwork.RunError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &re) && exitCode(re) == 1 && ctx.Err() == nil:
		return false, nil
	default:
		return false, err
	}
}

// pushPatterns are the patterns of git's (and curl's, and ssh's) messages,
// by kind, checked in this order; compiled on the first failed push, not at
// every start of the binary (README.md § Performance).
var pushPatterns = sync.OnceValue(func() []pushPattern {
	return []pushPattern{
		{RemoteMoved, regexp.MustCompile(`\[rejected\].*\((fetch first|non-fast-forward)\)`)},
		{Rejected, regexp.MustCompile(`\[remote rejected\]|pre-receive hook declined|hook declined|protected branch`)},
		{Auth, regexp.MustCompile(`(?i)authentication failed|could not read (username|password)|terminal prompts disabled|returned error: 40[13]|permission denied \(publickey|invalid username or password|access denied`)},
		{NoRemote, regexp.MustCompile(`(?i)does not appear to be a git repository|repository '[^']*' not found|repository not found|returned error: 404|no such remote|not a git repository`)},
		{Unreachable, regexp.MustCompile(`(?i)could not resolve host|failed to connect|connection refused|connection timed out|network is unreachable|no route to host|could not resolve hostname|operation timed out|unable to access`)},
	}
})

// pushPattern is one kind of git's refusal and the messages that say it.
type pushPattern struct {
	kind Kind
	re   *regexp.Regexp
}

// classify turns a failed git talking to the remote into a *PushError;
// ctx's end and a missing git stay what they are.
func (s *Spec) classify(err error, local string) error {
	var re *gitwork.RunError
	if !errors.As(err, &re) || errors.Is(err, exec.ErrNotFound) {
		return err
	}
	kind := Failed
	for _, p := range pushPatterns() {
		if p.re.MatchString(re.Stderr) {
			kind = p.kind
			break
		}
	}
	return &PushError{Kind: kind, Remote: redactURL(s.Remote), Branch: s.Branch, Local: local, Detail: s.detail(kind, re.Stderr)}
}

// detail is the part of git's stderr a reader needs: for a rejection the
// remote's own lines and the refusal's reason, otherwise the error lines,
// never git's hints; credentials redacted.
func (s *Spec) detail(kind Kind, stderr string) string {
	var keep []string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "hint:") || strings.HasPrefix(line, "To "):
			continue
		case strings.HasPrefix(line, "remote:"):
			if l := strings.TrimSpace(strings.TrimPrefix(line, "remote:")); l != "" {
				keep = append(keep, "remote: "+l)
			}
		case strings.HasPrefix(line, "!"):
			if i := strings.LastIndex(line, "("); i >= 0 {
				keep = append(keep, strings.TrimSuffix(line[i+1:], ")"))
			}
		case kind == Rejected && strings.HasPrefix(line, "error: failed to push"):
			continue
		default:
			keep = append(keep, line)
		}
	}
	d := redactURL(strings.Join(keep, "; "))
	if s.Token != "" {
		d = strings.ReplaceAll(d, s.Token, "***")
	}
	return d
}

// userinfoRe matches the credentials of a URL ("https://user:pw@host").
var userinfoRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`://[^/@\s']+@`) })

// redactURL replaces the user information of every URL in s with ***.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil && u.Host != "" {
		u.User = url.User("***")
		return u.String()
	}
	return userinfoRe().ReplaceAllString(s, "://***@")
}

// exitCode is the exit status of a git that ran and failed, or -1.
func exitCode(re *gitwork.RunError) int {
	var ee *exec.ExitError
	if errors.As(re.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// short is a SHA's first 12 characters.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
