package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// GitHub's GraphQL API answers at POST /graphql (github.com) and POST
// /api/graphql (GitHub Enterprise Server). The stand-in answers one
// mutation of it, the one GitHub offers auto-merge through (there is no
// REST operation for it). Its shapes were read from GitHub's published
// GraphQL schema (octokit/graphql-schema, schema.graphql, commit
// 82ff2d4780080e6929ebb95608cefa22dfa05ac7):
//
//   - Mutation.enablePullRequestAutoMerge(input:
//     EnablePullRequestAutoMergeInput!): EnablePullRequestAutoMergePayload
//   - input EnablePullRequestAutoMergeInput { pullRequestId: ID!,
//     mergeMethod: PullRequestMergeMethod = MERGE, expectedHeadOid,
//     commitHeadline, commitBody, authorEmail, clientMutationId }
//   - type EnablePullRequestAutoMergePayload { actor, clientMutationId,
//     pullRequest: PullRequest }; PullRequest.autoMergeRequest:
//     AutoMergeRequest { mergeMethod: PullRequestMergeMethod!, enabledAt,
//     ... }
//   - enum PullRequestMergeMethod { MERGE, REBASE, SQUASH }
//
// An error is answered with status 200 and the GraphQL specification's
// response shape (§ 7.1.2 Errors: "errors", a list of {message, path,
// locations, extensions}; the field that failed is null in "data"), with
// GitHub's own "type" (NOT_FOUND, FORBIDDEN, UNPROCESSABLE). GitHub
// refuses to arm auto-merge on a pull request that can merge now
// ("Pull request Pull request is in clean status", UNPROCESSABLE, as gh
// reports it: `GraphQL: Pull request Pull request is in clean status
// (enablePullRequestAutoMerge)`), and on a repository whose
// allow_auto_merge is off ("Auto merge is not allowed for this
// repository"); the stand-in does both. The selection set is not read:
// the payload always holds pullRequest { number, autoMergeRequest {
// mergeMethod } }.

const autoMergeField = "enablePullRequestAutoMerge"

func isGraphQL(path string) bool { return path == "/graphql" || path == "/api/graphql" }

// nodeID is a pull request's global node ID (REST node_id, GraphQL
// PullRequest.id): opaque to clients, decodable here.
func nodeID(r *repo, p *Pull) string {
	return "PR_" + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s/%s#%d", r.owner, r.name, p.Number)))
}

func (s *Server) pullByNode(id string) (*repo, *Pull) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "PR_"))
	if err != nil || !strings.HasPrefix(id, "PR_") {
		return nil, nil
	}
	full, num, ok := strings.Cut(string(b), "#")
	n, err := strconv.Atoi(num)
	r := s.repos[full]
	if !ok || err != nil || r == nil || n < 1 || n > len(r.pulls) {
		return nil, nil
	}
	return r, r.pulls[n-1]
}

type gqlError struct {
	Type       string         `json:"type,omitempty"`
	Path       []string       `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
	Message    string         `json:"message"`
}

// gqlFail answers a GraphQL error; the mutation's field is null in data
// unless the request did not validate (no data at all).
func gqlFail(w http.ResponseWriter, validated bool, e gqlError) {
	body := map[string]any{"errors": []gqlError{e}}
	if validated {
		body["data"] = map[string]any{autoMergeField: nil}
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) graphql(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		fail(w, http.StatusNotFound, "Not Found", "https://docs.github.com/graphql")
		return
	}
	var in struct {
		Query     string `json:"query"`
		Variables struct {
			Input struct {
				PullRequestID string `json:"pullRequestId"`
				MergeMethod   string `json:"mergeMethod"`
			} `json:"input"`
		} `json:"variables"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/graphql")
		return
	}
	if !strings.Contains(in.Query, autoMergeField+"(input: $input)") {
		gqlFail(w, false, gqlError{Message: "githubtest answers only mutation($input: EnablePullRequestAutoMergeInput!) { enablePullRequestAutoMerge(input: $input) { ... } }",
			Extensions: map[string]any{"code": "undefinedField"}})
		return
	}
	input := in.Variables.Input
	method := input.MergeMethod
	if method == "" {
		method = "MERGE"
	}
	if method != "MERGE" && method != "SQUASH" && method != "REBASE" {
		gqlFail(w, false, gqlError{Message: fmt.Sprintf("Variable $input of type EnablePullRequestAutoMergeInput! was provided invalid value for mergeMethod (Expected \"%s\" to be one of: MERGE, REBASE, SQUASH)", method),
			Extensions: map[string]any{"value": input, "problems": []map[string]any{{"path": []string{"mergeMethod"}, "explanation": fmt.Sprintf("Expected %q to be one of: MERGE, REBASE, SQUASH", method)}}}})
		return
	}
	path := []string{autoMergeField}
	r, p := s.pullByNode(input.PullRequestID)
	switch {
	case p == nil:
		gqlFail(w, true, gqlError{Type: "NOT_FOUND", Path: path, Message: fmt.Sprintf("Could not resolve to a node with the global id of '%s'", input.PullRequestID)})
		return
	case s.readOnly:
		gqlFail(w, true, gqlError{Type: "FORBIDDEN", Path: path, Message: "Resource not accessible by personal access token"})
		return
	}
	if err := refresh(r); err != nil {
		fail(w, http.StatusInternalServerError, "githubtest: reading the git repository: "+err.Error(), "https://docs.github.com/graphql")
		return
	}
	switch {
	case r.noAutoMerge:
		gqlFail(w, true, gqlError{Type: "UNPROCESSABLE", Path: path, Message: "Auto merge is not allowed for this repository"})
		return
	case p.State != "open":
		gqlFail(w, true, gqlError{Type: "UNPROCESSABLE", Path: path, Message: "Pull request Pull request is closed"})
		return
	case p.Blocked == "" && !r.checksPending:
		// Nothing to wait for: GitHub will not arm it (merge directly).
		gqlFail(w, true, gqlError{Type: "UNPROCESSABLE", Path: path, Message: "Pull request Pull request is in clean status"})
		return
	}
	p.AutoMerge = strings.ToLower(method)
	p.UpdatedAt = s.now().UTC()
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{autoMergeField: map[string]any{
		"pullRequest": map[string]any{"number": p.Number, "autoMergeRequest": map[string]any{"mergeMethod": method}},
	}}})
}

// checksExpected is GitHub's 405 for a merge a required check has not
// passed for.
const checksExpected = `Required status check "checks" is expected.`
