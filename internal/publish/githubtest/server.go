package githubtest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the GitHub REST API stand-in. Its URL is the API root a
// client is given as a GitHub Enterprise base URL (it answers both at /
// and under /api/v3/).
type Server struct {
	URL string

	srv   *http.Server
	ln    net.Listener
	root  string // http://host:port, the web pages' root
	token string
	now   func() time.Time

	mu       sync.Mutex
	repos    map[string]*repo
	rate     []RateLimit
	requests int
	readOnly bool
	hideList int
}

type repo struct {
	owner, name string
	branches    map[string]string // name → head sha
	pulls       []*Pull
	// bare, when set, is the bare git repository the branches are read
	// from and merges are made in (AddGitRepo).
	bare string
	// checksPending keeps every open PR waiting for checks
	// (SetChecksPending): merges are refused and auto-merge stays armed.
	checksPending bool
	// noAutoMerge is the repository setting allow_auto_merge off.
	noAutoMerge bool
}

// Pull is one pull request as the stand-in holds it.
type Pull struct {
	Number         int
	Title, Body    string
	Head, Base     string // branch names
	HeadSHA        string
	BaseSHA        string
	State          string // "open" or "closed"
	Merged         bool
	MergedAt       *time.Time
	MergeCommitSHA string
	MergeMethod    string // how it was merged: merge, squash, rebase, or "hand"
	// Blocked, when set, makes merge answer 405 with this message (a
	// branch protection stand-in); mergeable_state reads "blocked".
	Blocked string
	// AutoMerge is the merge method auto-merge was armed with
	// (enablePullRequestAutoMerge; merge, squash or rebase), "" when not
	// armed.
	AutoMerge string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RateLimit is one rate-limited answer, queued by RateLimitNext.
type RateLimit struct {
	// Primary: 403 with x-ratelimit-remaining 0 and x-ratelimit-reset
	// (epoch seconds, now+RetryAfter). Otherwise the secondary limit:
	// 429 with Retry-After (seconds).
	Primary    bool
	RetryAfter time.Duration
	// Status overrides the answer's status: GitHub answers either limit
	// with 403 or 429.
	Status int
}

// New starts the stand-in on 127.0.0.1 (Start) for a test; it accepts
// only token and is closed when the test ends.
func New(t testing.TB, token string) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start serves the stand-in on addr (host:port; port 0 picks one) until
// Close; it accepts only token. URL is then http://addr/api/v3/. Errors:
// addr cannot be listened on.
func Start(addr, token string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("github stand-in: listen on %s: %w", addr, err)
	}
	s := &Server{token: token, now: time.Now, repos: map[string]*repo{}, ln: ln}
	s.root = "http://" + ln.Addr().String()
	s.URL = s.root + "/api/v3/"
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving and closes every connection.
func (s *Server) Close() { _ = s.srv.Close() }

// SetNow replaces the stand-in's clock (x-ratelimit-reset, timestamps).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// AddRepo creates owner/name with branches (name → head sha).
func (s *Server) AddRepo(owner, name string, branches map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := map[string]string{}
	for k, v := range branches {
		b[k] = v
	}
	s.repos[owner+"/"+name] = &repo{owner: owner, name: name, branches: b}
}

// SetBranch points branch of owner/name at sha (a push).
func (s *Server) SetBranch(full, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[full].branches[branch] = sha
	for _, p := range s.repos[full].pulls {
		if p.State == "open" && p.Head == branch {
			p.HeadSHA = sha
		}
	}
}

// DeleteBranch removes branch of owner/name (e.g. a missing pr_base).
func (s *Server) DeleteBranch(full, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.repos[full].branches, branch)
}

// MergeByHand merges PR number as a person would on the web page (a
// merge commit). In a git-backed repository it is the real merge; it
// panics when that fails (a conflict, a hook's refusal).
func (s *Server) MergeByHand(full string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[full]
	if err := refresh(r); err != nil {
		panic(err)
	}
	p := r.pulls[number-1]
	if refused, err := s.merge(r, p, "hand", "", ""); err != nil || refused != "" {
		panic(fmt.Sprintf("githubtest: merging %s#%d by hand: %v%s", full, number, err, refused))
	}
}

// SetChecksPending makes the open pull requests of owner/name wait for
// checks (pending true): a merge answers 405 (a required status check is
// expected), mergeable_state reads "blocked", and auto-merge, once armed,
// stays armed until CompleteChecks.
func (s *Server) SetChecksPending(full string, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[full].checksPending = pending
}

// CompleteChecks ends the pending checks of owner/name (SetChecksPending
// false) and merges each open pull request armed for auto-merge, by its
// method, as GitHub does once the checks pass. One that cannot merge (a
// conflict, a hook's refusal) stays open with auto-merge disarmed; the
// error names it.
func (s *Server) CompleteChecks(full string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[full]
	r.checksPending = false
	if err := refresh(r); err != nil {
		return err
	}
	var errs []error
	for _, p := range r.pulls {
		if p.State != "open" || p.AutoMerge == "" || p.Blocked != "" {
			continue
		}
		refused, err := s.merge(r, p, p.AutoMerge, "", "")
		if err == nil && refused != "" {
			err = errors.New(refused)
		}
		if err != nil {
			p.AutoMerge = ""
			errs = append(errs, fmt.Errorf("%s#%d: auto-merge: %w", full, p.Number, err))
		}
	}
	return errors.Join(errs...)
}

// SetAllowAutoMerge is the repository setting allow_auto_merge (on by
// default here; off by default on GitHub): off, enablePullRequestAutoMerge
// answers "Auto merge is not allowed for this repository".
func (s *Server) SetAllowAutoMerge(full string, allow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[full].noAutoMerge = !allow
}

// Block makes merging PR number answer 405 with message.
func (s *Server) Block(full string, number int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[full].pulls[number-1].Blocked = message
}

// RateLimitNext makes the next len(limits) requests answer rate-limited,
// one each.
func (s *Server) RateLimitNext(limits ...RateLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = append(s.rate, limits...)
}

// SetReadOnly makes the token read-only: every write (create, update,
// merge) answers 403 "Resource not accessible by personal access token".
func (s *Server) SetReadOnly(ro bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readOnly = ro
}

// HideFromList makes the next n list requests answer an empty list, as a
// list that has not caught up with a pull request just opened (or one
// opened by a concurrent publisher between a list and a create).
func (s *Server) HideFromList(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hideList = n
}

// Pulls returns copies of owner/name's pull requests, by number.
func (s *Server) Pulls(full string) []Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = refresh(s.repos[full])
	var out []Pull
	for _, p := range s.repos[full].pulls {
		out = append(out, *p)
	}
	return out
}

// Branch returns the head sha of branch ("" when missing).
func (s *Server) Branch(full, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = refresh(s.repos[full])
	return s.repos[full].branches[branch]
}

// Requests is how many requests reached the stand-in.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// merge merges p by method (merge, squash, rebase, or "hand": a merge
// commit) with GitHub's default commit title and message unless given.
// In memory it makes up a commit sha; in a git-backed repository it is
// the real merge (gitMerge). refused is why GitHub would answer 405, with
// p left open.
func (s *Server) merge(r *repo, p *Pull, method, title, message string) (refused string, err error) {
	var sha string
	if r.bare == "" {
		sum := sha1.Sum([]byte(fmt.Sprintf("%s/%s#%d:%s:%s", r.owner, r.name, p.Number, p.HeadSHA, method)))
		sha = hex.EncodeToString(sum[:])
		r.branches[p.Base] = sha
	} else {
		if title == "" {
			switch method {
			case "squash":
				title = fmt.Sprintf("%s (#%d)", p.Title, p.Number)
			default:
				title = fmt.Sprintf("Merge pull request #%d from %s/%s", p.Number, r.owner, p.Head)
				if message == "" {
					message = p.Title
				}
			}
		}
		if sha, refused, err = gitMerge(r, p, method, title, message); err != nil || refused != "" {
			return refused, err
		}
		if err := refresh(r); err != nil {
			return "", err
		}
	}
	now := s.now().UTC()
	p.State, p.Merged, p.MergedAt, p.MergeMethod, p.UpdatedAt = "closed", true, &now, method, now
	p.MergeCommitSHA = sha
	return "", nil
}

const docsURL = "https://docs.github.com/rest/pulls/pulls"

// errorBody is GitHub's error shape (components/schemas/basic-error and
// validation-error of the REST description).
type errorBody struct {
	Message          string        `json:"message"`
	Errors           []errorDetail `json:"errors,omitempty"`
	DocumentationURL string        `json:"documentation_url"`
	Status           string        `json:"status,omitempty"`
}

type errorDetail struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg, doc string, details ...errorDetail) {
	writeJSON(w, status, errorBody{Message: msg, Errors: details, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

func validation(w http.ResponseWriter, doc string, details ...errorDetail) {
	fail(w, http.StatusUnprocessableEntity, "Validation Failed", doc, details...)
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if len(s.rate) > 0 {
		rl := s.rate[0]
		s.rate = s.rate[1:]
		secs := int(rl.RetryAfter / time.Second)
		status := rl.Status
		if rl.Primary {
			if status == 0 {
				status = http.StatusForbidden
			}
			w.Header().Set("X-Ratelimit-Limit", "5000")
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Used", "5000")
			w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(s.now().Add(rl.RetryAfter).Unix(), 10))
			w.Header().Set("X-Ratelimit-Resource", "core")
			fail(w, status, "API rate limit exceeded for user ID 1.", "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits")
			return
		}
		if status == 0 {
			status = http.StatusTooManyRequests
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		fail(w, status, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
		return
	}
	if !s.authorized(req.Header.Get("Authorization")) {
		doc := "https://docs.github.com/rest"
		if isGraphQL(req.URL.Path) {
			doc = "https://docs.github.com/graphql"
		}
		fail(w, http.StatusUnauthorized, "Bad credentials", doc)
		return
	}
	if isGraphQL(req.URL.Path) {
		s.graphql(w, req)
		return
	}
	if s.readOnly && req.Method != http.MethodGet {
		fail(w, http.StatusForbidden, "Resource not accessible by personal access token", docsURL)
		return
	}
	path := strings.TrimPrefix(req.URL.Path, "/api/v3")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// repos/{owner}/{repo}/pulls[/{n}[/merge]]
	if len(parts) < 4 || parts[0] != "repos" || parts[3] != "pulls" || len(parts) > 6 {
		fail(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
		return
	}
	r := s.repos[parts[1]+"/"+parts[2]]
	if r == nil {
		// GitHub answers 404 for a repository the token cannot see.
		fail(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/pulls/pulls")
		return
	}
	if err := refresh(r); err != nil {
		fail(w, http.StatusInternalServerError, "githubtest: reading the git repository: "+err.Error(), "https://docs.github.com/rest")
		return
	}
	if len(parts) == 4 {
		switch req.Method {
		case http.MethodGet:
			s.list(w, req, r)
		case http.MethodPost:
			s.create(w, req, r)
		default:
			fail(w, http.StatusNotFound, "Not Found", docsURL)
		}
		return
	}
	n, err := strconv.Atoi(parts[4])
	if err != nil || n < 1 || n > len(r.pulls) {
		fail(w, http.StatusNotFound, "Not Found", docsURL+"#get-a-pull-request")
		return
	}
	p := r.pulls[n-1]
	switch {
	case len(parts) == 5 && req.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.full(r, p))
	case len(parts) == 5 && req.Method == http.MethodPatch:
		s.update(w, req, r, p)
	case len(parts) == 6 && parts[5] == "merge" && req.Method == http.MethodPut:
		s.mergeReq(w, req, r, p)
	default:
		fail(w, http.StatusNotFound, "Not Found", docsURL)
	}
}

// decodeOptional decodes req's JSON body into v; an empty body is an
// empty object.
func decodeOptional(req *http.Request, v any) error {
	err := json.NewDecoder(req.Body).Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func (s *Server) authorized(h string) bool {
	for _, scheme := range []string{"Bearer ", "token "} {
		if t, ok := strings.CutPrefix(h, scheme); ok {
			return s.token != "" && t == s.token
		}
	}
	return false
}

// list is pulls/list: state (open|closed|all, default open), head
// ("user:ref-name"), base.
func (s *Server) list(w http.ResponseWriter, req *http.Request, r *repo) {
	q := req.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		validation(w, docsURL+"#list-pull-requests", errorDetail{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	var headOwner, headRef string
	if h := q.Get("head"); h != "" {
		var ok bool
		headOwner, headRef, ok = strings.Cut(h, ":")
		if !ok {
			headOwner, headRef = h, ""
		}
	}
	out := []map[string]any{}
	if s.hideList > 0 {
		s.hideList--
		writeJSON(w, http.StatusOK, out)
		return
	}
	for i := len(r.pulls) - 1; i >= 0; i-- { // newest first (sort=created, direction=desc)
		p := r.pulls[i]
		if state != "all" && p.State != state {
			continue
		}
		if headOwner != "" && (headOwner != r.owner || (headRef != "" && p.Head != headRef)) {
			continue
		}
		if b := q.Get("base"); b != "" && p.Base != b {
			continue
		}
		out = append(out, s.simple(r, p))
	}
	writeJSON(w, http.StatusOK, out)
}

// create is pulls/create: title, head, base, body (draft, issue,
// maintainer_can_modify accepted and ignored).
func (s *Server) create(w http.ResponseWriter, req *http.Request, r *repo) {
	doc := docsURL + "#create-a-pull-request"
	var in struct {
		Title *string `json:"title"`
		Head  *string `json:"head"`
		Base  *string `json:"base"`
		Body  *string `json:"body"`
		Issue *int    `json:"issue"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	var missing []errorDetail
	for _, f := range []struct {
		name string
		v    *string
	}{{"head", in.Head}, {"base", in.Base}} {
		if f.v == nil || *f.v == "" {
			missing = append(missing, errorDetail{Resource: "PullRequest", Field: f.name, Code: "missing_field"})
		}
	}
	if in.Title == nil && in.Issue == nil {
		missing = append(missing, errorDetail{Resource: "PullRequest", Field: "title", Code: "missing_field"})
	}
	if len(missing) > 0 {
		validation(w, doc, missing...)
		return
	}
	head := *in.Head
	if o, ref, ok := strings.Cut(head, ":"); ok {
		if o != r.owner {
			validation(w, doc, errorDetail{Resource: "PullRequest", Field: "head", Code: "invalid"})
			return
		}
		head = ref
	}
	headSHA, okH := r.branches[head]
	baseSHA, okB := r.branches[*in.Base]
	var bad []errorDetail
	if !okB {
		bad = append(bad, errorDetail{Resource: "PullRequest", Field: "base", Code: "invalid"})
	}
	if !okH {
		bad = append(bad, errorDetail{Resource: "PullRequest", Field: "head", Code: "invalid"})
	}
	if len(bad) > 0 {
		validation(w, doc, bad...)
		return
	}
	for _, p := range r.pulls {
		if p.State == "open" && p.Head == head && p.Base == *in.Base {
			validation(w, doc, errorDetail{Resource: "PullRequest", Code: "custom", Message: fmt.Sprintf("A pull request already exists for %s:%s.", r.owner, head)})
			return
		}
	}
	if headSHA == baseSHA || (r.bare != "" && contains(r, baseSHA, headSHA)) {
		validation(w, doc, errorDetail{Resource: "PullRequest", Code: "custom", Message: fmt.Sprintf("No commits between %s and %s", *in.Base, head)})
		return
	}
	now := s.now().UTC()
	p := &Pull{Number: len(r.pulls) + 1, Head: head, Base: *in.Base, HeadSHA: headSHA, BaseSHA: baseSHA,
		State: "open", CreatedAt: now, UpdatedAt: now}
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	r.pulls = append(r.pulls, p)
	body := s.full(r, p)
	w.Header().Set("Location", body["url"].(string))
	writeJSON(w, http.StatusCreated, body)
}

// update is pulls/update: title, body, state (open|closed), base.
func (s *Server) update(w http.ResponseWriter, req *http.Request, r *repo, p *Pull) {
	doc := docsURL + "#update-a-pull-request"
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	// The request body is optional (requestBody.required false).
	if err := decodeOptional(req, &in); err != nil {
		fail(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		validation(w, doc, errorDetail{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	if in.Base != nil {
		if _, ok := r.branches[*in.Base]; !ok {
			validation(w, doc, errorDetail{Resource: "PullRequest", Field: "base", Code: "invalid"})
			return
		}
		p.Base = *in.Base
	}
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	if in.State != nil && !p.Merged {
		p.State = *in.State
	}
	p.UpdatedAt = s.now().UTC()
	writeJSON(w, http.StatusOK, s.full(r, p))
}

// mergeReq is pulls/merge: commit_title, commit_message, sha,
// merge_method (merge|squash|rebase). 200 merged; 405 not mergeable;
// 409 sha is not the head; 422 invalid input.
func (s *Server) mergeReq(w http.ResponseWriter, req *http.Request, r *repo, p *Pull) {
	doc := docsURL + "#merge-a-pull-request"
	var in struct {
		CommitTitle   *string `json:"commit_title"`
		CommitMessage *string `json:"commit_message"`
		SHA           *string `json:"sha"`
		MergeMethod   *string `json:"merge_method"`
	}
	// The request body is optional (requestBody.required false).
	if err := decodeOptional(req, &in); err != nil {
		fail(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	method := "merge"
	if in.MergeMethod != nil {
		method = *in.MergeMethod
	}
	if method != "merge" && method != "squash" && method != "rebase" {
		validation(w, doc, errorDetail{Resource: "PullRequest", Field: "merge_method", Code: "invalid"})
		return
	}
	var title, message string
	if in.CommitTitle != nil {
		title = *in.CommitTitle
	}
	if in.CommitMessage != nil {
		message = *in.CommitMessage
	}
	switch {
	case p.Merged || p.State != "open":
		fail(w, http.StatusMethodNotAllowed, notMergeable, doc)
	case p.Blocked != "":
		fail(w, http.StatusMethodNotAllowed, p.Blocked, doc)
	case r.checksPending:
		fail(w, http.StatusMethodNotAllowed, checksExpected, doc)
	case in.SHA != nil && *in.SHA != "" && *in.SHA != p.HeadSHA:
		fail(w, http.StatusConflict, "Head branch was modified. Review and try the merge again.", doc)
	default:
		refused, err := s.merge(r, p, method, title, message)
		switch {
		case err != nil:
			fail(w, http.StatusInternalServerError, "githubtest: "+err.Error(), doc)
		case refused != "":
			fail(w, http.StatusMethodNotAllowed, refused, doc)
		default:
			writeJSON(w, http.StatusOK, map[string]any{"sha": p.MergeCommitSHA, "merged": true, "message": "Pull Request successfully merged"})
		}
	}
}
