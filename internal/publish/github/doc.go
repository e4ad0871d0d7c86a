// Package github is the pull-request host of the publish step for GitHub
// and GitHub Enterprise Server, over google/go-github: find the open pull
// request of a branch, open one, update its title and body, read its
// merged and mergeable state, and merge it with the configured strategy
// (worc configuration.md § `git`: create_pull_request, pr_base,
// auto_merge, auto_merge_strategy).
//
// Exactly once: Ensure updates the branch's open pull request rather than
// opening a second, and reports one already merged by hand at the pushed
// head as such, not as an error. Every refusal of the host is an *Error
// naming the repository, the branch, the HTTP status and what to do, with
// a kind for errors.Is (ErrAuth, ErrNotFound, ErrBaseMissing,
// ErrNoCommits, ErrRateLimited, ErrNotMergeable, ErrHeadMoved,
// ErrAutoMergeNotAllowed, ErrAutoMerge). A rate
// limit is waited out when the host says for how long (Retry-After, or
// x-ratelimit-reset) and the wait is within Options.MaxWait; otherwise
// the call fails at once, saying when to retry.
//
// ParseRemote reads owner/repo and the API root out of a git remote URL.
//
// EnableAutoMerge arms GitHub's own auto-merge
// (auto_merge_wait_for_checks) through GraphQL's
// enablePullRequestAutoMerge, sent by the same go-github client to the
// GraphQL endpoint beside the REST root (GraphQLURL); a pull request
// GitHub will not arm because nothing is left to wait for is merged at
// once.
//
// It does not push, commit or touch a repository, and does not read a
// token from the environment: the caller passes one.
package github
