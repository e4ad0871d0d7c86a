package github

import (
	"fmt"
	"net/url"
	"strings"
)

// Remote is a git remote URL read as a GitHub repository.
type Remote struct {
	Host  string // "github.com" or a GitHub Enterprise host
	Owner string
	Repo  string // without ".git"
}

// APIBaseURL is the REST API root for the remote's host:
// https://api.github.com/ for github.com, https://<host>/api/v3/ for
// GitHub Enterprise Server.
func (r Remote) APIBaseURL() string {
	if r.Host == "github.com" {
		return DefaultBaseURL
	}
	return "https://" + r.Host + "/api/v3/"
}

// ParseRemote reads owner and repo out of a git remote URL in the forms git
// accepts for a GitHub host: https://host/owner/repo(.git),
// ssh://git@host(:port)/owner/repo(.git) and the scp-like
// git@host:owner/repo(.git). Errors name the URL and the forms accepted.
func ParseRemote(remote string) (Remote, error) {
	bad := func(why string) (Remote, error) {
		return Remote{}, fmt.Errorf("git remote %q: %s; expected https://host/owner/repo(.git), ssh://git@host/owner/repo(.git) or git@host:owner/repo(.git)", remote, why)
	}
	s := strings.TrimSpace(remote)
	if s == "" {
		return bad("empty")
	}
	var host, path string
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return bad(err.Error())
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git":
		default:
			return bad("scheme " + u.Scheme + " names no network host")
		}
		host, path = u.Hostname(), u.Path
	} else {
		// scp-like: [user@]host:path, with no slash before the colon.
		at := strings.LastIndex(s[:max(strings.Index(s, ":"), 0)], "@")
		colon := strings.Index(s, ":")
		if colon < 0 || strings.Contains(s[:colon], "/") {
			return bad("not a URL (a local path has no pull requests)")
		}
		host, path = s[at+1:colon], s[colon+1:]
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	parts := strings.Split(path, "/")
	if host == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return bad("the path must be owner/repo")
	}
	return Remote{Host: strings.ToLower(host), Owner: parts[0], Repo: parts[1]}, nil
}
