package github_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/publish/github"
)

// worc configuration.md § `git`: auto_merge_wait_for_checks arms GitHub's
// own auto-merge (gh pr merge --auto): the PR stays open, armed with the
// strategy, until the checks pass, then GitHub merges it.
func TestEnableAutoMerge_ArmedUntilChecksPass(t *testing.T) {
	t.Parallel()
	for _, s := range []github.Strategy{github.StrategyMerge, github.StrategySquash, github.StrategyRebase} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Options{})
			pr, _ := f.ensure(t, "Run 1", "s", "h1")
			f.srv.SetChecksPending(full, true)
			if err := f.client.EnableAutoMerge(context.Background(), pr.Number, s); err != nil {
				t.Fatal(err)
			}
			p := f.srv.Pulls(full)[0]
			if p.Merged || p.AutoMerge != string(s) {
				t.Fatalf("after arming: merged=%v auto_merge=%q, want open and armed with %s", p.Merged, p.AutoMerge, s)
			}
			if err := f.srv.CompleteChecks(full); err != nil {
				t.Fatal(err)
			}
			got, err := f.client.GetPR(context.Background(), pr.Number)
			if err != nil || !got.Merged || f.srv.Pulls(full)[0].MergeMethod != string(s) {
				t.Fatalf("after the checks passed: %+v %v, want merged with %s", got, err, s)
			}
			// Arming a merged PR again (a re-run publish) is not an error.
			if err := f.client.EnableAutoMerge(context.Background(), pr.Number, s); err != nil {
				t.Fatalf("arming a merged PR: %v", err)
			}
		})
	}
}

// GitHub refuses to arm auto-merge on a PR with nothing to wait for
// ("Pull request is in clean status"); the client merges it then, as
// GitHub would once armed.
func TestEnableAutoMerge_NothingToWaitForMergesNow(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Options{})
	pr, _ := f.ensure(t, "Run 1", "s", "h1")
	if err := f.client.EnableAutoMerge(context.Background(), pr.Number, github.StrategySquash); err != nil {
		t.Fatal(err)
	}
	if p := f.srv.Pulls(full)[0]; !p.Merged || p.MergeMethod != "squash" || p.AutoMerge != "" {
		t.Fatalf("PR %+v, want merged at once by squash, never armed", p)
	}
}

func TestEnableAutoMerge_RefusalsNameRepoBranchAndRemedy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		prep  func(t *testing.T, f *fixture) *github.Client
		kind  error
		words []string
	}{
		{"auto-merge off in the repository", func(t *testing.T, f *fixture) *github.Client {
			f.srv.SetAllowAutoMerge(full, false)
			return f.client
		}, github.ErrAutoMergeNotAllowed, []string{"Auto merge is not allowed", "repository's settings", "git.auto_merge_wait_for_checks: false"}},
		{"bad token", func(t *testing.T, f *fixture) *github.Client {
			c, _ := github.New(f.srv.URL, "wrong", owner, name, github.Options{})
			return c
		}, github.ErrAuth, []string{"401", "Bad credentials"}},
		{"read-only token", func(t *testing.T, f *fixture) *github.Client {
			f.srv.SetReadOnly(true)
			return f.client
		}, github.ErrAuth, []string{"not accessible", "write access"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Options{})
			pr, _ := f.ensure(t, "Run 1", "s", "h1")
			f.srv.SetChecksPending(full, true)
			err := tc.prep(t, f).EnableAutoMerge(context.Background(), pr.Number, github.StrategyMerge)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want %v", err, tc.kind)
			}
			var e *github.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %T, want *github.Error", err)
			}
			for _, w := range append(tc.words, full, "#1") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if tc.name != "bad token" && e.Branch != branch {
				t.Errorf("error names branch %q, want %q", e.Branch, branch)
			}
			if p := f.srv.Pulls(full)[0]; p.Merged || p.AutoMerge != "" {
				t.Fatalf("a refused arming left %+v", p)
			}
		})
	}
}
