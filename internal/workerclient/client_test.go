package workerclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// docs/contracts.md § Output is a tool call: a body that is exactly
// @file:<abs-path> stands for that file's bytes; anything else is sent as is.
func TestResolveFileSentinel_AbsolutePathOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plan.md")
	if err := os.WriteFile(file, []byte("# Plan\n\nbytes from disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, want, wantErr string
	}{
		{"sentinel", "@file:" + file, "# Plan\n\nbytes from disk\n", ""},
		{"one trailing newline trimmed", "@file:" + file + "\n", "# Plan\n\nbytes from disk\n", ""},
		{"one trailing CRLF trimmed", "@file:" + file + "\r\n", "# Plan\n\nbytes from disk\n", ""},
		{"plain body unchanged", "just text\n", "just text\n", ""},
		{"sentinel not alone is a body", "@file:" + file + "\nmore", "@file:" + file + "\nmore", ""},
		{"two trailing newlines is a body", "@file:" + file + "\n\n", "@file:" + file + "\n\n", ""},
		{"sentinel mid-body is a body", "see @file:" + file, "see @file:" + file, ""},
		{"empty body", "", "", ""},
		{"relative path", "@file:plan.md", "", `"plan.md" is relative; the sentinel is @file:<absolute path>`},
		{"dot-relative path", "@file:./plan.md\n", "", "is relative"},
		{"no path", "@file:", "", "names no file"},
		{"missing file", "@file:" + filepath.Join(dir, "nope.md"), "", "no such file"},
		{"directory", "@file:" + dir, "", "is a directory"},
	} {
		got, err := workerclient.ResolveFileSentinel([]byte(tc.body))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("%s: err = %v, want EINVALID containing %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// recorder is a worker API double that records each request and answers
// with a canned status and body per path.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	ans  map[string]answer
}

type recorded struct {
	method, uri, ctype, auth, body string
}

type answer struct {
	status int
	ctype  string
	body   string
}

func (f *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)})
	a, ok := f.ans[r.URL.Path]
	f.mu.Unlock()
	if !ok {
		a = answer{status: 204}
	}
	if a.ctype != "" {
		w.Header().Set("Content-Type", a.ctype)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func setup(t *testing.T, ans map[string]answer) (*recorder, *workerclient.Client) {
	t.Helper()
	f := &recorder{ans: ans}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, &workerclient.Client{BaseURL: srv.URL + "/", Credential: "wh-abcdefgh", Retries: 1}
}

// Each method speaks its docs/contracts.md § Routes shape: method, path,
// query, content type and body.
func TestClient_RequestShapes(t *testing.T) {
	t.Parallel()
	sv := `{"step_ref":"a#1","node":"a","attempt":1,"outcome":"done"}`
	f, c := setup(t, map[string]answer{
		"/v1/worker/prompt/system": {200, "text/plain; charset=utf-8", "system bytes\n  exact "},
		"/v1/worker/submit":        {200, "application/json", sv},
		"/v1/worker/result":        {200, "application/json", sv},
	})
	ctx := context.Background()
	sys, err := c.System(ctx, "tid 1", 2)
	if err != nil || string(sys) != "system bytes\n  exact " {
		t.Errorf("System = %q, %v", sys, err)
	}
	if got, err := c.SubmitOK(ctx, "", []byte("reason"), false); err != nil || got.StepRef != "a#1" {
		t.Errorf("SubmitOK = %+v, %v", got, err)
	}
	if _, err := c.Submit(ctx, "t1", []byte("body")); err != nil {
		t.Error(err)
	}
	ok := true
	if _, err := c.Result(ctx, worker.ResultBody{TaskID: "t1", Value: json.RawMessage(`{"x":1}`), OK: &ok}); err != nil {
		t.Error(err)
	}
	if _, err := c.Result(ctx, worker.ResultBody{TaskID: "t1", OK: &ok}); err != nil {
		t.Error(err)
	}
	if err := c.Degradation(ctx, worker.DegradationBody{Tool: "grep", Error: "timeout", Fallback: "read"}); err != nil {
		t.Error(err)
	}
	want := []recorded{
		{"GET", "/v1/worker/prompt/system?attempt=2&task_id=tid+1", "", "Bearer wh-abcdefgh", ""},
		{"POST", "/v1/worker/submit?ok=false", "application/octet-stream", "Bearer wh-abcdefgh", "reason"},
		{"POST", "/v1/worker/submit?task_id=t1", "application/octet-stream", "Bearer wh-abcdefgh", "body"},
		{"POST", "/v1/worker/result", "application/json", "Bearer wh-abcdefgh", `{"task_id":"t1","value":{"x":1},"ok":true}`},
		{"POST", "/v1/worker/result", "application/json", "Bearer wh-abcdefgh", `{"task_id":"t1","value":null,"ok":true}`},
		{"POST", "/v1/worker/degradation", "application/json", "Bearer wh-abcdefgh", `{"tool":"grep","error":"timeout","fallback":"read"}`},
	}
	if len(f.reqs) != len(want) {
		t.Fatalf("requests:\n%+v\nwant\n%+v", f.reqs, want)
	}
	for i := range want {
		if f.reqs[i] != want[i] {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, f.reqs[i], want[i])
		}
	}
}

// A 4xx answer comes back at once as *APIError carrying the error shape's
// code, message and field (docs/contracts.md § Routes; httpapi's one JSON
// error shape).
func TestClient_4xxIsAPIErrorWithField(t *testing.T) {
	t.Parallel()
	f, c := setup(t, map[string]answer{
		"/v1/worker/degradation": {400, "application/json", `{"error":{"code":"invalid","message":"missing or empty","field":"tool"}}`},
	})
	err := c.Degradation(context.Background(), worker.DegradationBody{})
	var ae *workerclient.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "invalid" || ae.Field != "tool" || ae.Transient() {
		t.Fatalf("err = %#v", err)
	}
	if got, want := err.Error(), "worker API 400 invalid: tool: missing or empty"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if len(f.reqs) != 1 {
		t.Errorf("a 4xx was retried: %d requests", len(f.reqs))
	}
}

// The worker side (runner, `stratus worker`) refuses what the server does:
// Stratus's state, and a second name for a file.
func TestResolveFileSentinel_RefusesStateAndHardLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, ".stratus", "hmac.key")
	os.MkdirAll(filepath.Dir(key), 0o700)
	os.WriteFile(key, []byte("KEY"), 0o600)
	link := filepath.Join(dir, "report.md")
	if err := os.Link(key, link); err != nil {
		t.Fatal(err)
	}
	for path, why := range map[string]string{key: "Stratus's own state", link: "has 2 hard links"} {
		b, err := workerclient.ResolveFileSentinel([]byte("@file:" + path))
		if err == nil || !strings.Contains(err.Error(), why) || b != nil {
			t.Errorf("@file:%s = %q, %v; want refused: %s", path, b, err, why)
		}
	}
}

// docs/security.md § Part names: the runner's staging refuses a part name
// the server would (here one NFKC changes: ONE DOT LEADER for the dot)
// with the server's error, before anything is sent or uploaded; a valid
// name is sent.
func TestClient_ArtifactRefusesABadPartNameBeforeSending(t *testing.T) {
	t.Parallel()
	f, c := setup(t, nil)
	c.InlineBytes = 4 // the body would go through an upload
	ctx := context.Background()
	for _, name := range []string{"pl\u2024an.md", "../plan.md", ""} {
		err := c.Artifact(ctx, name, []byte("# the plan\n"))
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "name" {
			t.Errorf("Artifact(%+q) = %v; want EINVALID on field name", name, err)
		}
	}
	if len(f.reqs) != 0 {
		t.Fatalf("refused names were sent: %+v", f.reqs)
	}
	if err := c.Artifact(ctx, "plan.md", []byte("ok")); err != nil || len(f.reqs) != 1 || f.reqs[0].uri != "/v1/worker/artifact?name=plan.md" {
		t.Errorf("Artifact(plan.md) = %v, requests %+v", err, f.reqs)
	}
}
