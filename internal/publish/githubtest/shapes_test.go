package githubtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/publish/githubtest"
)

// The fields and statuses below were read from GitHub's published REST
// description, github/rest-api-description,
// descriptions/api.github.com/api.github.com.json:
//
//   - paths./repos/{owner}/{repo}/pulls.post, operationId pulls/create:
//     requestBody required [head, base]; responses 201 (schema
//     pull-request, header Location), 403, 422 (validation_failed).
//   - paths./repos/{owner}/{repo}/pulls.get, operationId pulls/list:
//     query state (open|closed|all, default open), head ("user:ref-name"),
//     base; responses 200 (array of pull-request-simple), 304, 422.
//   - paths./repos/{owner}/{repo}/pulls/{pull_number}.get, operationId
//     pulls/get: 200 (pull-request), 304, 404, 406, 500, 503.
//   - paths./repos/{owner}/{repo}/pulls/{pull_number}.patch, operationId
//     pulls/update: body title, body, state (open|closed), base,
//     maintainer_can_modify; 200 (pull-request), 403, 422.
//   - paths./repos/{owner}/{repo}/pulls/{pull_number}/merge.put,
//     operationId pulls/merge: body commit_title, commit_message, sha,
//     merge_method (merge|squash|rebase); 200 (pull-request-merge-result),
//     405 ("Method Not Allowed if merge cannot be performed": message,
//     documentation_url), 409 ("Conflict if sha was provided and pull
//     request head did not match": message, documentation_url), 422, 403,
//     404.
//   - components.schemas.pull-request.required (prRequired below), its
//     head/base required [label, ref, repo, sha, user] and _links required
//     (linksRequired below); components.schemas.pull-request-merge-result
//     required [merged, message, sha].
//   - components.schemas.validation-error (the 422 body): required
//     [message, documentation_url], errors[] items required [code];
//     basic-error (401, 403, 404): message, documentation_url, url, status
//     (a string), none required.
//
// Not read there, so checked by a weaker rule: the items of pulls/list
// (components.schemas.pull-request-simple) are held to the pull-request
// fields that are not detail-only (prRequired minus detailOnly).
var prRequired = []string{
	"_links", "assignee", "labels", "base", "body", "closed_at", "comments_url", "commits_url",
	"created_at", "diff_url", "head", "html_url", "id", "node_id", "issue_url", "merge_commit_sha",
	"merged_at", "milestone", "number", "patch_url", "review_comment_url", "review_comments_url",
	"statuses_url", "state", "locked", "title", "updated_at", "url", "user", "author_association",
	"auto_merge", "additions", "changed_files", "comments", "commits", "deletions", "mergeable",
	"mergeable_state", "merged", "maintainer_can_modify", "merged_by", "review_comments",
}

var detailOnly = map[string]bool{
	"additions": true, "changed_files": true, "comments": true, "commits": true, "deletions": true,
	"mergeable": true, "mergeable_state": true, "merged": true, "maintainer_can_modify": true,
	"merged_by": true, "review_comments": true,
}

var branchRequired = []string{"label", "ref", "repo", "sha", "user"}

var linksRequired = []string{"comments", "commits", "statuses", "html", "issue", "review_comments", "review_comment", "self"}

var mergeResultRequired = []string{"merged", "message", "sha"}

const tok = "ghs_shape"

type api struct {
	t   *testing.T
	srv *githubtest.Server
}

func (a api) do(method, path, auth string, body any) (int, http.Header, any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, strings.TrimSuffix(a.srv.URL, "/")+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		a.t.Fatalf("%s %s: body is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, v
}

func requireFields(t *testing.T, what string, v any, fields []string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T, want an object", what, v)
	}
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("%s lacks required field %q", what, f)
		}
	}
	return m
}

func requirePR(t *testing.T, what string, v any, fields []string) map[string]any {
	t.Helper()
	m := requireFields(t, what, v, fields)
	for _, side := range []string{"head", "base"} {
		requireFields(t, what+"."+side, m[side], branchRequired)
	}
	links := requireFields(t, what+"._links", m["_links"], linksRequired)
	for _, l := range linksRequired {
		requireFields(t, what+"._links."+l, links[l], []string{"href"})
	}
	return m
}

func requireErrorBody(t *testing.T, what string, v any, wantErrors bool) {
	t.Helper()
	m := requireFields(t, what, v, []string{"message", "documentation_url"})
	if st, ok := m["status"]; ok {
		if _, isString := st.(string); !isString {
			t.Errorf("%s: status %v is a %T, want a string (basic-error)", what, st, st)
		}
	}
	if !wantErrors {
		return
	}
	errs, ok := m["errors"].([]any)
	if !ok || len(errs) == 0 {
		t.Fatalf("%s: errors %v, want a non-empty list", what, m["errors"])
	}
	for _, e := range errs {
		requireFields(t, what+".errors[]", e, []string{"code"})
	}
}

func setup(t *testing.T) api {
	srv := githubtest.New(t, tok)
	srv.AddRepo("o", "r", map[string]string{"main": "b0", "feat": "h1"})
	return api{t: t, srv: srv}
}

func TestShapes_PullsCreate(t *testing.T) {
	t.Parallel()
	a := setup(t)
	auth := "Bearer " + tok
	code, _, v := a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "base": "main"})
	if code != 422 {
		t.Fatalf("create without head: %d, want 422", code)
	}
	requireErrorBody(t, "422 missing head", v, true)

	code, _, v = a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "gone"})
	if code != 422 {
		t.Fatalf("create into a missing base: %d, want 422", code)
	}
	requireErrorBody(t, "422 missing base", v, true)
	if f := v.(map[string]any)["errors"].([]any)[0].(map[string]any)["field"]; f != "base" {
		t.Fatalf("422 missing base names field %v, want base", f)
	}

	code, h, v := a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "o:feat", "base": "main", "body": "b"})
	if code != 201 {
		t.Fatalf("create: %d, want 201", code)
	}
	m := requirePR(t, "pulls/create 201", v, prRequired)
	if h.Get("Location") == "" || h.Get("Location") != m["url"] {
		t.Fatalf("Location %q, want the PR's url %v", h.Get("Location"), m["url"])
	}
	if m["state"] != "open" || m["merged"] != false || m["number"] != float64(1) {
		t.Fatalf("created PR state=%v merged=%v number=%v", m["state"], m["merged"], m["number"])
	}

	code, _, v = a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})
	if code != 422 {
		t.Fatalf("second PR for the same head: %d, want 422", code)
	}
	requireErrorBody(t, "422 already exists", v, true)
}

func TestShapes_PullsListGetUpdate(t *testing.T) {
	t.Parallel()
	a := setup(t)
	auth := "token " + tok
	a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})

	var simple []string
	for _, f := range prRequired {
		if !detailOnly[f] {
			simple = append(simple, f)
		}
	}
	for _, q := range []string{"?head=o:feat&state=open", "?head=o:feat", "?state=all&base=main"} {
		code, _, v := a.do("GET", "/repos/o/r/pulls"+q, auth, nil)
		list, ok := v.([]any)
		if code != 200 || !ok || len(list) != 1 {
			t.Fatalf("list%s: %d with %d PRs, want 200 and one", q, code, len(list))
		}
		requirePR(t, "pulls/list item", list[0], simple)
	}
	for _, q := range []string{"?head=o:other", "?state=closed", "?head=someone:feat"} {
		if code, _, v := a.do("GET", "/repos/o/r/pulls"+q, auth, nil); code != 200 || len(v.([]any)) != 0 {
			t.Fatalf("list%s: %d with %d PRs, want 200 and none", q, code, len(v.([]any)))
		}
	}
	if code, _, v := a.do("GET", "/repos/o/r/pulls?state=merged", auth, nil); code != 422 {
		t.Fatalf("list state=merged: %d, want 422", code)
	} else {
		requireErrorBody(t, "422 bad state", v, true)
	}

	code, _, v := a.do("GET", "/repos/o/r/pulls/1", auth, nil)
	if code != 200 {
		t.Fatalf("get: %d", code)
	}
	requirePR(t, "pulls/get 200", v, prRequired)
	if code, _, v := a.do("GET", "/repos/o/r/pulls/9", auth, nil); code != 404 {
		t.Fatalf("get #9: %d, want 404", code)
	} else {
		requireErrorBody(t, "404", v, false)
	}

	code, _, v = a.do("PATCH", "/repos/o/r/pulls/1", auth, map[string]any{"title": "t2", "body": "b2"})
	if code != 200 {
		t.Fatalf("update: %d", code)
	}
	m := requirePR(t, "pulls/update 200", v, prRequired)
	if m["title"] != "t2" || m["body"] != "b2" {
		t.Fatalf("update did not apply: %v %v", m["title"], m["body"])
	}
	if code, _, _ := a.do("PATCH", "/repos/o/r/pulls/1", auth, map[string]any{"state": "merged"}); code != 422 {
		t.Fatalf("update state=merged: %d, want 422", code)
	}
}

func TestShapes_PullsMerge(t *testing.T) {
	t.Parallel()
	a := setup(t)
	auth := "Bearer " + tok
	a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})

	if code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, map[string]any{"merge_method": "fast-forward"}); code != 422 {
		t.Fatalf("merge_method fast-forward: %d, want 422", code)
	} else {
		requireErrorBody(t, "422 merge_method", v, true)
	}
	if code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, map[string]any{"sha": "not-head"}); code != 409 {
		t.Fatalf("merge at a stale sha: %d, want 409", code)
	} else {
		requireErrorBody(t, "409", v, false)
	}
	a.srv.Block("o/r", 1, "Required status check \"ci\" is expected.")
	if code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, map[string]any{"merge_method": "squash"}); code != 405 {
		t.Fatalf("blocked merge: %d, want 405", code)
	} else {
		requireErrorBody(t, "405", v, false)
	}
	_, _, v := a.do("GET", "/repos/o/r/pulls/1", auth, nil)
	if st := v.(map[string]any)["mergeable_state"]; st != "blocked" {
		t.Fatalf("blocked PR mergeable_state %v", st)
	}
	a.srv.Block("o/r", 1, "")
	code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, map[string]any{"merge_method": "squash", "sha": "h1"})
	if code != 200 {
		t.Fatalf("merge: %d %v", code, v)
	}
	m := requireFields(t, "pulls/merge 200", v, mergeResultRequired)
	if m["merged"] != true {
		t.Fatalf("merged %v", m["merged"])
	}
	if code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, nil); code != 405 {
		t.Fatalf("merging a merged PR: %d, want 405", code)
	} else {
		requireErrorBody(t, "405 merged", v, false)
	}
	_, _, v = a.do("GET", "/repos/o/r/pulls/1", auth, nil)
	pm := requirePR(t, "merged PR", v, prRequired)
	if pm["merged"] != true || pm["state"] != "closed" || pm["merged_at"] == nil || pm["merge_commit_sha"] != m["sha"] {
		t.Fatalf("merged PR: merged=%v state=%v merged_at=%v merge_commit_sha=%v (result sha %v)", pm["merged"], pm["state"], pm["merged_at"], pm["merge_commit_sha"], m["sha"])
	}
}

// Authentication and rate limits follow GitHub's REST docs ("Authenticating
// to the REST API": Authorization: Bearer|token; "Rate limits for the REST
// API": primary limit 403/429 with x-ratelimit-remaining 0 and
// x-ratelimit-reset in epoch seconds, secondary limit with retry-after in
// seconds).
func TestShapes_AuthAndRateLimits(t *testing.T) {
	t.Parallel()
	a := setup(t)
	for _, auth := range []string{"", "Bearer wrong", "Basic " + tok, tok} {
		code, _, v := a.do("GET", "/repos/o/r/pulls", auth, nil)
		if code != 401 {
			t.Fatalf("Authorization %q: %d, want 401", auth, code)
		}
		requireErrorBody(t, "401", v, false)
	}
	if code, _, v := a.do("GET", "/repos/o/missing/pulls", "Bearer "+tok, nil); code != 404 {
		t.Fatalf("missing repository: %d, want 404", code)
	} else {
		requireErrorBody(t, "404 repo", v, false)
	}

	now := time.Unix(1_800_000_000, 0)
	a.srv.SetNow(func() time.Time { return now })
	a.srv.RateLimitNext(githubtest.RateLimit{RetryAfter: 7 * time.Second}, githubtest.RateLimit{Primary: true, RetryAfter: 30 * time.Second})
	code, h, v := a.do("GET", "/repos/o/r/pulls", "Bearer "+tok, nil)
	if code != 429 || h.Get("Retry-After") != "7" {
		t.Fatalf("secondary limit: %d Retry-After %q, want 429 and 7", code, h.Get("Retry-After"))
	}
	requireErrorBody(t, "429", v, false)
	code, h, v = a.do("GET", "/repos/o/r/pulls", "Bearer "+tok, nil)
	if code != 403 || h.Get("X-Ratelimit-Remaining") != "0" || h.Get("X-Ratelimit-Reset") != "1800000030" {
		t.Fatalf("primary limit: %d remaining %q reset %q", code, h.Get("X-Ratelimit-Remaining"), h.Get("X-Ratelimit-Reset"))
	}
	requireErrorBody(t, "403 rate", v, false)
	if code, _, _ := a.do("GET", "/repos/o/r/pulls", "Bearer "+tok, nil); code != 200 {
		t.Fatalf("after the queued limits: %d, want 200", code)
	}
}

// gql posts a GraphQL request to path (/graphql or /api/graphql) beside
// the REST root.
func (a api) gql(path, auth string, body any) (int, any) {
	a.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", strings.TrimSuffix(a.srv.URL, "/api/v3/")+path, bytes.NewReader(b))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		a.t.Fatalf("POST %s: body is not JSON: %v", path, err)
	}
	return resp.StatusCode, v
}

const armQuery = "mutation($input: EnablePullRequestAutoMergeInput!) { enablePullRequestAutoMerge(input: $input) { pullRequest { number autoMergeRequest { mergeMethod } } } }"

func arm(nodeID, method string) map[string]any {
	in := map[string]any{"pullRequestId": nodeID}
	if method != "" {
		in["mergeMethod"] = method
	}
	return map[string]any{"query": armQuery, "variables": map[string]any{"input": in}}
}

// requireGQLError checks a GraphQL error answer (GraphQL spec § 7.1.2:
// errors[] each with a message; GitHub adds type and path) and returns
// the first error.
func requireGQLError(t *testing.T, what string, code int, v any, wantData bool) map[string]any {
	t.Helper()
	if code != 200 {
		t.Fatalf("%s: %d, want 200 (GraphQL answers errors in the body)", what, code)
	}
	m := v.(map[string]any)
	errs, ok := m["errors"].([]any)
	if !ok || len(errs) == 0 {
		t.Fatalf("%s: errors %v, want a non-empty list", what, m["errors"])
	}
	e := requireFields(t, what+".errors[0]", errs[0], []string{"message"})
	if _, has := m["data"]; has != wantData {
		t.Fatalf("%s: data present %v, want %v", what, has, wantData)
	}
	if wantData {
		if d := m["data"].(map[string]any); d["enablePullRequestAutoMerge"] != nil {
			t.Fatalf("%s: data %v, want the failed field null", what, d)
		}
	}
	return e
}

// GitHub's GraphQL enablePullRequestAutoMerge (see graphql.go for the
// schema read) and the REST auto_merge field it sets
// (components/schemas/auto-merge: enabled_by, merge_method, commit_title,
// commit_message, all required; null when not armed).
func TestShapes_GraphQLEnableAutoMerge(t *testing.T) {
	t.Parallel()
	a := setup(t)
	auth := "Bearer " + tok
	_, _, v := a.do("POST", "/repos/o/r/pulls", auth, map[string]any{"title": "t", "head": "feat", "base": "main"})
	pr := v.(map[string]any)
	if pr["auto_merge"] != nil {
		t.Fatalf("auto_merge %v before arming, want null", pr["auto_merge"])
	}
	node := pr["node_id"].(string)

	for _, path := range []string{"/graphql", "/api/graphql"} {
		code, v := a.gql(path, "Bearer wrong", arm(node, "SQUASH"))
		if code != 401 {
			t.Fatalf("POST %s with a bad token: %d, want 401", path, code)
		}
		requireErrorBody(t, "graphql 401", v, false)
	}
	code, v := a.gql("/api/graphql", auth, arm("PR_nope", "SQUASH"))
	if e := requireGQLError(t, "unknown node", code, v, true); e["type"] != "NOT_FOUND" {
		t.Fatalf("unknown node: type %v, want NOT_FOUND", e["type"])
	}
	code, v = a.gql("/api/graphql", auth, arm(node, "FAST_FORWARD"))
	if e := requireGQLError(t, "bad mergeMethod", code, v, false); !strings.Contains(e["message"].(string), "MERGE, REBASE, SQUASH") {
		t.Fatalf("bad mergeMethod: %v, want the valid values named", e["message"])
	}
	code, v = a.gql("/graphql", auth, arm(node, "SQUASH"))
	if e := requireGQLError(t, "clean PR", code, v, true); e["type"] != "UNPROCESSABLE" || !strings.Contains(e["message"].(string), "is in clean status") {
		t.Fatalf("arming a PR with nothing to wait for: %v, want UNPROCESSABLE clean status", e)
	}
	a.srv.SetAllowAutoMerge("o/r", false)
	a.srv.SetChecksPending("o/r", true)
	code, v = a.gql("/graphql", auth, arm(node, "SQUASH"))
	if e := requireGQLError(t, "not allowed", code, v, true); e["message"] != "Auto merge is not allowed for this repository" {
		t.Fatalf("arming with allow_auto_merge off: %v", e)
	}
	a.srv.SetAllowAutoMerge("o/r", true)

	code, v = a.gql("/graphql", auth, arm(node, ""))
	if code != 200 || v.(map[string]any)["errors"] != nil {
		t.Fatalf("arm: %d %v", code, v)
	}
	got := v.(map[string]any)["data"].(map[string]any)["enablePullRequestAutoMerge"].(map[string]any)["pullRequest"].(map[string]any)["autoMergeRequest"].(map[string]any)["mergeMethod"]
	if got != "MERGE" {
		t.Fatalf("autoMergeRequest.mergeMethod %v, want MERGE (the input's default)", got)
	}
	_, _, v = a.do("GET", "/repos/o/r/pulls/1", auth, nil)
	m := requirePR(t, "armed PR", v, prRequired)
	am := requireFields(t, "auto_merge", m["auto_merge"], []string{"enabled_by", "merge_method", "commit_title", "commit_message"})
	if am["merge_method"] != "merge" || m["mergeable_state"] != "blocked" || m["merged"] != false {
		t.Fatalf("armed PR: auto_merge %v mergeable_state %v merged %v", am, m["mergeable_state"], m["merged"])
	}
	if code, _, v := a.do("PUT", "/repos/o/r/pulls/1/merge", auth, nil); code != 405 {
		t.Fatalf("merge while checks are pending: %d %v, want 405", code, v)
	}
	if err := a.srv.CompleteChecks("o/r"); err != nil {
		t.Fatal(err)
	}
	_, _, v = a.do("GET", "/repos/o/r/pulls/1", auth, nil)
	if m := v.(map[string]any); m["merged"] != true {
		t.Fatalf("after CompleteChecks: merged %v, want true", m["merged"])
	}
}
