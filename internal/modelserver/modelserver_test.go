package modelserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The server answers only the two APIs, from the script; anything else is a
// JSON 4xx, never a crash; turns and visits count as documented.
func TestServer_AnswersFromTheScriptAndRefusesTheRest(t *testing.T) {
	srv := httptest.NewServer(&Server{Script: &Script{Rules: []Rule{{Match: "hello", Visits: []Visit{
		{Turns: []Turn{{Text: "first visit"}}},
		{Turns: []Turn{{Shell: "true"}, {Text: "second visit, turn 1"}}},
	}}}}})
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	user := `{"messages":[{"role":"user","content":"hello there"}]}`
	if code, body := post("/v1/messages", user); code != 200 || !strings.Contains(body, `"text":"first visit"`) || !strings.Contains(body, "event: message_stop") {
		t.Errorf("visit 1: %d %s", code, body)
	}
	if code, body := post("/v1/messages", user); code != 200 || !strings.Contains(body, `"name":"Bash"`) {
		t.Errorf("visit 2 turn 0 (a shell call): %d %s", code, body)
	}
	withTurn := `{"messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":[{"type":"tool_use","name":"Bash"}]},{"role":"user","content":[{"type":"tool_result"}]}]}`
	if code, body := post("/v1/messages", withTurn); code != 200 || !strings.Contains(body, "second visit, turn 1") {
		t.Errorf("visit 2 turn 1: %d %s", code, body)
	}
	if code, body := post("/v1/responses", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}]}`); code != 200 || !strings.Contains(body, "response.completed") {
		t.Errorf("responses: %d %s", code, body)
	}
	for _, bad := range []struct{ method, path, body string }{
		{"GET", "/v1/messages", ""}, {"POST", "/v1/messages", "not json"}, {"POST", "/v1/responses", "{}"}, {"POST", "/other", "{}"},
		{"POST", "/v1/messages", strings.Repeat("x", 10<<20)},
		{"POST", "/v1/messages", "null"}, {"POST", "/v1/messages", "[]"}, {"POST", "/v1/responses", `"x"`},
		{"POST", "/foo/bar/responses", "{}"},
	} {
		req, _ := http.NewRequest(bad.method, srv.URL+bad.path, strings.NewReader(bad.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", bad.method, bad.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || !json.Valid(b) {
			t.Errorf("%s %s: %d %q; want a JSON 4xx", bad.method, bad.path, resp.StatusCode, b)
		}
		if (bad.body == "null" || bad.body == "[]" || bad.body == `"x"`) && !strings.Contains(string(b), "want a JSON object") {
			t.Errorf("%s %s %s: %s; want it to say the body is not an object", bad.method, bad.path, bad.body, b)
		}
	}
	// A body declared over the limit is refused before it is read.
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", io.LimitReader(zeros{}, MaxBodyBytes+1))
	req.ContentLength = MaxBodyBytes + 1
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared %d bytes: %v %v; want 413", MaxBodyBytes+1, resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// Load refuses a script with a rule that cannot answer, naming it.
func TestLoad_RefusesBadScripts(t *testing.T) {
	for name, body := range map[string]string{
		"no visits":        "rules:\n  - match: x\n",
		"no match":         "rules:\n  - visits: [{turns: [{text: a}]}]\n",
		"unknown":          "rules: []\nbogus: 1\n",
		"empty":            "rules: []\n",
		"no turns":         "rules:\n  - match: x\n    visits: [{turns: []}]\n",
		"empty turn":       "rules:\n  - match: x\n    visits: [{turns: [{}]}]\n",
		"two kinds":        "rules:\n  - match: x\n    visits: [{turns: [{text: a, shell: b}]}]\n",
		"status 42":        "rules:\n  - match: x\n    visits: [{turns: [{error: 42}]}]\n",
		"cached":           "rules:\n  - match: x\n    visits: [{turns: [{text: a, input_tokens: 10, cached_tokens: 50}]}]\n",
		"negative":         "rules:\n  - match: x\n    visits: [{turns: [{text: a, input_tokens: -5}]}]\n",
		"headers on text":  "rules:\n  - match: x\n    visits: [{turns: [{text: a, headers: {retry-after: '1'}}]}]\n",
		"type on shell":    "rules:\n  - match: x\n    visits: [{turns: [{shell: a, error_type: rate_limit_error}]}]\n",
		"bad header name":  "rules:\n  - match: x\n    visits: [{turns: [{error: 429, headers: {'retry after': '1'}}]}]\n",
		"bad header value": "rules:\n  - match: x\n    visits: [{turns: [{error: 429, headers: {retry-after: \"1\\r\\nx: y\"}}]}]\n",
		"field over type":  "rules:\n  - match: x\n    visits: [{turns: [{error: 429, error_fields: {type: other}}]}]\n",
	} {
		f := filepath.Join(t.TempDir(), "s.yaml")
		os.WriteFile(f, []byte(body), 0o644)
		if _, err := Load(f); err == nil {
			t.Errorf("%s: Load accepted it", name)
		} else if name == "negative" && !strings.Contains(err.Error(), "turns[0].input_tokens: -5 is negative") {
			t.Errorf("negative: %v; want the field and the value named", err)
		}
	}
}

// An error turn answers with the status, the API's error type for it (or
// the scripted one), the scripted message, code and fields, and the
// headers the real APIs send with a 429 (retry-after,
// anthropic-ratelimit-*-reset, x-ratelimit-reset-*).
func TestServer_ErrorTurnsCarryTypeHeadersAndFields(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&Server{Script: &Script{Rules: []Rule{
		{Match: "overloaded", Visits: []Visit{{Turns: []Turn{{Error: 529, ErrorMessage: "Overloaded"}}}}},
		{Match: "limited", Visits: []Visit{{Turns: []Turn{{Error: 429, Headers: map[string]string{"retry-after": "37", "anthropic-ratelimit-requests-reset": "2026-12-04T18:00:00Z"}}}}}},
		{Match: "usage", Visits: []Visit{{Turns: []Turn{{Error: 429, ErrorType: "usage_limit_reached", ErrorCode: "usage", ErrorFields: map[string]any{"resets_at": 1796403600}}}}}},
	}}})
	defer srv.Close()
	for _, tc := range []struct {
		path, body string
		status     int
		header     string
		wantBody   string
	}{
		{"/v1/messages", `{"messages":[{"role":"user","content":"overloaded"}]}`, 529, "", `{"error":{"message":"Overloaded","type":"overloaded_error"},"type":"error"}`},
		{"/v1/responses", `{"input":"overloaded"}`, 529, "", `{"error":{"code":null,"message":"Overloaded","type":"server_error"}}`},
		{"/v1/messages", `{"messages":[{"role":"user","content":"limited"}]}`, 429, "retry-after: 37; anthropic-ratelimit-requests-reset: 2026-12-04T18:00:00Z", `{"error":{"message":"scripted error","type":"rate_limit_error"},"type":"error"}`},
		{"/v1/responses", `{"input":"limited"}`, 429, "retry-after: 37; anthropic-ratelimit-requests-reset: 2026-12-04T18:00:00Z", `{"error":{"code":null,"message":"scripted error","type":"requests"}}`},
		{"/v1/responses", `{"input":"usage"}`, 429, "", `{"error":{"code":"usage","message":"scripted error","resets_at":1796403600,"type":"usage_limit_reached"}}`},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var h []string
		for _, k := range []string{"retry-after", "anthropic-ratelimit-requests-reset"} {
			if v := resp.Header.Get(k); v != "" {
				h = append(h, k+": "+v)
			}
		}
		if resp.StatusCode != tc.status || string(b) != tc.wantBody || strings.Join(h, "; ") != tc.header {
			t.Errorf("%s %s: %d %s [%s]; want %d %s [%s]", tc.path, tc.body, resp.StatusCode, b, strings.Join(h, "; "), tc.status, tc.wantBody, tc.header)
		}
	}
}
