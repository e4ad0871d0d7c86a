package github_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/publish/github"
	"github.com/stratusflow/stratus/internal/publish/githubtest"
)

const (
	token  = "ghp_test-token"
	owner  = "acme"
	name   = "widgets"
	full   = owner + "/" + name
	branch = "stratus/run-1"
	base   = "main"
)

type fixture struct {
	srv    *githubtest.Server
	client *github.Client
	now    time.Time
	mu     sync.Mutex
	slept  []time.Duration
}

func (f *fixture) sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.slept...)
}

// setup starts the stand-in with acme/widgets (main at b0, the run's
// branch at h1) and a client whose clock is fixed and whose sleeps are
// recorded, never taken.
func setup(t *testing.T, opt github.Options) *fixture {
	t.Helper()
	f := &fixture{srv: githubtest.New(t, token), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.srv.SetNow(func() time.Time { return f.now })
	f.srv.AddRepo(owner, name, map[string]string{base: "b0", branch: "h1"})
	opt.Now = func() time.Time { return f.now }
	opt.Sleep = func(_ context.Context, d time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.slept = append(f.slept, d)
		return nil
	}
	c, err := github.New(f.srv.URL, token, owner, name, opt)
	if err != nil {
		t.Fatal(err)
	}
	f.client = c
	return f
}

func (f *fixture) ensure(t *testing.T, title, body, headSHA string) (*github.PR, github.Outcome) {
	t.Helper()
	pr, out, err := f.client.Ensure(context.Background(), github.EnsureRequest{Base: base, Head: branch, Title: title, Body: body, HeadSHA: headSHA})
	if err != nil {
		t.Fatal(err)
	}
	return pr, out
}

// worc configuration.md § `git`: create_pull_request opens a PR from the
// task branch into pr_base, its body the run's summary.
func TestEnsure_CreatesPRAgainstBase(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	pr, out := f.ensure(t, "Run 1", "summary v1", "h1")
	if out != github.Created {
		t.Fatalf("outcome %q, want created", out)
	}
	if pr.Number != 1 || pr.Head != branch || pr.Base != base || pr.Title != "Run 1" || pr.Body != "summary v1" || pr.HeadSHA != "h1" {
		t.Fatalf("PR %+v", pr)
	}
	if !strings.HasSuffix(pr.URL, "/acme/widgets/pull/1") {
		t.Fatalf("URL %q is not the PR's page", pr.URL)
	}
	if got := f.srv.Pulls(full); len(got) != 1 || got[0].State != "open" {
		t.Fatalf("stand-in holds %+v", got)
	}
}

// Exactly once: a second publish of the same branch finds the open PR and
// updates it; it never opens a second.
func TestEnsure_SecondPublishUpdatesTheOpenPR(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	first, _ := f.ensure(t, "Run 1", "summary v1", "h1")
	f.srv.SetBranch(full, branch, "h2")
	second, out := f.ensure(t, "Run 1 (resumed)", "summary v2", "h2")
	if out != github.Updated || second.Number != first.Number {
		t.Fatalf("second publish: outcome %q PR #%d, want updated #%d", out, second.Number, first.Number)
	}
	pulls := f.srv.Pulls(full)
	if len(pulls) != 1 {
		t.Fatalf("%d pull requests after two publishes, want 1", len(pulls))
	}
	if pulls[0].Title != "Run 1 (resumed)" || pulls[0].Body != "summary v2" {
		t.Fatalf("PR not updated: %+v", pulls[0])
	}
}

// Exactly once when the list misses the open PR (opened by a concurrent
// publish, or a list lagging behind): the create GitHub refuses with
// "already exists" turns into an update of that PR.
func TestEnsure_CreateRaceUpdatesTheExistingPR(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	f.ensure(t, "Run 1", "summary v1", "h1")
	f.srv.HideFromList(1)
	pr, out := f.ensure(t, "Run 1", "summary v2", "h1")
	if out != github.Updated || pr.Number != 1 {
		t.Fatalf("outcome %q PR #%d, want updated #1", out, pr.Number)
	}
	if pulls := f.srv.Pulls(full); len(pulls) != 1 || pulls[0].Body != "summary v2" {
		t.Fatalf("stand-in holds %+v, want one PR with the new body", pulls)
	}
}

// A PR merged by hand at the pushed head is reported as merged, not an
// error, and no second PR is opened.
func TestEnsure_MergedByHandIsReported(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	f.ensure(t, "Run 1", "s", "h1")
	f.srv.MergeByHand(full, 1)
	pr, out := f.ensure(t, "Run 1", "s", "h1")
	if out != github.AlreadyMerged || pr.Number != 1 || !pr.Merged {
		t.Fatalf("outcome %q PR %+v, want already_merged #1", out, pr)
	}
	if n := len(f.srv.Pulls(full)); n != 1 {
		t.Fatalf("%d pull requests, want 1", n)
	}
	// Merging it now reports it merged rather than failing.
	res, err := f.client.Merge(context.Background(), 1, github.StrategySquash, "h1")
	if err != nil || !res.AlreadyMerged {
		t.Fatalf("Merge of a hand-merged PR: %+v, %v; want AlreadyMerged", res, err)
	}
}

// A branch with new commits after its PR was merged gets a new PR: the
// merged one does not hide work it lacks.
func TestEnsure_NewWorkAfterMergeOpensNewPR(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	f.ensure(t, "Run 1", "s", "h1")
	f.srv.MergeByHand(full, 1)
	f.srv.SetBranch(full, branch, "h3")
	pr, out := f.ensure(t, "Run 1 again", "s", "h3")
	if out != github.Created || pr.Number != 2 {
		t.Fatalf("outcome %q PR #%d, want created #2", out, pr.Number)
	}
}

// worc configuration.md § `git`: auto_merge_strategy merge | squash |
// rebase, each passed to GitHub as merge_method.
func TestMerge_EachStrategy(t *testing.T) {
	t.Parallel()
	for _, s := range []github.Strategy{github.StrategyMerge, github.StrategySquash, github.StrategyRebase} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Options{})
			pr, _ := f.ensure(t, "Run 1", "s", "h1")
			res, err := f.client.Merge(context.Background(), pr.Number, s, "h1")
			if err != nil {
				t.Fatal(err)
			}
			p := f.srv.Pulls(full)[0]
			if res.AlreadyMerged || res.SHA == "" || !p.Merged || p.MergeMethod != string(s) {
				t.Fatalf("result %+v, stand-in %+v: want merged with %s", res, p, s)
			}
			if f.srv.Branch(full, base) != res.SHA {
				t.Fatalf("base at %q, want the merge result %q", f.srv.Branch(full, base), res.SHA)
			}
			got, err := f.client.GetPR(context.Background(), pr.Number)
			if err != nil || !got.Merged || got.State != "closed" {
				t.Fatalf("GetPR after merge: %+v, %v", got, err)
			}
		})
	}
	if _, err := github.ParseStrategy("fast-forward"); err == nil || !strings.Contains(err.Error(), "merge, squash, rebase") {
		t.Fatalf("ParseStrategy(fast-forward) = %v, want an error naming the valid strategies", err)
	}
}

// A blocked merge (405) and a moved head (409) are told apart, name the
// repository and branch, and leave the PR open.
func TestMerge_BlockedAndMovedHead(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	pr, _ := f.ensure(t, "Run 1", "s", "h1")
	_, err := f.client.Merge(context.Background(), pr.Number, github.StrategySquash, "stale")
	if !errors.Is(err, github.ErrHeadMoved) {
		t.Fatalf("merge at a stale sha: %v, want ErrHeadMoved", err)
	}
	f.srv.Block(full, pr.Number, "At least 1 approving review is required by reviewers with write access.")
	_, err = f.client.Merge(context.Background(), pr.Number, github.StrategySquash, "h1")
	if !errors.Is(err, github.ErrNotMergeable) {
		t.Fatalf("blocked merge: %v, want ErrNotMergeable", err)
	}
	for _, want := range []string{full, branch, "405", "approving review", "stays open"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	got, _ := f.client.GetPR(context.Background(), pr.Number)
	if got.Merged || got.State != "open" || got.MergeableState != "blocked" {
		t.Fatalf("PR after a blocked merge: %+v", got)
	}
}

func TestErrors_NameRepoBranchAndRemedy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		prep  func(t *testing.T, f *fixture) *github.Client
		kind  error
		words []string
	}{
		{"bad token", func(t *testing.T, f *fixture) *github.Client {
			c, _ := github.New(f.srv.URL, "wrong", owner, name, github.Options{})
			return c
		}, github.ErrAuth, []string{"401", "Bad credentials", "GITHUB_TOKEN"}},
		{"read-only token", func(t *testing.T, f *fixture) *github.Client {
			f.srv.SetReadOnly(true)
			return f.client
		}, github.ErrAuth, []string{"403", "not accessible", "write access"}},
		{"read-only token on update", func(t *testing.T, f *fixture) *github.Client {
			f.ensure(t, "Run 1", "s", "h1")
			f.srv.SetReadOnly(true)
			return f.client
		}, github.ErrAuth, []string{"update pull request #1", "403"}},
		{"missing repository", func(t *testing.T, f *fixture) *github.Client {
			c, _ := github.New(f.srv.URL, token, owner, "nope", github.Options{})
			return c
		}, github.ErrNotFound, []string{"acme/nope", "404", "owner/repo"}},
		{"missing base", func(t *testing.T, f *fixture) *github.Client {
			f.srv.DeleteBranch(full, base)
			return f.client
		}, github.ErrBaseMissing, []string{"422", "pr_base"}},
		{"no commits between", func(t *testing.T, f *fixture) *github.Client {
			f.srv.SetBranch(full, branch, "b0")
			return f.client
		}, github.ErrNoCommits, []string{"422", "No commits between"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Options{})
			c := tc.prep(t, f)
			_, _, err := c.Ensure(context.Background(), github.EnsureRequest{Base: base, Head: branch, Title: "t", Body: "b"})
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want %v", err, tc.kind)
			}
			for _, w := range append(tc.words, branch) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if n := len(f.srv.Pulls(full)); n > 1 || (n == 1 && tc.name != "read-only token on update") {
				t.Fatalf("a refused publish left %d pull requests", n)
			}
		})
	}
}

// A rate limit is waited out when the host says for how long: Retry-After
// on a secondary limit (429), x-ratelimit-reset on the primary (403).
func TestRateLimit_RetryAfterHonoured(t *testing.T) {
	t.Parallel()
	for _, rl := range []githubtest.RateLimit{
		{RetryAfter: 3 * time.Second},                             // secondary, 429 Retry-After
		{RetryAfter: 3 * time.Second, Status: 403},                // secondary, 403 Retry-After
		{Primary: true, RetryAfter: 3 * time.Second},              // primary, 403 x-ratelimit-reset
		{Primary: true, RetryAfter: 3 * time.Second, Status: 429}, // primary, 429 x-ratelimit-reset
	} {
		f := setup(t, github.Options{MaxWait: 10 * time.Second})
		f.srv.RateLimitNext(rl)
		_, out := f.ensure(t, "Run 1", "s", "h1")
		if out != github.Created {
			t.Fatalf("%+v: outcome %q", rl, out)
		}
		if s := f.sleeps(); len(s) != 1 || s[0] != 3*time.Second {
			t.Fatalf("%+v: slept %v, want exactly the host's 3s", rl, s)
		}
	}
}

// The wait is bounded: a host asking for longer than MaxWait fails at once,
// naming when to retry; a host that keeps limiting fails after Attempts.
func TestRateLimit_Bounded(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{MaxWait: 5 * time.Second})
	f.srv.RateLimitNext(githubtest.RateLimit{RetryAfter: time.Hour})
	_, _, err := f.client.Ensure(context.Background(), github.EnsureRequest{Base: base, Head: branch, Title: "t"})
	if !errors.Is(err, github.ErrRateLimited) || len(f.sleeps()) != 0 {
		t.Fatalf("err %v after sleeps %v; want ErrRateLimited without waiting", err, f.sleeps())
	}
	for _, w := range []string{full, branch, "1h0m0s", "try again after 2026-01-02T04:04:05Z"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}

	g := setup(t, github.Options{MaxWait: 5 * time.Second, Attempts: 3})
	g.srv.RateLimitNext(githubtest.RateLimit{RetryAfter: time.Second}, githubtest.RateLimit{RetryAfter: time.Second}, githubtest.RateLimit{RetryAfter: time.Second})
	_, _, err = g.client.Ensure(context.Background(), github.EnsureRequest{Base: base, Head: branch, Title: "t"})
	if !errors.Is(err, github.ErrRateLimited) || len(g.sleeps()) != 2 || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err %v after sleeps %v; want ErrRateLimited after 3 attempts, 2 waits", err, g.sleeps())
	}
}

func TestNew_BaseURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, graphql string }{
		{"", "https://api.github.com/", "https://api.github.com/graphql"},
		{"https://api.github.com", "https://api.github.com/", "https://api.github.com/graphql"},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/graphql"},
	} {
		c, err := github.New(tc.in, "t", "o", "r", github.Options{})
		if err != nil {
			t.Fatalf("New(%q): %v", tc.in, err)
		}
		if c.BaseURL() != tc.want || c.GraphQLURL() != tc.graphql {
			t.Errorf("New(%q) sends to %q and %q, want %q and %q", tc.in, c.BaseURL(), c.GraphQLURL(), tc.want, tc.graphql)
		}
	}
	for _, bad := range []string{"ghe.example.com", "ftp://x/"} {
		if _, err := github.New(bad, "t", "o", "r", github.Options{}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("New(%q) = %v, want an error naming it", bad, err)
		}
	}
	if _, err := github.New("", "", "o", "r", github.Options{}); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("New without a token = %v, want an error naming GITHUB_TOKEN", err)
	}
}

func TestParseRemote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, host, owner, repo, api string
	}{
		{"https://github.com/acme/widgets.git", "github.com", "acme", "widgets", "https://api.github.com/"},
		{"https://github.com/acme/widgets", "github.com", "acme", "widgets", "https://api.github.com/"},
		{"https://x-access-token:abc@github.com/acme/widgets.git/", "github.com", "acme", "widgets", "https://api.github.com/"},
		{"git@github.com:acme/widgets.git", "github.com", "acme", "widgets", "https://api.github.com/"},
		{"ssh://git@github.com/acme/widgets.git", "github.com", "acme", "widgets", "https://api.github.com/"},
		{"ssh://git@ghe.corp.example:2222/team/svc.git", "ghe.corp.example", "team", "svc", "https://ghe.corp.example/api/v3/"},
		{"https://GHE.corp.example/team/svc", "ghe.corp.example", "team", "svc", "https://ghe.corp.example/api/v3/"},
		{"git@ghe.corp.example:team/svc", "ghe.corp.example", "team", "svc", "https://ghe.corp.example/api/v3/"},
	} {
		r, err := github.ParseRemote(tc.in)
		if err != nil {
			t.Errorf("ParseRemote(%q): %v", tc.in, err)
			continue
		}
		if r.Host != tc.host || r.Owner != tc.owner || r.Repo != tc.repo || r.APIBaseURL() != tc.api {
			t.Errorf("ParseRemote(%q) = %+v (api %s), want %s %s/%s (api %s)", tc.in, r, r.APIBaseURL(), tc.host, tc.owner, tc.repo, tc.api)
		}
	}
	for _, bad := range []string{"", "/srv/git/widgets.git", "../origin", "https://github.com/acme", "https://github.com/acme/widgets/extra", "file:///tmp/x.git"} {
		if _, err := github.ParseRemote(bad); err == nil || !strings.Contains(err.Error(), "owner/repo") {
			t.Errorf("ParseRemote(%q) = %v, want an error naming the accepted forms", bad, err)
		}
	}
}
