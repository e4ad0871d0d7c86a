package github

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v75/github"
)

// Kinds of refusal, for errors.Is on an *Error.
var (
	ErrAuth         = errors.New("token refused")                        // 401, or 403 not rate limiting
	ErrNotFound     = errors.New("repository or pull request not found") // 404
	ErrBaseMissing  = errors.New("base branch does not exist")           // 422 on field "base"
	ErrNoCommits    = errors.New("no commits between base and head")
	ErrPRExists     = errors.New("a pull request already exists for the branch") // 422 "A pull request already exists"     // 422 "No commits between"
	ErrInvalid      = errors.New("request refused as invalid")                   // any other 422
	ErrRateLimited  = errors.New("rate limited")                                 // 403/429 with a rate limit
	ErrNotMergeable = errors.New("pull request cannot be merged")                // 405 on merge
	ErrHeadMoved    = errors.New("head branch moved")                            // 409 on merge
	// ErrAutoMergeNotAllowed: the repository's allow_auto_merge is off.
	ErrAutoMergeNotAllowed = errors.New("auto-merge is not allowed for this repository")
	ErrAutoMerge           = errors.New("auto-merge refused") // any other GraphQL refusal of enablePullRequestAutoMerge
	ErrHost                = errors.New("host error")         // anything else
)

// Error is one refusal of the host: which repository, which branch, what
// was tried, what the host said and what to do about it.
type Error struct {
	Kind    error // one of the Err* kinds above
	Repo    string
	Branch  string // "" when the call names no branch
	Op      string
	Status  int    // HTTP status; 0 when no answer came
	Message string // the host's message (and validation details)
	Hint    string // what to do
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "github %s", e.Repo)
	if e.Branch != "" {
		fmt.Fprintf(&b, " branch %q", e.Branch)
	}
	fmt.Fprintf(&b, ": %s: %s", e.Op, e.Kind)
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, " (HTTP %d", e.Status)
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
		b.WriteString(")")
	case e.Message != "":
		fmt.Fprintf(&b, " (%s)", e.Message)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "; %s", e.Hint)
	}
	return b.String()
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

// classify turns a go-github error into *Error. The statuses follow
// GitHub REST docs: "Create a pull request" (403, 422), "Merge a pull
// request" (403, 404, 405, 409, 422), "Troubleshooting the REST API"
// (401 bad credentials, 404 for a private repository the token cannot see).
func (c *Client) classify(op, branch string, resp *gh.Response, err error) *Error {
	e := &Error{Kind: ErrHost, Repo: c.Repo(), Branch: branch, Op: op}
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	var er *gh.ErrorResponse
	switch {
	case errors.As(err, &rl):
		e.Kind, e.Status, e.Message = ErrRateLimited, http.StatusForbidden, rl.Message
		return e
	case errors.As(err, &ab):
		e.Kind, e.Status, e.Message = ErrRateLimited, http.StatusForbidden, ab.Message
		return e
	case errors.As(err, &er):
		e.Message = er.Message
		for _, d := range er.Errors {
			if d.Message != "" {
				e.Message += "; " + d.Message
			} else if d.Field != "" {
				e.Message += fmt.Sprintf("; %s %s", d.Field, d.Code)
			}
		}
	default:
		e.Message = err.Error()
		if resp == nil || resp.Response == nil {
			e.Hint = "check the base URL and the network"
			return e
		}
	}
	if resp != nil && resp.Response != nil {
		e.Status = resp.StatusCode
	} else if er != nil && er.Response != nil {
		e.Status = er.Response.StatusCode
	}
	switch e.Status {
	case http.StatusUnauthorized:
		e.Kind, e.Hint = ErrAuth, "the token is missing, wrong or expired: set GITHUB_TOKEN or GH_TOKEN to a token with pull request write access"
	case http.StatusForbidden:
		if strings.Contains(strings.ToLower(e.Message), "rate limit") || (resp != nil && resp.Response != nil && resp.Header.Get("Retry-After") != "") {
			e.Kind = ErrRateLimited
		} else {
			e.Kind, e.Hint = ErrAuth, "the token may not write to this repository: give it pull request (and contents) write access"
		}
	case http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
	case http.StatusNotFound:
		e.Kind, e.Hint = ErrNotFound, "check the remote's owner/repo, and that the token can see the repository"
	case http.StatusUnprocessableEntity:
		e.Kind = ErrInvalid
		switch {
		case er != nil && hasField(er, "base"):
			e.Kind, e.Hint = ErrBaseMissing, "pr_base names no branch of the repository: push it or set git.pr_base to an existing branch"
		case strings.Contains(e.Message, "A pull request already exists"):
			e.Kind = ErrPRExists
		case strings.Contains(e.Message, "No commits between"):
			e.Kind, e.Hint = ErrNoCommits, "the branch has nothing the base lacks: no pull request is needed"
		}
	case http.StatusMethodNotAllowed:
		e.Kind, e.Hint = ErrNotMergeable, "a branch protection, a required check or a conflict blocks the merge; the pull request stays open for a person"
	case http.StatusConflict:
		e.Kind, e.Hint = ErrHeadMoved, "the branch moved since it was pushed; publish again from its new head"
	}
	return e
}

func hasField(er *gh.ErrorResponse, field string) bool {
	for _, d := range er.Errors {
		if d.Field == field {
			return true
		}
	}
	return false
}
