package githubtest

import (
	"fmt"
	"strings"
	"time"
)

// The JSON shapes of GitHub's REST description
// (descriptions/api.github.com/api.github.com.json in
// github/rest-api-description): components/schemas/pull-request (pulls/get,
// pulls/create, pulls/update), pull-request-simple (pulls/list),
// pull-request-merge-result (pulls/merge), simple-user, and the head/base
// branch objects. Fields a stand-in has no value for carry the schema's
// null or empty value, never go missing.

func (s *Server) api(format string, a ...any) string {
	return strings.TrimSuffix(s.URL, "/") + fmt.Sprintf(format, a...)
}

func (s *Server) web(format string, a ...any) string {
	return s.root + fmt.Sprintf(format, a...)
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func tsp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

// user is a simple-user for login.
func (s *Server) user(login string) map[string]any {
	u := s.api("/users/%s", login)
	return map[string]any{
		"login": login, "id": 1, "node_id": "MDQ6VXNlcjE=", "avatar_url": s.web("/avatars/%s", login),
		"gravatar_id": "", "url": u, "html_url": s.web("/%s", login),
		"followers_url": u + "/followers", "following_url": u + "/following{/other_user}",
		"gists_url": u + "/gists{/gist_id}", "starred_url": u + "/starred{/owner}{/repo}",
		"subscriptions_url": u + "/subscriptions", "organizations_url": u + "/orgs",
		"repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events", "type": "User", "site_admin": false,
	}
}

// repoObj is the repository of a head or base: the fields a client reads
// (the description's full repository schema is not reproduced).
func (s *Server) repoObj(r *repo) map[string]any {
	return map[string]any{
		"id": 1, "node_id": "MDEwOlJlcG9zaXRvcnkx", "name": r.name, "full_name": r.owner + "/" + r.name,
		"owner": s.user(r.owner), "private": false, "html_url": s.web("/%s/%s", r.owner, r.name),
		"url": s.api("/repos/%s/%s", r.owner, r.name), "default_branch": "main",
	}
}

func (s *Server) branchObj(r *repo, ref, sha string) map[string]any {
	return map[string]any{
		"label": r.owner + ":" + ref, "ref": ref, "sha": sha,
		"user": s.user(r.owner), "repo": s.repoObj(r),
	}
}

// simple is a pull-request-simple (pulls/list items).
func (s *Server) simple(r *repo, p *Pull) map[string]any {
	self := s.api("/repos/%s/%s/pulls/%d", r.owner, r.name, p.Number)
	issue := s.api("/repos/%s/%s/issues/%d", r.owner, r.name, p.Number)
	html := s.web("/%s/%s/pull/%d", r.owner, r.name, p.Number)
	statuses := s.api("/repos/%s/%s/statuses/%s", r.owner, r.name, p.HeadSHA)
	var closedAt, mergeSHA any
	if p.State == "closed" {
		closedAt = ts(p.UpdatedAt)
	}
	if p.MergeCommitSHA != "" {
		mergeSHA = p.MergeCommitSHA
	}
	link := func(h string) map[string]any { return map[string]any{"href": h} }
	return map[string]any{
		"url": self, "id": 1000 + p.Number, "node_id": nodeID(r, p),
		"html_url": html, "diff_url": html + ".diff", "patch_url": html + ".patch",
		"issue_url": issue, "commits_url": self + "/commits",
		"review_comments_url": self + "/comments",
		"review_comment_url":  s.api("/repos/%s/%s/pulls/comments{/number}", r.owner, r.name),
		"comments_url":        issue + "/comments", "statuses_url": statuses,
		"number": p.Number, "state": p.State, "locked": false, "title": p.Title,
		"user": s.user(r.owner), "body": p.Body, "labels": []any{}, "milestone": nil,
		"active_lock_reason": nil,
		"created_at":         ts(p.CreatedAt), "updated_at": ts(p.UpdatedAt),
		"closed_at": closedAt, "merged_at": tsp(p.MergedAt), "merge_commit_sha": mergeSHA,
		"assignee": nil, "assignees": []any{}, "requested_reviewers": []any{}, "requested_teams": []any{},
		"head": s.branchObj(r, p.Head, p.HeadSHA), "base": s.branchObj(r, p.Base, p.BaseSHA),
		"_links": map[string]any{
			"comments": link(issue + "/comments"), "commits": link(self + "/commits"),
			"statuses": link(statuses), "html": link(html), "issue": link(issue),
			"review_comments": link(self + "/comments"),
			"review_comment":  link(s.api("/repos/%s/%s/pulls/comments{/number}", r.owner, r.name)),
			"self":            link(self),
		},
		"author_association": "OWNER", "auto_merge": s.autoMerge(r, p), "draft": false,
	}
}

// autoMerge is the auto-merge object (components/schemas/auto-merge:
// enabled_by, merge_method, commit_title, commit_message, all required;
// the field is null when auto-merge is not armed).
func (s *Server) autoMerge(r *repo, p *Pull) any {
	if p.AutoMerge == "" {
		return nil
	}
	return map[string]any{"enabled_by": s.user(r.owner), "merge_method": p.AutoMerge, "commit_title": "", "commit_message": ""}
}

// full is a pull-request (pulls/get, pulls/create, pulls/update).
func (s *Server) full(r *repo, p *Pull) map[string]any {
	m := s.simple(r, p)
	var mergeable any
	state := "clean"
	switch {
	case p.State != "open":
		state = "unknown"
	case p.Blocked != "", r.checksPending:
		mergeable, state = true, "blocked"
	default:
		mergeable = true
	}
	var mergedBy any
	if p.Merged {
		mergedBy = s.user(r.owner)
	}
	m["merged"] = p.Merged
	m["mergeable"] = mergeable
	m["rebaseable"] = mergeable
	m["mergeable_state"] = state
	m["merged_by"] = mergedBy
	m["comments"] = 0
	m["review_comments"] = 0
	m["maintainer_can_modify"] = false
	m["commits"] = 1
	m["additions"] = 0
	m["deletions"] = 0
	m["changed_files"] = 0
	return m
}
