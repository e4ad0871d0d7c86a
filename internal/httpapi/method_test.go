package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// RFC 9110 § 15.5.6: a known path asked with a method it does not serve is
// 405 with an Allow header and the JSON error shape; an unknown path stays
// 404.
func TestRouter_WrongMethodIs405WithAllow(t *testing.T) {
	h := New(nil)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodDelete, "/v1/worker/prompt", 405, "GET"},
		{http.MethodGet, "/v1/worker/submit", 405, "POST"},
		{http.MethodPut, "/v1/agents/x/render-size", 405, "GET"},
		{http.MethodGet, "/v1/nosuch", 404, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		var body ErrorBody
		if rec.Code != c.status || rec.Header().Get("Allow") != c.allow || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code == "" {
			t.Errorf("%s %s: %d Allow=%q %s; want %d Allow=%q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), rec.Body, c.status, c.allow)
		}
	}
}
