// Package githubtest is a GitHub API stand-in: an HTTP server on
// 127.0.0.1 (New for a test, Start/Close elsewhere: `stratus dev github`)
// answering the five REST pull-request operations the publish step uses
// (worc configuration.md § `git`): list (head, base, state filters),
// create, update, get and merge, with GitHub's status codes (201, 200,
// 401, 404, 405, 409, 422, 403/429 rate limits) and its error body
// ({"message", "errors", "documentation_url"}); and GraphQL's
// enablePullRequestAutoMerge (GitHub's auto-merge has no REST operation).
// The REST shapes follow GitHub's published REST description
// (github/rest-api-description, operations pulls/list, pulls/create,
// pulls/update, pulls/get, pulls/merge; components/schemas/auto-merge for
// the auto_merge field); shapes_test.go checks them against the fields
// read there. The GraphQL shapes follow octokit/graphql-schema's
// schema.graphql (EnablePullRequestAutoMergeInput, ...Payload,
// PullRequestMergeMethod) and the GraphQL specification's error list;
// graphql.go cites them.
//
// A repository is held in memory (AddRepo: a branch is a name and a sha,
// a merge makes up a commit sha) or in a bare git repository (AddGitRepo:
// branches are its refs, so a `git push` makes a branch exist or move;
// a merge is the real merge commit, squash or rebase, made in a
// temporary clone and pushed to the base with a normal push, so the bare
// repository's pre-receive hook can refuse it: 405 with GitHub's
// protected-branch message; a conflict: 405 "Pull Request is not
// mergeable").
//
// Auto-merge follows GitHub: arming a pull request with nothing to wait
// for is refused ("Pull request Pull request is in clean status": the
// client merges it directly); with SetChecksPending it stays armed
// (REST auto_merge set, merge answering 405) until CompleteChecks merges
// it by the armed method. SetAllowAutoMerge(false) is the repository
// setting off.
//
// Tests steer it: SetBranch (a push, in memory), DeleteBranch (a missing
// pr_base), MergeByHand, Block (a protected branch refusing the merge:
// 405), RateLimitNext (403 with x-ratelimit-reset, or 429 with
// Retry-After), SetReadOnly, HideFromList, SetChecksPending,
// CompleteChecks, SetAllowAutoMerge.
//
// It checks no permission beyond the one token, runs no checks or
// reviews, parses no GraphQL beyond recognizing the one mutation (the
// payload's selection set is not read), and serves no git protocol:
// clients push to the bare repository's path.
package githubtest
