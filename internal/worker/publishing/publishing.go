package publishing

import (
	"context"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/publish/github"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// The task's publish values (worc task front matter `publish`).
const (
	TaskCommit      = "commit"       // the orchestrator's commit only: nothing pushed
	TaskPush        = "push"         // the branch is pushed, no pull request
	TaskPullRequest = "pull_request" // the branch is pushed and a pull request opened (the default)
)

// MaxBodyBytes bounds a pull request's body: GitHub refuses one over 65,536
// characters; the summary is cut, at a line, well under it.
const MaxBodyBytes = 60_000

// Plan says whether the publish node of run pushes: true when the node's
// policy (else the flow's publishing) is pull_request or
// documentation_pull_request, the task's publish is not commit, the run's
// repository travels (a workspace) and the operator's repository had the
// configured remote at the start. Otherwise note says, in one sentence
// naming the branch and what to do, why nothing is pushed ("" when the
// node's policy publishes nothing to git).
func Plan(run stratus.Run, env *core.RunEnv, node *flow.Node) (push bool, note string) {
	if env == nil || env.Flow == nil || report.PullRequestPolicy(env.Flow, node) == "" {
		return false, ""
	}
	branch := Branch(run, env)
	switch {
	case taskPublish(env) == TaskCommit:
		return false, fmt.Sprintf("not pushed: the task's publish is commit; the run's commits come back as branch %s (stratus pull %s)", branch, run.ID)
	case run.Workspace == nil:
		return false, "not pushed: the run edited the work dir in place (workspace: workdir), so there is no branch to push; commit and push the work dir yourself"
	case run.Workspace.Remote == nil:
		return false, fmt.Sprintf("not pushed: the repository had no remote %q when the run started (git.remote); the run's commits come back as branch %s (stratus pull %s): push it yourself, or add the remote and run again",
			remoteName(env), branch, run.ID)
	}
	return true, ""
}

// Branch is the task branch: the task's branch_name, else
// "stratus/<task_id>" (the branch `stratus pull` makes).
func Branch(run stratus.Run, env *core.RunEnv) string {
	if env != nil && env.Task != nil {
		if b, ok := env.Task.Front["branch_name"].(string); ok && strings.TrimSpace(b) != "" {
			return strings.TrimSpace(b)
		}
	}
	return "stratus/" + run.TaskID
}

func taskPublish(env *core.RunEnv) string {
	if env.Task != nil {
		if p, ok := env.Task.Front["publish"].(string); ok && p != "" {
			return p
		}
	}
	return TaskPullRequest
}

func remoteName(env *core.RunEnv) string {
	if env.Config != nil {
		return env.Config.Git.RemoteName()
	}
	return config.DefaultGitRemote
}

// Spec is the runner's publish spec for the publish step of run (Plan
// said push): the remote and the workspace recorded at the start, the
// branch, the summary as the audit file and the pull request's body, and
// the merge policy (worc configuration.md § `git`: the task's auto_merge
// wins over git.auto_merge). Errors: the sink's, reading the summary the
// step wrote before it launched the runner.
func Spec(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv) (*nodeexec.PublishSpec, error) {
	ws := run.Workspace
	if ws == nil || ws.Remote == nil {
		return nil, stratus.Errorf(stratus.EUNPROCESSABLE, "run %s has no workspace remote to publish to", run.ID)
	}
	g := env.Config.Git
	branch := Branch(run, env)
	// The task's load and the runner refuse these too; the server checks
	// again what it hands on.
	if branch == g.Base() {
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "branch_name", "%q is git.pr_base, the branch the pull request goes into: publishing would push the run onto it; give the task a branch of its own", branch)
	}
	if !gitwork.ValidBranchName(branch) {
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "branch_name", "%q is not a git branch name; give the task a valid one (such as stratus/%s)", branch, run.TaskID)
	}
	summary, err := s.Files(run).Get(ctx, report.Keys(run.TaskID)[1])
	if err != nil {
		return nil, fmt.Errorf("read the run's summary for the pull request: %w", err)
	}
	sp := &nodeexec.PublishSpec{
		Remote: ws.Remote.Name, URL: ws.Remote.URL, Branch: branch, BaseBranch: g.Base(),
		BaseCommit: ws.Base, Origin: ws.Origin, Prefix: ws.Prefix, Exclude: ws.Exclude, Head: ws.Head,
		AuditPath:    "tasks/done/" + run.TaskID + ".summary.md",
		AuditBody:    string(summary),
		AuditMessage: g.AuditMessage(run.TaskID),
		AuditSibling: g.AuditBranch() == config.AuditOnSiblingBranch,
		PullRequest:  taskPublish(env) == TaskPullRequest && g.PullRequests(),
		Title:        Title(run),
		Body:         Body(run, string(summary)),
		AutoMerge:    g.AutoMerge,
		Strategy:     g.Strategy(),
	}
	if v, ok := env.Task.Front["auto_merge"].(bool); ok {
		sp.AutoMerge = v
	}
	sp.WaitForChecks = g.AutoMergeWaitForChecks
	switch {
	case taskPublish(env) == TaskPush:
		sp.NoPullRequest = fmt.Sprintf("branch %s pushed; the task's publish is push, so no pull request was opened", branch)
	case !g.PullRequests():
		sp.NoPullRequest = fmt.Sprintf("branch %s pushed; git.create_pull_request is false, so no pull request was opened", branch)
	}
	if sp.PullRequest {
		sp.API, sp.Repository = Host(g, ws.Remote.URL)
		if sp.API == "" {
			sp.NoPullRequest = fmt.Sprintf("branch %s pushed to %s (%s), which is not a GitHub repository, so no pull request was opened (for GitHub Enterprise set git.api_url)",
				branch, ws.Remote.Name, ws.Remote.URL)
		}
	}
	return sp, nil
}

// Host is the GitHub API root and repository of a remote: git.api_url and
// git.repository when set, else github.com's for a github.com remote; ""
// for any other host.
func Host(g config.Git, url string) (api, repo string) {
	r, err := github.ParseRemote(url)
	if g.APIURL != "" {
		repo = g.Repository
		if repo == "" && err == nil {
			repo = r.Owner + "/" + r.Repo
		}
		if repo == "" {
			return "", ""
		}
		return g.APIURL, repo
	}
	if err != nil || r.Host != "github.com" {
		return "", ""
	}
	if g.Repository != "" {
		return r.APIBaseURL(), g.Repository
	}
	return r.APIBaseURL(), r.Owner + "/" + r.Repo
}

// Title is a pull request's title: the task's title, else its id.
func Title(run stratus.Run) string {
	if t := strings.TrimSpace(run.TaskTitle); t != "" {
		return t
	}
	return "Task " + run.TaskID
}

// Body is a pull request's body: the run's summary (cut at a line under
// MaxBodyBytes), then a line naming the run.
func Body(run stratus.Run, summary string) string {
	foot := fmt.Sprintf("\n\n---\nOpened by Stratus for run `%s` (task `%s`): `stratus status %s` shows the run, `stratus ui` its steps.\n", run.ID, run.TaskID, run.ID)
	if len(summary)+len(foot) > MaxBodyBytes {
		const note = "\n\n_(summary cut to fit a pull request; the whole one is in the run's summary.md)_"
		cut := summary[:MaxBodyBytes-len(foot)-len(note)]
		if i := strings.LastIndexByte(cut, '\n'); i > 0 {
			cut = cut[:i]
		}
		summary = cut + note
	}
	return strings.TrimRight(summary, "\n") + foot
}

// Record keeps what the runner did on the run (Run.Publication; the store
// replaces an earlier publish's record).
func Record(ctx context.Context, s *core.Service, run stratus.Run, res *nodeexec.PublishResult) error {
	p := stratus.Publication{Remote: res.Remote, URL: res.URL, Branch: res.Branch, Head: res.Head, Note: res.Note}
	if res.PR != nil {
		p.PullRequest = &stratus.PullRequest{Number: res.PR.Number, URL: res.PR.URL, State: res.PR.State, AutoMerge: res.PR.AutoMerge, MergeSHA: res.PR.MergeSHA}
	}
	if res.MergeBlocked != "" {
		p.Note = "merge blocked: " + res.MergeBlocked
	}
	if res.Failed != "" {
		p.Note = "pushed, then the publish failed: " + res.Failed
	}
	return s.Store.SetPublication(ctx, run.ID, p)
}

// Summary is the step's one-line result: the branch pushed, the pull
// request and what became of the merge.
func Summary(res *nodeexec.PublishResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "branch %s pushed to %s at %s", res.Branch, res.Remote, short(res.Head))
	if res.Already {
		b.WriteString(" (already there)")
	}
	if res.PR != nil {
		fmt.Fprintf(&b, "; pull request #%d %s (%s)", res.PR.Number, res.PR.URL, res.PR.Outcome)
		switch {
		case res.PR.State == "merged":
			fmt.Fprintf(&b, ", merged at %s", short(res.PR.MergeSHA))
		case res.PR.AutoMerge != "":
			fmt.Fprintf(&b, ", auto-merge (%s) armed", res.PR.AutoMerge)
		}
	}
	if res.MergeBlocked != "" {
		b.WriteString("; merge blocked, the pull request stays open: " + res.MergeBlocked)
	}
	if res.Note != "" {
		b.WriteString("; " + res.Note)
	}
	return b.String()
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
