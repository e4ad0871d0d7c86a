package webui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"

	"github.com/stratusflow/stratus"
)

// The viewer's secret (docs/security.md § The run viewer's secret):
// loopback is no user boundary, so every request proves it comes from the
// user who started `stratus ui` — the secret once in the URL it printed
// (then a cookie), or the secret as a Bearer credential. Nothing is read
// before that, not even a static file.

// MinSecretLen is the shortest secret the viewer takes, in characters: a
// drawn one (NewSecret) is 64 hex digits, 256 bits.
const MinSecretLen = 32

// NewSecret returns a fresh secret: 32 bytes from crypto/rand as 64 hex
// digits (URL-safe as is).
func NewSecret() string {
	return hex.EncodeToString(randomBytes(32))
}

// randomBytes is n bytes from crypto/rand, which never fails on the
// systems Go supports (it crashes the program rather than return short).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// checkSecret refuses a secret too short to stand for the user.
func checkSecret(secret string) error {
	if len(secret) < MinSecretLen || strings.TrimSpace(secret) != secret || strings.ContainsAny(secret, " \t\r\n") {
		return stratus.FieldErrorf(stratus.EINVALID, "secret", "a %d-character secret; valid: at least %d characters, no white space (docs/security.md § The run viewer's secret)", len(secret), MinSecretLen)
	}
	return nil
}

// Secret is what opens the viewer: the ?token= of the URL `stratus ui`
// prints, or the Bearer credential of a script.
func (s *Server) Secret() string { return s.secret }

// LoginURL is the URL to print for a viewer reached at base
// ("http://127.0.0.1:7777"): base/?token=SECRET.
func (s *Server) LoginURL(base string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(s.secret)
}

// secretMatches compares a presented secret with the viewer's in constant
// time; hashing both first keeps the secret's length out of the timing too.
func (s *Server) secretMatches(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.secret))
	return hmac.Equal(a[:], b[:])
}

// derived is an HMAC of the secret for purpose: the cookie holds one, so
// the secret itself is never stored by the browser.
func (s *Server) derived(purpose string) string {
	m := hmac.New(sha256.New, []byte(s.secret))
	m.Write([]byte("stratus ui " + purpose))
	return hex.EncodeToString(m.Sum(nil))
}

// cookieName is per viewer (a fingerprint of its secret), so two viewers
// on one host at different ports do not overwrite each other's cookie
// (cookies ignore ports).
func (s *Server) cookieName() string { return "stratus-ui-" + s.derived("cookie name")[:12] }

// authenticated reports whether r carries the viewer's secret: as
// "Authorization: Bearer SECRET" when it has that header (a wrong one is
// refused even with a good cookie), else as the cookie a login set.
func (s *Server) authenticated(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, cred, _ := strings.Cut(strings.TrimSpace(a), " ")
		return strings.EqualFold(scheme, "Bearer") && s.secretMatches(strings.TrimSpace(cred))
	}
	c, err := r.Cookie(s.cookieName())
	return err == nil && hmac.Equal([]byte(c.Value), []byte(s.derived("session")))
}

// login answers a GET with ?token=: the right secret sets the session
// cookie (HttpOnly: no script reads it; SameSite=Strict: no other site's
// page sends it) and redirects to the same URL without the token, so it
// stays in neither the history nor a Referer; a wrong one is 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !s.secretMatches(q.Get("token")) {
		s.unauthorized(w, "The token in this URL is not this viewer's secret: a viewer draws a new one each time it starts.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: s.derived("session"), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	q.Del("token")
	to := r.URL.EscapedPath()
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.HasPrefix(to, "/\\") {
		to = "/" // never a redirect to another host ("//evil.example")
	}
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// unauthorized is the 401 of a request without the secret: a page of its
// own (no stylesheet, no script, nothing of any run) saying how to get in.
func (s *Server) unauthorized(w http.ResponseWriter, why string) {
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer realm="stratus ui"`)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stratus: open the viewer's URL</title></head>
<body><h1>401: this viewer needs its secret</h1>
<p>%s</p>
<p>Open the URL <code>stratus ui</code> printed when it started: it ends in <code>/?token=…</code>.
A script reads the viewer with <code>Authorization: Bearer &lt;that token&gt;</code> instead,
and answers a gate with <code>stratus approve|reject|answer</code>.</p>
</body></html>
`, html.EscapeString(why))
}
