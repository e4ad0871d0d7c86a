package inprocess

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/runner"
)

// issue 16 § 1: Direct serves a request as a server would — method, path,
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

// A worker whose runner cannot get its prompt ends as a runner process
// would (exit status 1), its error in the step's runner log as a JSON
// record; Stop and StopAll of ended workers are no errors.
func TestLauncher_EndWithoutResultReachesOnExit(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"EUNAUTHORIZED","message":"handle expired"}}`)
	})
	logPath := filepath.Join(t.TempDir(), "step", "runner.log")
	l := &Launcher{Handler: h, Self: "/bin/false"}
	exited := make(chan error, 1)
	id, err := l.Launch(context.Background(), launch.Spec{APIURL: "http://127.0.0.1:9", Handle: "wh-x", TaskID: "t1", LogPath: logPath,
		OnExit: func(err error) { exited <- err }})
	if err != nil {
		t.Fatal(err)
	}
	var got error
	select {
	case got = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("OnExit was not called")
	}
	var ee *ExitError
	if !errors.As(got, &ee) || ee.Code != runner.ExitFailed || got.Error() != "exit status 1" {
		t.Fatalf("OnExit got %v; want exit status 1", got)
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), `"level":"ERROR"`) || !strings.Contains(string(b), "handle expired") {
		t.Errorf("runner log: %v %s", err, b)
	}
	if err := l.Stop(context.Background(), id); err != nil {
		t.Errorf("Stop of an ended worker: %v", err)
	}
	l.StopAll("")
}
