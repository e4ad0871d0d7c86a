package inprocess

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// docs/contracts.md § The in-process twin: the same contract minus the
// transport. Direct serves a request as a server would — method, path,
// query, Host, headers and body reach the handler; status, headers written
// before the status, and body come back — and a handler's panic is an
// error, not a crash of the process.
func TestDirect_ServesAsAServerWould(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.RequestURI+" "+r.Host+" "+r.Header.Get("Authorization")+" "+string(b))
		w.WriteHeader(http.StatusConflict)
		w.Header().Set("X-Late", "ignored") // after the status: not sent
		io.WriteString(w, `{"code":"ECONFLICT"}`)
	})
	c := &http.Client{Transport: Direct(h)}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:9/v1/worker/submit?task_id=t1", strings.NewReader("body"))
	req.Header.Set("Authorization", "Bearer wh-x")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 || string(b) != `{"code":"ECONFLICT"}` || resp.ContentLength != int64(len(b)) {
		t.Errorf("answer: %d %q (length %d)", resp.StatusCode, b, resp.ContentLength)
	}
	if got, want := resp.Header.Get("X-Seen"), "POST /v1/worker/submit?task_id=t1 127.0.0.1:9 Bearer wh-x body"; got != want {
		t.Errorf("the handler saw %q; want %q", got, want)
	}
	if resp.Header.Get("X-Late") != "" {
		t.Error("a header set after the status was sent")
	}
	if _, err := c.Get("http://127.0.0.1:9/panic"); err == nil || !strings.Contains(err.Error(), "panicked: boom") {
		t.Errorf("a panicking handler: %v", err)
	}
}
