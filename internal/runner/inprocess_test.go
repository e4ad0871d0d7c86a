package runner

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
	"github.com/stratusflow/stratus/internal/launch/inprocess"
	"github.com/stratusflow/stratus/internal/worker"
)

// launchInProcess launches one in-process worker of spec on l and returns
// its id and what its OnExit got.
func launchInProcess(t *testing.T, l *inprocess.Launcher, spec launch.Spec) (string, error) {
	t.Helper()
	exited := make(chan error, 1)
	spec.OnExit = func(err error) { exited <- err }
	id, err := l.Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		return id, err
	case <-time.After(30 * time.Second):
		t.Fatal("OnExit was not called")
		return "", nil
	}
}

// An in-process worker whose runner cannot get its prompt ends as a
// runner process would (exit status 1), its error in the step's runner
// log as a JSON record; Stop and StopAll of ended workers are no errors.
func TestInProcess_EndWithoutResultReachesOnExit(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"EUNAUTHORIZED","message":"handle expired"}}`)
	})
	logPath := filepath.Join(t.TempDir(), "step", "runner.log")
	l := &inprocess.Launcher{Handler: h, Self: "/bin/false", Runner: &InProcess{}}
	id, got := launchInProcess(t, l, launch.Spec{APIURL: "http://127.0.0.1:9", Handle: "wh-x", TaskID: "t1", LogPath: logPath})
	var ee *inprocess.ExitError
	if !errors.As(got, &ee) || ee.Code != ExitFailed || got.Error() != "exit status 1" {
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

// The in-process workers of one launcher run the same read-only copy of
// an engine file, written once and kept after their steps (the runner's
// engine files are the launcher's, not a step's); StopAll removes it.
func TestInProcess_WorkersShareEngineFilesUntilStopAll(t *testing.T) {
	l := &inprocess.Launcher{Self: "/bin/false", Runner: &InProcess{}}
	run := func() string {
		f, o := setup(t, "")
		f.engine.Command = "./missing/engine.sh"
		f.engine.Files = []worker.EngineFile{{Ref: "./missing/engine.sh", Name: "engine.sh", Executable: true,
			Body: []byte("#!/bin/sh\nread l\nprintf '{\"subrun_report\":\"%s\"}\\n' \"$0\"\n")}}
		l.Handler = f
		if _, err := launchInProcess(t, l, launch.Spec{APIURL: o.APIURL, Handle: o.Handle, SpoolDir: o.SpoolDir}); err != nil {
			t.Fatal(err, f.failed)
		}
		if len(f.submitted) != 1 {
			t.Fatalf("submitted %q failed %q", f.submitted, f.failed)
		}
		return f.submitted[0]
	}
	first, second := run(), run()
	if first != second || !strings.HasSuffix(first, "/engine.sh") || strings.HasPrefix(first, "./missing") {
		t.Fatalf("the two workers ran %q and %q; want one shared copy", first, second)
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("the shared copy is gone after its steps: %v", err)
	}
	l.StopAll("")
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("StopAll left the engine file: %v", err)
	}
}
