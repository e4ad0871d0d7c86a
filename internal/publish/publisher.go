package publish

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/publish/github"
	"github.com/stratusflow/stratus/internal/workspace"
)

// GitTokenEnv is the variable the publisher reads the git host's token
// from first: on AWS the publisher task definition's secret (template.yaml
// GitTokenSecretArn), never set for another worker.
const GitTokenEnv = launch.GitTokenEnv

// TokenVariables are the variables Token reads: no engine inherits them
// from its runner (contract.LaunchSpec.Unset).
var TokenVariables = []string{GitTokenEnv, "GITHUB_TOKEN", "GH_TOKEN"}

// Token is the git host's token of the publisher's environment: GitTokenEnv,
// else GITHUB_TOKEN, else GH_TOKEN (the GitHub CLI's variables), else what
// `gh auth token` prints when the GitHub CLI is installed and logged in;
// "" when there is none (a push then uses git's own credential helpers,
// and no pull request can be opened). getenv is os.Getenv in the runner.
func Token(ctx context.Context, getenv func(string) string) string {
	for _, k := range TokenVariables {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	gh, err := exec.LookPath("gh")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gh, "auth", "token").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Options shape Publish.
type Options struct {
	// Token is the git host's token (Token): it authenticates the fetches
	// and the push of an HTTP(S) remote and the pull-request calls.
	Token string
}

// remoteName is the remote's name in the publisher's own repository when
// the operator's is not a plain name.
var remoteNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })

// Publish does a publish node's work in dir, a new directory of the
// runner's own (docs/architecture.md § Publishing; worc configuration.md §
// `git`):
//
//  1. it fetches spec.BaseBranch and, when the run started on a commit,
//     that commit (spec.Origin) from the remote, and the task branch when
//     an earlier publish pushed it;
//  2. it rebuilds the run's commits on Origin from bundles (local paths:
//     the base bundle, then each step's, in order) as workspace.Pull does
//     for `stratus pull`: the same inputs give the same commits;
//  3. it adds the audit commit (the run's summary at spec.AuditPath) — on
//     top of the remote branch when everything the remote holds beyond
//     the rebuilt commits is Stratus's own (an earlier publish of this
//     run), and not at all when the summary there is already the same;
//  4. it pushes the branch (Push: never forced, exactly once; a remote
//     branch holding commits of someone else's is RemoteMoved);
//  5. for spec.PullRequest on GitHub it opens or updates the branch's one
//     pull request (github.Host.Ensure: never a second), and with
//     spec.AutoMerge merges it, or arms the host's auto-merge. A merge the
//     host refuses is not an error: PublishResult.MergeBlocked says why and
//     the pull request stays open.
//
// Errors: *PushError for a fetch or push the remote refused (KindOf: the
// run stays resumable); *github.Error for the host's refusals; EINVALID or
// EUNPROCESSABLE from workspace.Pull; ENOTFOUND when the remote has not
// the commit the run started on. Each names the remote, the branch and
// what to do, and none carries the token.
func Publish(ctx context.Context, dir string, bundles []string, spec nodeexec.PublishSpec, o Options) (nodeexec.PublishResult, error) {
	res := nodeexec.PublishResult{Remote: spec.Remote, URL: spec.URL, Branch: spec.Branch}
	name := spec.Remote
	if !remoteNameRe().MatchString(name) {
		name = "publish"
	}
	if spec.URL == "" {
		return res, stratus.FieldErrorf(stratus.EINVALID, "url", "remote %q has no URL; give the remote's URL (git remote get-url %s)", spec.Remote, spec.Remote)
	}
	if spec.Branch == spec.BaseBranch || !gitwork.ValidBranchName(spec.Branch) {
		return res, stratus.FieldErrorf(stratus.EINVALID, "branch", "%q is not a task branch to push: it must be a valid branch name other than the base %q its pull request goes into", spec.Branch, spec.BaseBranch)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	env := gitwork.ConfigEnv(gitwork.FixedConfig()...)
	if _, err := gitwork.Run(ctx, dir, env, "init", "--quiet"); err != nil {
		return res, err
	}
	if _, err := gitwork.Run(ctx, dir, env, "remote", "add", "--", name, spec.URL); err != nil {
		return res, err
	}
	ps := Spec{Dir: dir, Remote: name, Branch: spec.Branch, Token: o.Token}
	if spec.BaseBranch != "" {
		if _, err := Fetch(ctx, ps, true, "+refs/heads/"+spec.BaseBranch+":refs/stratus-publish/base"); err != nil {
			return res, err
		}
	}
	if spec.Origin != "" && !hasCommit(ctx, dir, spec.Origin) {
		// Not on the base branch: a commit of another branch, fetched by id
		// (GitHub serves any reachable commit).
		if ok, _ := Fetch(ctx, ps, true, spec.Origin); !ok || !hasCommit(ctx, dir, spec.Origin) {
			return res, stratus.FieldErrorf(stratus.ENOTFOUND, "origin",
				"the run started on commit %s, which remote %s (%s) does not have, so branch %s cannot be built on it there; push that commit to %s (git push %s HEAD:%s, or the branch holding it), then resume the publish step",
				spec.Origin, spec.Remote, spec.URL, spec.Branch, spec.Remote, spec.Remote, cmp.Or(spec.BaseBranch, "main"))
		}
	}
	remoteTip := ""
	if ok, err := Fetch(ctx, ps, true, "+refs/heads/"+spec.Branch+":refs/stratus-publish/branch"); err != nil {
		return res, err
	} else if ok {
		remoteTip = revParse(ctx, dir, "refs/stratus-publish/branch")
	}
	tip, _, err := workspace.Pull(ctx, dir, workspace.Base{Commit: spec.BaseCommit, Origin: spec.Origin, Prefix: spec.Prefix},
		bundles, spec.Head, "stratus-publish/code", spec.Exclude)
	if err != nil {
		return res, fmt.Errorf("rebuild branch %s from the run's commits: %w", spec.Branch, err)
	}
	head := tip
	auditBranch, auditTip := "", ""
	if spec.AuditPath != "" {
		parent, ptip := tip, remoteTip
		if spec.AuditSibling {
			auditBranch = spec.Branch + "-audit"
			ptip = ""
			if ok, err := Fetch(ctx, Spec{Dir: dir, Remote: name, Branch: auditBranch, Token: o.Token}, true,
				"+refs/heads/"+auditBranch+":refs/stratus-publish/audit"); err != nil {
				return res, err
			} else if ok {
				ptip = revParse(ctx, dir, "refs/stratus-publish/audit")
			}
		}
		if ptip != "" && ptip != tip && ownOnTop(ctx, dir, tip, ptip) {
			parent = ptip // an earlier publish's audit commit: build on it
		}
		if auditTip, err = auditCommit(ctx, dir, parent, spec); err != nil {
			return res, err
		}
		res.Audit = auditTip
		if !spec.AuditSibling {
			head = auditTip
		}
	}
	// An earlier run of the task left the branch: its commits, all the
	// orchestrator's, are replaced; anyone else's never are.
	pushed, err := Push(ctx, Spec{Dir: dir, Remote: name, Branch: spec.Branch, Head: head, Token: o.Token, Own: workspace.AuthorEmail})
	if err != nil {
		return res, err
	}
	res.Head, res.Already = pushed.Commit, pushed.Already
	if auditBranch != "" {
		if _, err := Push(ctx, Spec{Dir: dir, Remote: name, Branch: auditBranch, Head: auditTip, Token: o.Token, Own: workspace.AuthorEmail}); err != nil {
			return res, err
		}
		res.AuditBranch = auditBranch
	}
	if !spec.PullRequest {
		res.Note = spec.NoPullRequest
		return res, nil
	}
	if spec.API == "" {
		res.Note = cmp.Or(spec.NoPullRequest, fmt.Sprintf("remote %s (%s) is not a GitHub repository: branch %s was pushed and no pull request was opened", spec.Remote, spec.URL, spec.Branch))
		return res, nil
	}
	host, err := newHost(spec, o.Token)
	if err != nil {
		return res, err
	}
	pr, outcome, err := host.Ensure(ctx, github.EnsureRequest{Base: spec.BaseBranch, Head: spec.Branch, Title: spec.Title, Body: spec.Body, HeadSHA: res.Head})
	if err != nil {
		return res, err
	}
	res.PR = &nodeexec.PublishedPR{Number: pr.Number, URL: pr.URL, State: prState(pr), Outcome: string(outcome), MergeSHA: pr.MergeCommitSHA}
	if !spec.AutoMerge || outcome == github.AlreadyMerged || pr.Merged {
		return res, nil
	}
	strategy, err := github.ParseStrategy(cmp.Or(spec.Strategy, string(github.StrategySquash)))
	if err != nil {
		return res, stratus.FieldErrorf(stratus.EINVALID, "strategy", "%v", err)
	}
	if spec.WaitForChecks {
		if err := host.EnableAutoMerge(ctx, pr.Number, strategy); err != nil {
			res.MergeBlocked = err.Error()
			return res, nil
		}
		res.PR.AutoMerge = string(strategy)
		if got, err := host.GetPR(ctx, pr.Number); err == nil && got.Merged {
			res.PR.State, res.PR.MergeSHA = "merged", got.MergeCommitSHA
		}
		return res, nil
	}
	m, err := host.Merge(ctx, pr.Number, strategy, res.Head)
	if err != nil {
		// Whatever stops the merge — a protected branch, a conflict, a
		// token that may not merge — the pull request stays open for a
		// person (worc: a blocked merge is manual_action_required).
		res.MergeBlocked = err.Error()
		return res, nil
	}
	res.PR.State, res.PR.MergeSHA = "merged", m.SHA
	return res, nil
}

// newHost is the GitHub client of spec.
func newHost(spec nodeexec.PublishSpec, token string) (github.Host, error) {
	owner, repo, ok := strings.Cut(spec.Repository, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "repository", "%q is not a GitHub repository name; want owner/name", spec.Repository)
	}
	if token == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "token",
			"no token to open the pull request of branch %s on %s with: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login` (on AWS: the stack's GitTokenSecretArn), then resume the publish step", spec.Branch, spec.Repository)
	}
	return github.New(spec.API, token, owner, repo, github.Options{})
}

// prState is a PR's state as a Publication says it.
func prState(pr *github.PR) string {
	if pr.Merged {
		return "merged"
	}
	return pr.State
}

// auditCommit is the audit commit on parent: spec.AuditBody at
// spec.AuditPath, by the orchestrator (workspace.AuthorName), dated now;
// parent itself when that file already holds AuditBody there.
func auditCommit(ctx context.Context, dir, parent string, spec nodeexec.PublishSpec) (string, error) {
	p := filepath.ToSlash(filepath.Clean(spec.AuditPath))
	if !filepath.IsLocal(p) || strings.HasPrefix(p, ".git/") || p == ".git" {
		return "", stratus.FieldErrorf(stratus.EINVALID, "audit_path", "%q is not a path inside the repository", spec.AuditPath)
	}
	idx := filepath.Join(dir, ".git", "stratus-audit-index")
	defer os.Remove(idx)
	env := append(gitwork.ConfigEnv(gitwork.FixedConfig()...), "GIT_INDEX_FILE="+idx)
	if _, err := gitwork.Run(ctx, dir, env, "read-tree", parent); err != nil {
		return "", err
	}
	blob, err := gitIn(ctx, dir, env, spec.AuditBody, "hash-object", "-w", "--stdin")
	if err != nil {
		return "", err
	}
	if _, err := gitwork.Run(ctx, dir, env, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+p); err != nil {
		return "", err
	}
	tree, err := gitwork.Run(ctx, dir, env, "write-tree")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(tree)) == revParse(ctx, dir, parent+"^{tree}") {
		return parent, nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cenv := append(env, "GIT_AUTHOR_NAME="+workspace.AuthorName, "GIT_AUTHOR_EMAIL="+workspace.AuthorEmail, "GIT_AUTHOR_DATE="+now,
		"GIT_COMMITTER_NAME="+workspace.AuthorName, "GIT_COMMITTER_EMAIL="+workspace.AuthorEmail, "GIT_COMMITTER_DATE="+now)
	msg := cmp.Or(strings.TrimSpace(spec.AuditMessage), "chore(orchestrator): audit trail") + "\n"
	return gitIn(ctx, dir, cenv, msg, "commit-tree", strings.TrimSpace(string(tree)), "-p", parent)
}

// ownOnTop reports whether remote holds tip and every commit after it is
// the orchestrator's (an earlier publish's audit commits).
func ownOnTop(ctx context.Context, dir, tip, remote string) bool {
	if _, err := gitwork.Run(ctx, dir, nil, "merge-base", "--is-ancestor", tip, remote); err != nil {
		return false
	}
	return onlyBy(ctx, dir, workspace.AuthorEmail, remote, tip)
}

func hasCommit(ctx context.Context, dir, sha string) bool {
	_, err := gitwork.Run(ctx, dir, nil, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

func revParse(ctx context.Context, dir, rev string) string {
	out, err := gitwork.Run(ctx, dir, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// gitIn runs git with stdin and returns its trimmed stdout.
func gitIn(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	out, err := gitwork.RunInput(ctx, dir, env, []byte(stdin), args...)
	return strings.TrimSpace(string(out)), err
}

// RemoteOf is the remote name of the git repository holding dir, its URL
// with any user:password left out and a relative local path made
// absolute; nil when dir is in no repository or it has no such remote
// (docs/architecture.md § Publishing: recorded when a run starts, where the
// publish step pushes).
func RemoteOf(ctx context.Context, dir, name string) *stratus.GitRemote {
	r, _ := ReadRemote(ctx, dir, name)
	return r
}

// ReadRemote is RemoteOf, and whether the remote's URL held a password,
// which the GitRemote leaves out: Stratus never stores it, so a push
// authenticates with the token or git's credential helper instead.
func ReadRemote(ctx context.Context, dir, name string) (*stratus.GitRemote, bool) {
	if name == "" || strings.HasPrefix(name, "-") {
		return nil, false
	}
	out, err := gitwork.Run(ctx, dir, nil, "remote", "get-url", "--", name)
	if err != nil {
		return nil, false
	}
	u := strings.TrimSpace(string(out))
	if u == "" {
		return nil, false
	}
	creds := false
	switch {
	case strings.Contains(u, "://"):
		if p, err := url.Parse(u); err == nil && p.User != nil {
			_, creds = p.User.Password()
			p.User = nil
			u = p.String()
		}
	case !strings.Contains(u, ":") || filepath.IsAbs(u):
		// A local path: relative to the repository's top level.
		if !filepath.IsAbs(u) {
			top, err := gitwork.Run(ctx, dir, nil, "rev-parse", "--show-toplevel")
			if err != nil {
				return nil, false
			}
			u = filepath.Join(strings.TrimSpace(string(top)), u)
		}
	}
	return &stratus.GitRemote{Name: name, URL: u}, creds
}
