package webui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/worker"
)

// secretViewer is a viewer over one ended run (r-7f3a, "Quarterly
// numbers": its event stream sends one snapshot and closes) with a
// planning step, whose Reply counts the replies that reach it.
func secretViewer(t *testing.T) (s *Server, replies *int) {
	t.Helper()
	s, st, _ := testViewer(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	st.CreateRun(ctx, stratus.Run{ID: "r-7f3a", TaskID: "t1", TaskTitle: "Quarterly numbers", Flow: "implementation", Status: stratus.RunDone, CreatedAt: start, EndedAt: time.Now()})
	st.CreateStep(ctx, stratus.Step{TID: "r-7f3a.planning.1", RunID: "r-7f3a", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1", Status: stratus.StepRunning, CreatedAt: start})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r-7f3a.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptRunning, StartedAt: start})
	replies = new(int)
	s.src.Reply = func(context.Context, string, string, worker.Reply) (*worker.HITLValue, error) {
		*replies++
		return &worker.HITLValue{}, nil
	}
	return s, replies
}

// serve is one request to s; cookie, when set, is sent as the browser
// would.
func serve(s *Server, method, target string, hdr http.Header, cookie *http.Cookie) *httptest.ResponseRecorder {
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(url.Values{"decision": {"approve"}, "csrf": {s.csrfToken("r-7f3a", "gate")}}.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, target, body)
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://"+r.Host)
	}
	for k, v := range hdr {
		r.Header[k] = v
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

// login visits /?token=SECRET and returns the cookie it sets.
func login(t *testing.T, s *Server) *http.Cookie {
	t.Helper()
	rec := serve(s, "GET", "/?token="+s.Secret(), nil, nil)
	cs := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("login: %d, cookies %v", rec.Code, cs)
	}
	return cs[0]
}

// docs/security.md § The run viewer's secret: every kind of route — the
// runs, a run's page, a step's page, the event stream, a static file, the
// reply form's POST, even an unknown path — answers 401 without the
// secret, with a page that says how to get in and shows nothing of any
// run; a reply never reaches the gate. With the cookie a login set, or the
// secret as a Bearer credential, each is served.
func TestViewer_EveryRouteNeedsTheSecret(t *testing.T) {
	t.Parallel()
	s, replies := secretViewer(t)
	cookie := login(t, s)
	routes := []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/?status=running"},
		{"GET", "/runs/r-7f3a"},
		{"GET", "/runs/r-7f3a/steps/planning/1"},
		{"GET", "/runs/r-7f3a/events"},
		{"GET", "/static/style.css"},
		{"GET", "/static/ui.js"},
		{"GET", "/nowhere"},
		{"HEAD", "/runs/r-7f3a"},
		{"POST", "/runs/r-7f3a/nodes/gate/hitl"},
	}
	forged := *cookie
	forged.Value = strings.Repeat("0", len(cookie.Value))
	refused := map[string]struct {
		hdr    http.Header
		cookie *http.Cookie
	}{
		"no credential":                  {nil, nil},
		"a wrong Bearer":                 {http.Header{"Authorization": {"Bearer " + strings.Repeat("a", 64)}}, nil},
		"a wrong Bearer with the cookie": {http.Header{"Authorization": {"Bearer nope"}}, cookie},
		"the secret as Basic":            {http.Header{"Authorization": {"Basic " + s.Secret()}}, nil},
		"a forged cookie":                {nil, &forged},
		"the secret as the cookie":       {nil, &http.Cookie{Name: cookie.Name, Value: s.Secret()}},
	}
	for _, rt := range routes {
		for name, c := range refused {
			rec := serve(s, rt.method, rt.path, c.hdr, c.cookie)
			body := rec.Body.String()
			if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s: %d; want 401 with WWW-Authenticate", rt.method, rt.path, name, rec.Code)
			}
			if rt.method != "HEAD" && (!strings.Contains(body, "/?token=") || strings.Contains(body, "r-7f3a") || strings.Contains(body, "Quarterly") ||
				strings.Contains(body, "planning") || strings.Contains(body, "/static/")) {
				t.Errorf("%s %s with %s: the 401 page %q; want how to get in and nothing of a run", rt.method, rt.path, name, body)
			}
		}
		for name, c := range map[string]struct {
			hdr    http.Header
			cookie *http.Cookie
		}{"the cookie": {nil, cookie}, "the secret as Bearer": {http.Header{"Authorization": {"bearer " + s.Secret()}}, nil}} {
			if rec := serve(s, rt.method, rt.path, c.hdr, c.cookie); rec.Code == http.StatusUnauthorized {
				t.Errorf("%s %s with %s: 401", rt.method, rt.path, name)
			}
		}
	}
	if *replies != 2 {
		t.Errorf("%d replies reached the gate; want 2 (with the cookie, and with the secret as Bearer; both with the form's token)", *replies)
	}
}

// docs/security.md § The run viewer's secret: visiting with ?token=SECRET
// sets an HttpOnly, SameSite=Strict cookie for the whole viewer that is
// not the secret itself, and redirects to the same URL without the token
// (the rest of its query kept), so the secret stays out of the history
// and of any Referer; a wrong token is 401 and sets nothing; the redirect
// never leaves the viewer; a POST's ?token= logs nobody in.
func TestViewer_TokenInTheURLSetsTheCookieAndIsDropped(t *testing.T) {
	t.Parallel()
	s, _ := secretViewer(t)
	rec := serve(s, "GET", "/runs/r-7f3a?token="+s.Secret()+"&x=1", nil, nil)
	cs := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/runs/r-7f3a?x=1" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("login: %d to %q (Cache-Control %q); want 303 to /runs/r-7f3a?x=1, no-store", rec.Code, rec.Header().Get("Location"), rec.Header().Get("Cache-Control"))
	}
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" || strings.Contains(cs[0].Value, s.Secret()) || cs[0].Value == "" {
		t.Fatalf("the login's cookie %v; want one, HttpOnly, SameSite=Strict, Path=/, not the secret", rec.Header()["Set-Cookie"])
	}
	if rec := serve(s, "GET", "/runs/r-7f3a", nil, cs[0]); rec.Code != 200 || !strings.Contains(rec.Body.String(), "Quarterly numbers") {
		t.Errorf("the run page with the cookie: %d", rec.Code)
	}
	for _, target := range []string{"/?token=" + strings.Repeat("0", 64), "/?token=", "/?token=" + s.Secret()[:40], "/?token=" + s.Secret() + "x"} {
		if rec := serve(s, "GET", target, nil, nil); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
			t.Errorf("GET %s: %d with cookies %v; want 401 and none", target, rec.Code, rec.Result().Cookies())
		}
	}
	if rec := serve(s, "GET", "//evil.example/x?token="+s.Secret(), nil, nil); rec.Header().Get("Location") != "/" {
		t.Errorf("a login at //evil.example/x redirects to %q; want / (never another host)", rec.Header().Get("Location"))
	}
	if rec := serve(s, "POST", "/runs/r-7f3a/nodes/gate/hitl?token="+s.Secret(), nil, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("a POST with ?token=: %d; want 401", rec.Code)
	}
}

// docs/security.md § The run viewer's secret: a viewer draws its own
// 256-bit secret, another each time; a secret it is given must be long.
func TestNew_DrawsASecretOrRefusesAShortOne(t *testing.T) {
	t.Parallel()
	a, _ := New(Source{})
	b, _ := New(Source{})
	if len(a.Secret()) != 64 || a.Secret() == b.Secret() {
		t.Errorf("drawn secrets %q and %q; want 64 hex digits each, different", a.Secret(), b.Secret())
	}
	if got := a.LoginURL("http://127.0.0.1:7777"); got != "http://127.0.0.1:7777/?token="+a.Secret() {
		t.Errorf("LoginURL = %q", got)
	}
	for _, secret := range []string{"short", strings.Repeat("x", MinSecretLen-1), strings.Repeat("x", MinSecretLen) + " y"} {
		if _, err := New(Source{Secret: secret}); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("New with secret %q: %v; want EINVALID", secret, err)
		}
	}
	if s, err := New(Source{Secret: strings.Repeat("k", MinSecretLen)}); err != nil || s.Secret() != strings.Repeat("k", MinSecretLen) {
		t.Errorf("New with a %d-character secret: %v", MinSecretLen, err)
	}
}
