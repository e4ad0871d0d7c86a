package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v75/github"
)

// GraphQLURL is the GraphQL endpoint beside the REST API root the client
// sends to (GitHub docs, "Forming calls with GraphQL": POST
// https://api.github.com/graphql; GitHub Enterprise Server:
// http(s)://HOST/api/graphql beside http(s)://HOST/api/v3/).
func (c *Client) GraphQLURL() string {
	u := *c.gh.BaseURL
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "v3/") + "graphql"
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	return u.String()
}

// enableAutoMerge is GitHub's GraphQL mutation arming auto-merge
// (schema: Mutation.enablePullRequestAutoMerge(input:
// EnablePullRequestAutoMergeInput!): EnablePullRequestAutoMergePayload;
// the input's pullRequestId is the PR's node_id, mergeMethod one of
// MERGE, SQUASH, REBASE). GitHub has no REST operation for it; gh pr
// merge --auto sends the same mutation.
const enableAutoMerge = `mutation EnableAutoMerge($input: EnablePullRequestAutoMergeInput!) {
  enablePullRequestAutoMerge(input: $input) {
    pullRequest { number autoMergeRequest { mergeMethod } }
  }
}`

type gqlRequest struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables"`
}

// gqlResponse is a GraphQL response (GraphQL spec § 7.1 Response
// Format: data, errors[] of {message, path, locations, extensions}),
// with GitHub's "type" on each error (NOT_FOUND, FORBIDDEN,
// UNPROCESSABLE, ...).
type gqlResponse struct {
	Errors []struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"errors"`
}

// EnableAutoMerge arms GitHub's own auto-merge on PR number with
// strategy (worc configuration.md § `git`: auto_merge_wait_for_checks,
// "gh pr merge --auto"): GitHub merges it once the base branch's
// required checks and reviews pass. It sends GraphQL's
// enablePullRequestAutoMerge through the same go-github client as the
// REST calls (auth, User-Agent, rate-limit waits).
//
// A PR already merged is not an error (nothing to arm). GitHub refuses
// to arm a PR that has nothing to wait for ("Pull request is in clean
// status", or "unstable": only optional checks pending or failing); it
// is then merged at once with strategy at the head just read, as GitHub
// would merge it when armed, and the errors are those of Merge.
//
// Errors (*Error): ErrAutoMergeNotAllowed (the repository's
// allow_auto_merge is off), ErrAuth, ErrNotFound, ErrAutoMerge (any other
// refusal: the host's message), ErrNotMergeable (the PR is closed), plus
// those of every call.
func (c *Client) EnableAutoMerge(ctx context.Context, number int, strategy Strategy) error {
	if _, err := ParseStrategy(string(strategy)); err != nil {
		return err
	}
	pr, err := c.GetPR(ctx, number)
	if err != nil {
		return err
	}
	op := fmt.Sprintf("enable %s auto-merge on pull request #%d", strategy, number)
	switch {
	case pr.Merged:
		return nil
	case pr.State != "open":
		return &Error{Kind: ErrNotMergeable, Repo: c.Repo(), Branch: pr.Head, Op: op, Message: "the pull request is closed",
			Hint: "reopen it, or publish again to open a new one"}
	}
	var out gqlResponse
	err = c.call(ctx, op, pr.Head, func(ctx context.Context) (*gh.Response, error) {
		req, err := c.gh.NewRequest(http.MethodPost, c.GraphQLURL(), gqlRequest{Query: enableAutoMerge, Variables: map[string]any{
			"input": map[string]any{"pullRequestId": pr.NodeID, "mergeMethod": strings.ToUpper(string(strategy))},
		}})
		if err != nil {
			return nil, err
		}
		out = gqlResponse{}
		return c.gh.Do(ctx, req, &out)
	})
	if err != nil || len(out.Errors) == 0 {
		return err
	}
	var msgs []string
	for _, e := range out.Errors {
		msgs = append(msgs, e.Message)
	}
	e := &Error{Kind: ErrAutoMerge, Repo: c.Repo(), Branch: pr.Head, Op: op, Message: strings.Join(msgs, "; "),
		Hint: "merge it by hand, or set git.auto_merge_wait_for_checks: false to have the publish step merge it"}
	first := out.Errors[0]
	switch {
	case strings.Contains(e.Message, "is in clean status"), strings.Contains(e.Message, "is in unstable status"):
		_, err := c.Merge(ctx, number, strategy, pr.HeadSHA)
		return err
	case strings.Contains(e.Message, "Auto merge is not allowed"):
		e.Kind, e.Hint = ErrAutoMergeNotAllowed, "enable auto-merge in the repository's settings (General › Pull Requests › Allow auto-merge) or set git.auto_merge_wait_for_checks: false"
	case first.Type == "FORBIDDEN":
		e.Kind, e.Hint = ErrAuth, "the token may not merge in this repository: give it contents and pull request write access"
	case first.Type == "NOT_FOUND":
		e.Kind, e.Hint = ErrNotFound, "check the remote's owner/repo, and that the token can see the repository"
	}
	return e
}
