package nodeexec

// KindPublish is a publish node's exec kind: the runner pushes the task
// branch and opens its pull request (docs/architecture.md § Publishing).
const KindPublish = "publish"

// PublishSpec is what a publish node's runner does (docs/architecture.md §
// Publishing; worc configuration.md § `git`): rebuild the run's commits on
// the operator's commit at the start, add the audit commit, push the task
// branch and, for GitHub, open or update its pull request and merge it when
// asked. It never carries a credential: the runner reads the git token
// from its own environment.
type PublishSpec struct {
	// Remote is the operator's remote at the start: its name ("origin",
	// for messages) and URL (credentials left out).
	Remote     string `json:"remote"`
	URL        string `json:"url"`
	Branch     string `json:"branch"`      // the task branch ("stratus/t1")
	BaseBranch string `json:"base_branch"` // git.pr_base ("main")

	// The run's workspace (stratus.Workspace): its base snapshot commit,
	// the operator's commit it started on, the work dir's prefix in the
	// repository, the paths that are Stratus's own, and the head.
	BaseCommit string   `json:"base_commit"`
	Origin     string   `json:"origin"`
	Prefix     string   `json:"prefix,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	Head       string   `json:"head"`

	// Audit is the orchestrator's audit commit (worc git.footprint): the
	// run's summary at AuditPath (repository-relative), with
	// AuditMessage; on the task branch, or with AuditSibling on
	// "<branch>-audit". Empty AuditPath: no audit commit.
	AuditPath    string `json:"audit_path,omitempty"`
	AuditBody    string `json:"audit_body,omitempty"`
	AuditMessage string `json:"audit_message,omitempty"`
	AuditSibling bool   `json:"audit_sibling,omitempty"`

	// PullRequest asks for a pull request on GitHub: API is the REST root
	// (https://api.github.com/ or a GitHub Enterprise one), Repository
	// "owner/name". Empty API: the remote is not a GitHub repository and
	// only the branch is pushed (NoPullRequest says why).
	PullRequest   bool   `json:"pull_request"`
	API           string `json:"api,omitempty"`
	Repository    string `json:"repository,omitempty"`
	NoPullRequest string `json:"no_pull_request,omitempty"`
	Title         string `json:"title,omitempty"`
	Body          string `json:"body,omitempty"`

	// AutoMerge merges the pull request once opened (git.auto_merge, the
	// task's auto_merge winning) with Strategy (merge | squash | rebase);
	// WaitForChecks arms the host's own auto-merge instead of merging now.
	AutoMerge     bool   `json:"auto_merge,omitempty"`
	Strategy      string `json:"strategy,omitempty"`
	WaitForChecks bool   `json:"wait_for_checks,omitempty"`
}

// PublishResult is what a publish node's runner did.
type PublishResult struct {
	Remote string `json:"remote"`
	URL    string `json:"url"`
	Branch string `json:"branch"`
	Head   string `json:"head"` // the commit the remote branch is at
	// Already: the remote branch was at Head before this step (a resumed
	// or re-delivered publish): nothing was pushed.
	Already bool   `json:"already,omitempty"`
	Audit   string `json:"audit,omitempty"` // the audit commit, when one was made or found
	// AuditBranch is where the audit commit went when it is not Branch
	// (git.footprint.audit_on_branch: sibling).
	AuditBranch string `json:"audit_branch,omitempty"`
	// PR is the pull request opened, updated or found merged; nil when
	// none was asked for or the host is not GitHub (Note says).
	PR *PublishedPR `json:"pr,omitempty"`
	// MergeBlocked says why an asked-for merge did not happen (a protected
	// branch, a conflict): the pull request stays open and the run ends
	// manual_action_required (worc's rule), never failed.
	MergeBlocked string `json:"merge_blocked,omitempty"`
	Note         string `json:"note,omitempty"`
	// Failed says why the publish failed after its push (the pull request
	// refused: a missing base, no token): the branch is on the remote and
	// the run records it, and the step fails with this reason.
	Failed string `json:"failed,omitempty"`
}

// PublishedPR is the pull request of a PublishResult.
type PublishedPR struct {
	Number  int    `json:"number"`
	URL     string `json:"url"`
	State   string `json:"state"`   // open | merged | closed
	Outcome string `json:"outcome"` // created | updated | already_merged
	// AutoMerge is the strategy the host's own auto-merge was armed with.
	AutoMerge string `json:"auto_merge,omitempty"`
	MergeSHA  string `json:"merge_sha,omitempty"`
}
