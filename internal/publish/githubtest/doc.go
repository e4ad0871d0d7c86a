// Package githubtest is a GitHub REST API stand-in for tests: an
// httptest.Server on 127.0.0.1 holding repositories, branches and pull
// requests in memory, answering the five pull-request operations the
// publish step uses (worc configuration.md § `git`): list (head, base,
// state filters), create, update, get and merge, with GitHub's status
// codes (201, 200, 401, 404, 405, 409, 422, 403/429 rate limits) and its
// error body ({"message", "errors", "documentation_url"}). The shapes
// follow GitHub's published REST description (github/rest-api-description,
// operations pulls/list, pulls/create, pulls/update, pulls/get,
// pulls/merge); shapes_test.go checks them against the fields read there.
//
// Tests steer it: SetBranch (a push), DeleteBranch (a missing pr_base),
// MergeByHand, Block (a protected branch refusing the merge: 405) and
// RateLimitNext (403 with x-ratelimit-reset, or 429 with Retry-After).
//
// It does not hold git objects (a branch is a name and a sha; a merge
// makes up a commit sha), checks no permission beyond the one token, and
// does not implement GitHub's auto-merge or checks.
package githubtest
