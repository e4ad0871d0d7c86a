package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v75/github"
)

// Strategy is how a pull request is merged: worc configuration.md § `git`
// (auto_merge_strategy: merge | squash | rebase), passed to GitHub as the
// merge_method of "Merge a pull request".
type Strategy string

// The three merge strategies GitHub accepts.
const (
	StrategyMerge  Strategy = "merge"
	StrategySquash Strategy = "squash"
	StrategyRebase Strategy = "rebase"
)

// ParseStrategy returns the Strategy named s; anything else is an error
// naming the value and the three valid ones.
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case StrategyMerge, StrategySquash, StrategyRebase:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("auto_merge_strategy %q is not a merge strategy: valid are merge, squash, rebase", s)
}

// PR is what the publish step needs to know of one pull request.
type PR struct {
	Number  int    // the repository's pull request number
	NodeID  string // node_id: its global ID in GitHub's GraphQL API
	URL     string // html_url: the page a person opens
	Title   string
	Body    string
	Head    string // head branch name (no owner prefix)
	Base    string // base branch name
	HeadSHA string // the head commit GitHub holds for the PR
	State   string // "open" or "closed"
	Merged  bool
	// Mergeable is GitHub's answer to "can it merge cleanly": nil while
	// GitHub is still computing it (or in list answers, which omit it).
	Mergeable      *bool
	MergeableState string // e.g. "clean", "blocked", "dirty", "unknown"
	MergeCommitSHA string
}

// Outcome says what Ensure did.
type Outcome string

// Ensure's outcomes.
const (
	Created       Outcome = "created"        // no PR for the branch: one was opened
	Updated       Outcome = "updated"        // the open PR for the branch was found and its title/body set
	AlreadyMerged Outcome = "already_merged" // the branch's PR was merged (by hand) at the same head: nothing to do
)

// MergeResult is the answer of Merge.
type MergeResult struct {
	SHA string // the merge commit (or, for rebase, the new base head)
	// AlreadyMerged is true when the PR was merged before this call (by
	// hand): reported, not an error, and no merge was attempted.
	AlreadyMerged bool
}

// Host is the pull-request host the publish step uses: one repository,
// one token. Implementations return *Error for every refusal of the host.
type Host interface {
	// Repo is "owner/repo".
	Repo() string
	// FindOpenPR returns the open PR whose head is branch, or nil.
	FindOpenPR(ctx context.Context, branch string) (*PR, error)
	// CreatePR opens a PR from head into base.
	CreatePR(ctx context.Context, base, head, title, body string) (*PR, error)
	// UpdatePR sets the title and body of PR number.
	UpdatePR(ctx context.Context, number int, title, body string) (*PR, error)
	// GetPR returns PR number with its merged and mergeable state.
	GetPR(ctx context.Context, number int) (*PR, error)
	// Merge merges PR number with strategy, only if its head is still
	// expectedHeadSHA (empty: any head).
	Merge(ctx context.Context, number int, strategy Strategy, expectedHeadSHA string) (*MergeResult, error)
	// Ensure makes exactly one PR for head: it updates the open one,
	// reports one merged at headSHA, or creates one.
	Ensure(ctx context.Context, req EnsureRequest) (*PR, Outcome, error)
	// EnableAutoMerge arms the host's own auto-merge on PR number with
	// strategy: it merges once the base branch's required checks pass.
	EnableAutoMerge(ctx context.Context, number int, strategy Strategy) error
}

// EnsureRequest is what Ensure needs.
type EnsureRequest struct {
	Base, Head  string
	Title, Body string
	// HeadSHA is the commit just pushed to Head. A merged PR whose head
	// is this commit counts as already merged; a merged PR at an older
	// head does not (the branch has new work: a new PR is opened).
	// Empty: any merged PR for Head counts.
	HeadSHA string
}

// Options tunes a Client. The zero value is usable.
type Options struct {
	// MaxWait bounds one wait for a rate limit to lift (Retry-After or
	// x-ratelimit-reset): a longer one fails at once with ErrRateLimited.
	// Default 5s.
	MaxWait time.Duration
	// Attempts is how many times one call is tried while rate-limited.
	// Default 3.
	Attempts int
	// Now and Sleep replace the clock (tests).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTPClient carries the requests; default http.DefaultClient.
	HTTPClient *http.Client
}

// Client is the Host over GitHub's REST API (google/go-github).
type Client struct {
	gh          *gh.Client
	owner, repo string
	opt         Options
}

var _ Host = (*Client)(nil)

// DefaultBaseURL is GitHub.com's REST API root.
const DefaultBaseURL = "https://api.github.com/"

// New returns a Client for owner/repo. baseURL is the REST API root:
// empty or DefaultBaseURL for github.com; a GitHub Enterprise Server host
// ("https://ghe.example.com" or ".../api/v3/") gets /api/v3/ added as
// go-github's WithEnterpriseURLs does. token is sent as a bearer token.
// Errors: a baseURL that is not an absolute http(s) URL, an empty owner,
// repo or token.
func New(baseURL, token, owner, repo string, opt Options) (*Client, error) {
	if owner == "" || repo == "" {
		return nil, fmt.Errorf("github repository %q/%q: owner and repo must both be set", owner, repo)
	}
	if token == "" {
		return nil, fmt.Errorf("github %s/%s: no token: set GITHUB_TOKEN or GH_TOKEN (or log in with `gh auth login`)", owner, repo)
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = 5 * time.Second
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 3
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Sleep == nil {
		opt.Sleep = sleep
	}
	c := gh.NewClient(opt.HTTPClient).WithAuthToken(token)
	// Our own bounded wait decides about rate limits; go-github's
	// pre-emptive refusal would fail the retry without asking the host.
	c.DisableRateLimitCheck = true
	if baseURL != "" && strings.TrimSuffix(baseURL, "/") != strings.TrimSuffix(DefaultBaseURL, "/") {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("github base URL %q is not an absolute http(s) URL (e.g. https://ghe.example.com/api/v3/)", baseURL)
		}
		// Uploads are never made; the upload root only has to parse.
		if c, err = c.WithEnterpriseURLs(baseURL, u.Scheme+"://"+u.Host+"/api/uploads/"); err != nil {
			return nil, fmt.Errorf("github base URL %q: %w", baseURL, err)
		}
		c.DisableRateLimitCheck = true
	}
	return &Client{gh: c, owner: owner, repo: repo, opt: opt}, nil
}

// BaseURL is the REST API root the client sends to.
func (c *Client) BaseURL() string { return c.gh.BaseURL.String() }

// Repo is "owner/repo".
func (c *Client) Repo() string { return c.owner + "/" + c.repo }

// FindOpenPR lists the open PRs whose head is owner:branch (GitHub's
// "List pull requests", head filter) and returns the first, or nil.
func (c *Client) FindOpenPR(ctx context.Context, branch string) (*PR, error) {
	prs, err := c.list(ctx, branch, "open")
	if err != nil || len(prs) == 0 {
		return nil, err
	}
	return prs[0], nil
}

func (c *Client) list(ctx context.Context, branch, state string) ([]*PR, error) {
	var out []*gh.PullRequest
	err := c.call(ctx, "list pull requests", branch, func(ctx context.Context) (*gh.Response, error) {
		prs, resp, err := c.gh.PullRequests.List(ctx, c.owner, c.repo, &gh.PullRequestListOptions{
			State: state, Head: c.owner + ":" + branch,
			ListOptions: gh.ListOptions{PerPage: 100},
		})
		out = prs
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	res := make([]*PR, 0, len(out))
	for _, p := range out {
		// The head filter matches owner:branch; a fork's PR with the same
		// branch name is not ours.
		if p.GetHead().GetRef() == branch {
			res = append(res, toPR(p))
		}
	}
	return res, nil
}

// CreatePR opens a PR from head into base (GitHub's "Create a pull
// request"). Errors: ErrBaseMissing, ErrNoCommits, ErrAuth, ErrNotFound,
// ErrRateLimited (as *Error).
func (c *Client) CreatePR(ctx context.Context, base, head, title, body string) (*PR, error) {
	var out *gh.PullRequest
	err := c.call(ctx, "create pull request into "+base, head, func(ctx context.Context) (*gh.Response, error) {
		p, resp, err := c.gh.PullRequests.Create(ctx, c.owner, c.repo, &gh.NewPullRequest{
			Title: gh.Ptr(title), Head: gh.Ptr(head), Base: gh.Ptr(base), Body: gh.Ptr(body),
		})
		out = p
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	return toPR(out), nil
}

// UpdatePR sets PR number's title and body (GitHub's "Update a pull
// request").
func (c *Client) UpdatePR(ctx context.Context, number int, title, body string) (*PR, error) {
	var out *gh.PullRequest
	err := c.call(ctx, fmt.Sprintf("update pull request #%d", number), "", func(ctx context.Context) (*gh.Response, error) {
		p, resp, err := c.gh.PullRequests.Edit(ctx, c.owner, c.repo, number, &gh.PullRequest{Title: gh.Ptr(title), Body: gh.Ptr(body)})
		out = p
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	return toPR(out), nil
}

// GetPR returns PR number (GitHub's "Get a pull request").
func (c *Client) GetPR(ctx context.Context, number int) (*PR, error) {
	var out *gh.PullRequest
	err := c.call(ctx, fmt.Sprintf("get pull request #%d", number), "", func(ctx context.Context) (*gh.Response, error) {
		p, resp, err := c.gh.PullRequests.Get(ctx, c.owner, c.repo, number)
		out = p
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	return toPR(out), nil
}

// Merge merges PR number (GitHub's "Merge a pull request"). A PR already
// merged is reported (AlreadyMerged), not an error. Errors:
// ErrNotMergeable (405: blocked by protection, checks or a conflict; the
// PR stays open), ErrHeadMoved (409: the head is no longer
// expectedHeadSHA), plus those of every call.
func (c *Client) Merge(ctx context.Context, number int, strategy Strategy, expectedHeadSHA string) (*MergeResult, error) {
	if _, err := ParseStrategy(string(strategy)); err != nil {
		return nil, err
	}
	pr, err := c.GetPR(ctx, number)
	if err != nil {
		return nil, err
	}
	if pr.Merged {
		return &MergeResult{SHA: pr.MergeCommitSHA, AlreadyMerged: true}, nil
	}
	var out *gh.PullRequestMergeResult
	err = c.call(ctx, fmt.Sprintf("%s-merge pull request #%d", strategy, number), pr.Head, func(ctx context.Context) (*gh.Response, error) {
		r, resp, err := c.gh.PullRequests.Merge(ctx, c.owner, c.repo, number, "", &gh.PullRequestOptions{
			MergeMethod: string(strategy), SHA: expectedHeadSHA,
		})
		out = r
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if !out.GetMerged() {
		return nil, &Error{Kind: ErrNotMergeable, Repo: c.Repo(), Branch: pr.Head, Op: fmt.Sprintf("merge pull request #%d", number),
			Message: out.GetMessage(), Hint: "merge it by hand or fix what blocks it; the pull request stays open"}
	}
	return &MergeResult{SHA: out.GetSHA()}, nil
}

// Ensure makes exactly one PR for req.Head (worc configuration.md §
// `git`: create_pull_request; a re-run publish never opens a second):
// the open PR for the branch is updated (Updated); failing that, a PR for
// the branch merged at req.HeadSHA is reported (AlreadyMerged, not an
// error); otherwise one is created (Created).
func (c *Client) Ensure(ctx context.Context, req EnsureRequest) (*PR, Outcome, error) {
	open, err := c.FindOpenPR(ctx, req.Head)
	if err != nil {
		return nil, "", err
	}
	if open != nil {
		pr, err := c.UpdatePR(ctx, open.Number, req.Title, req.Body)
		if err != nil {
			return nil, "", withBranch(err, req.Head)
		}
		return pr, Updated, nil
	}
	closed, err := c.list(ctx, req.Head, "closed")
	if err != nil {
		return nil, "", err
	}
	for _, p := range closed {
		// List answers carry no merged flag; merged_at says it.
		if p.Merged && (req.HeadSHA == "" || p.HeadSHA == req.HeadSHA) {
			return p, AlreadyMerged, nil
		}
	}
	pr, err := c.CreatePR(ctx, req.Base, req.Head, req.Title, req.Body)
	if errors.Is(err, ErrPRExists) {
		// Opened between our list and our create (a concurrent or
		// re-delivered publish, or a list lagging behind): update that one.
		open, ferr := c.FindOpenPR(ctx, req.Head)
		if ferr != nil {
			return nil, "", ferr
		}
		if open == nil {
			return nil, "", err
		}
		pr, err := c.UpdatePR(ctx, open.Number, req.Title, req.Body)
		if err != nil {
			return nil, "", withBranch(err, req.Head)
		}
		return pr, Updated, nil
	}
	if err != nil {
		return nil, "", err
	}
	return pr, Created, nil
}

// withBranch names branch in an *Error that names none (a call by PR
// number).
func withBranch(err error, branch string) error {
	var e *Error
	if errors.As(err, &e) && e.Branch == "" {
		e.Branch = branch
	}
	return err
}

func toPR(p *gh.PullRequest) *PR {
	return &PR{
		Number: p.GetNumber(), NodeID: p.GetNodeID(), URL: p.GetHTMLURL(), Title: p.GetTitle(), Body: p.GetBody(),
		Head: p.GetHead().GetRef(), Base: p.GetBase().GetRef(), HeadSHA: p.GetHead().GetSHA(),
		State: p.GetState(), Merged: p.GetMerged() || p.MergedAt != nil,
		Mergeable: p.Mergeable, MergeableState: p.GetMergeableState(), MergeCommitSHA: p.GetMergeCommitSHA(),
	}
}

// call runs one request, waiting out a rate limit when the host says how
// long and the wait is within MaxWait, and turns a refusal into *Error.
func (c *Client) call(ctx context.Context, op, branch string, do func(context.Context) (*gh.Response, error)) error {
	for attempt := 1; ; attempt++ {
		resp, err := do(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("github %s: %s: %w", c.Repo(), op, ctx.Err())
		}
		e := c.classify(op, branch, resp, err)
		if !errors.Is(e, ErrRateLimited) {
			return e
		}
		wait, known := c.retryAfter(err, resp)
		switch {
		case !known:
			e.Hint = "the host gave no time to retry at; try again later"
			return e
		case wait > c.opt.MaxWait:
			e.Hint = fmt.Sprintf("the host asks to wait %s, more than the %s allowed; try again after %s", wait.Round(time.Second), c.opt.MaxWait, c.opt.Now().Add(wait).UTC().Format(time.RFC3339))
			return e
		case attempt >= c.opt.Attempts:
			e.Hint = fmt.Sprintf("still rate-limited after %d attempts; try again later", attempt)
			return e
		}
		if err := c.opt.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("github %s: %s: waiting out a rate limit: %w", c.Repo(), op, err)
		}
	}
}

// retryAfter reads how long the host asks to wait: Retry-After (seconds)
// first, else x-ratelimit-reset (epoch seconds) when x-ratelimit-remaining
// is 0 (GitHub REST docs, "Rate limits for the REST API": exceeding the
// primary or secondary rate limit).
func (c *Client) retryAfter(err error, resp *gh.Response) (time.Duration, bool) {
	var h http.Header
	if resp != nil && resp.Response != nil {
		h = resp.Header
	}
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	switch {
	case errors.As(err, &ab) && ab.Response != nil:
		h = ab.Response.Header
	case errors.As(err, &rl) && rl.Response != nil:
		h = rl.Response.Header
	}
	if h == nil {
		return 0, false
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, true
		}
	}
	if h.Get("X-Ratelimit-Remaining") == "0" {
		if v := h.Get("X-Ratelimit-Reset"); v != "" {
			if s, err := strconv.ParseInt(v, 10, 64); err == nil {
				d := time.Unix(s, 0).Sub(c.opt.Now())
				if d < 0 {
					d = 0
				}
				return d, true
			}
		}
	}
	return 0, false
}

// sleep waits d or until ctx ends. Not smithy-go's SleepWithContext, as
// the AWS packages use: the runner links this package, and the slim build
// links nothing of AWS.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
