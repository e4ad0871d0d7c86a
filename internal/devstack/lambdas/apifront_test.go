package lambdas_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

var fakeRoutes = []lambdas.Route{
	{Method: "POST", Path: "/v1/runs/{run_id}/nodes/{node}/hitl"},
	{Method: "GET", Path: "/v1/healthz"},
	{Method: "POST", Path: "/v1/upload"},
	{Method: "GET", Path: "/v1/fail"},
	{Method: "GET", Path: "/v1/slow"},
}

// A request through the API front reaches the function as a payload 2.0
// event, and the function's response (status, headers, cookies, a
// base64 body) comes back as HTTP — under the real emulator.
func TestAPIFront_TranslatesRequestAndResponse(t *testing.T) {
	fn := startFake(t, lambdas.Config{Timeout: 2 * time.Second})
	srv := httptest.NewServer(lambdas.APIFront(fakeRoutes, fn))
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/v1/runs/r-1/nodes/review/hitl?a=1&a=2&b=x", strings.NewReader(`{"approve":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Custom", "one")
	req.Header.Add("X-Custom", "two")
	req.Header.Set("Cookie", "c1=v1; c2=v2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Fake") != "yes" || resp.Header.Get("Set-Cookie") != "a=1; Path=/" {
		t.Fatalf("status %d, headers %v; want the function's 201, X-Fake and its cookie", resp.StatusCode, resp.Header)
	}
	var got struct {
		RouteKey, Method, Path, Query, Body, SourceIP, BodyHex string
		Headers, PathParameters                                map[string]string
		Base64                                                 bool
		Cookies                                                []string
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if got.RouteKey != "POST /v1/runs/{run_id}/nodes/{node}/hitl" || got.Method != "POST" || got.Path != "/v1/runs/r-1/nodes/review/hitl" ||
		got.Query != "a=1&a=2&b=x" || got.Body != `{"approve":true}` || got.Base64 || got.SourceIP != "127.0.0.1" {
		t.Errorf("the event as the function saw it: %+v", got)
	}
	if got.PathParameters["run_id"] != "r-1" || got.PathParameters["node"] != "review" {
		t.Errorf("path parameters %v", got.PathParameters)
	}
	if got.Headers["x-custom"] != "one,two" || got.Headers["content-type"] != "application/json" || got.Headers["host"] == "" ||
		got.Headers["x-forwarded-for"] != "127.0.0.1" || got.Headers["x-forwarded-proto"] != "http" {
		t.Errorf("headers %v; want them lowercased, repeated values comma-joined, host and x-forwarded-* set", got.Headers)
	}
	if strings.Join(got.Cookies, "|") != "c1=v1|c2=v2" {
		t.Errorf("cookies %v", got.Cookies)
	}

	// A binary body travels base64-encoded and arrives whole.
	bin := []byte{0, 1, 2, 0xff, 0xfe, 'x'}
	resp, err = http.Post(srv.URL+"/v1/upload", "application/octet-stream", bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &got); err != nil || !got.Base64 || got.BodyHex != hex.EncodeToString(bin) {
		t.Errorf("a binary body: %s (%v); want it base64-encoded in the event and whole in the function", body, err)
	}
}

// API Gateway's own answers: no route 404, the function's error 500, its
// timeout 503, a body over the limit 413.
func TestAPIFront_AnswersAsAPIGatewayDoes(t *testing.T) {
	fn := startFake(t, lambdas.Config{Timeout: time.Second})
	srv := httptest.NewServer(lambdas.APIFront(fakeRoutes, fn))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		body         io.Reader
		status       int
		message      string
	}{
		{"GET", "/v1/nowhere", nil, 404, "Not Found"},
		{"POST", "/v1/healthz", nil, 404, "Not Found"},
		{"GET", "/v1/fail", nil, 500, "Internal Server Error"},
		{"GET", "/v1/slow", nil, 503, "Service Unavailable"},
		{"POST", "/v1/upload", bytes.NewReader(make([]byte, 7<<20)), 413, "Request Entity Too Large"},
		{"POST", "/v1/upload", bytes.NewReader(make([]byte, 11<<20)), 413, "Request Entity Too Large"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, c.body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || string(b) != `{"message":"`+c.message+`"}` {
			t.Errorf("%s %s: %d %s; want %d {\"message\":%q}", c.method, c.path, resp.StatusCode, b, c.status, c.message)
		}
	}
	// After the timeout the function serves again.
	resp, err := http.Get(srv.URL + "/v1/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Errorf("after a timeout: %d; want the function's 201", resp.StatusCode)
	}
}

type invokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, p []byte) ([]byte, error) { return f(ctx, p) }

// A response that is not a response object is a 200 JSON body; a
// literal route wins over a parameter, and a method over ANY.
func TestAPIFront_InfersPlainResponsesAndPrefersLiteralRoutes(t *testing.T) {
	var seen string
	fn := invokerFunc(func(_ context.Context, p []byte) ([]byte, error) {
		var ev struct{ RouteKey string }
		json.Unmarshal(p, &ev)
		seen = ev.RouteKey
		if ev.RouteKey == "ANY /{proxy+}" {
			return nil, errors.New("unreachable")
		}
		return []byte(`{"plain":true}`), nil
	})
	h := lambdas.APIFront([]lambdas.Route{{Method: "ANY", Path: "/{proxy+}"}, {Method: "GET", Path: "/v1/{x}"}, {Method: "GET", Path: "/v1/healthz"}}, fn)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/healthz", nil))
	if rec.Code != 200 || rec.Body.String() != `{"plain":true}` || rec.Header().Get("Content-Type") != "application/json" || seen != "GET /v1/healthz" {
		t.Errorf("%d %s %v via %q", rec.Code, rec.Body, rec.Header(), seen)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/other", nil))
	if seen != "GET /v1/{x}" {
		t.Errorf("GET /v1/other went to %q", seen)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("DELETE", "/a/b/c", nil))
	if seen != "ANY /{proxy+}" {
		t.Errorf("DELETE /a/b/c went to %q", seen)
	}
}
