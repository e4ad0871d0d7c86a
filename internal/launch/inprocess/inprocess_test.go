package inprocess

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
)

// fakeRunner is a Runner whose attempt is run by do; it records what the
// launcher hands it.
type fakeRunner struct {
	do func(ctx context.Context, a Attempt) error
	// code is what Ended returns.
	code int

	mu       sync.Mutex
	attempts []Attempt
	ended    []error
	endedLog []*slog.Logger
	closed   int
}

func (f *fakeRunner) Run(ctx context.Context, a Attempt) error {
	f.mu.Lock()
	f.attempts = append(f.attempts, a)
	f.mu.Unlock()
	return f.do(ctx, a)
}

func (f *fakeRunner) Ended(log *slog.Logger, err error) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, err)
	f.endedLog = append(f.endedLog, log)
	log.Error(err.Error())
	return f.code
}

func (f *fakeRunner) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

// launchAndWait launches one worker of spec on l and returns what its
// OnExit got.
func launchAndWait(t *testing.T, l *Launcher, spec launch.Spec) error {
	t.Helper()
	exited := make(chan error, 1)
	spec.OnExit = func(err error) { exited <- err }
	if _, err := l.Launch(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("OnExit was not called")
		return nil
	}
}

// The launcher hands its Runner the Spec's attempt, a client whose calls
// reach the Handler directly, and the step's runner log for the runner's
// records and the engine's stderr; an end without a result is said once
// (Runner.Ended, on that log) and reaches OnExit as the exit status
// Ended gives; StopAll has the Runner release what the workers shared.
func TestLauncher_HandsTheRunnerItsAttempt(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.URL.Path+" for "+r.Header.Get("Authorization"))
	})
	runErr := errors.New("the report could not be delivered")
	r := &fakeRunner{code: 5, do: func(ctx context.Context, a Attempt) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", a.APIURL+"/v1/worker/prompt", nil)
		req.Header.Set("Authorization", "Bearer "+a.Handle)
		resp, err := a.HTTP.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a.Log.Info(string(b))
		io.WriteString(a.EngineStderr, "an engine's stderr line\n")
		return runErr
	}}
	logPath := filepath.Join(t.TempDir(), "step", "runner.log")
	l := &Launcher{Handler: h, Self: "/usr/bin/stratus", Runner: r}
	got := launchAndWait(t, l, launch.Spec{APIURL: "http://127.0.0.1:9", Handle: "wh-x", TaskID: "t1", SpoolDir: "/spool", LogPath: logPath})

	var ee *ExitError
	if !errors.As(got, &ee) || ee.Code != 5 || !errors.Is(got, runErr) || got.Error() != "exit status 5" {
		t.Fatalf("OnExit got %v; want exit status 5 wrapping the runner's error", got)
	}
	if len(r.attempts) != 1 {
		t.Fatalf("the runner ran %d attempts; want 1", len(r.attempts))
	}
	a := r.attempts[0]
	if a.APIURL != "http://127.0.0.1:9" || a.Handle != "wh-x" || a.TaskID != "t1" || a.Self != "/usr/bin/stratus" || a.SpoolDir != "/spool" {
		t.Errorf("attempt %+v; want the spec's address, handle, task and spool dir and the launcher's Self", a)
	}
	if len(r.ended) != 1 || r.ended[0] != runErr || r.endedLog[0] != a.Log {
		t.Errorf("Ended got %v; want the runner's error once, on the attempt's log", r.ended)
	}
	b, err := os.ReadFile(logPath)
	for _, want := range []string{`"msg":"served /v1/worker/prompt for Bearer wh-x"`, "an engine's stderr line", `"level":"ERROR"`, runErr.Error()} {
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("runner log lacks %q: %v %s", want, err, b)
		}
	}
	if r.closed != 0 {
		t.Error("the runner was closed before StopAll")
	}
	l.StopAll("")
	if r.closed != 1 {
		t.Errorf("StopAll closed the runner %d times; want once", r.closed)
	}
}

// A delivered result is no error: OnExit gets nil and nothing is said of
// an end. Without a log path the runner gets a log that discards and no
// engine stderr (the engine keeps this process's).
func TestLauncher_DeliveredResultIsNoExit(t *testing.T) {
	r := &fakeRunner{do: func(ctx context.Context, a Attempt) error {
		a.Log.Info("discarded")
		return nil
	}}
	l := &Launcher{Handler: http.NotFoundHandler(), Runner: r}
	if got := launchAndWait(t, l, launch.Spec{Handle: "wh-x"}); got != nil {
		t.Errorf("OnExit got %v; want nil", got)
	}
	if len(r.ended) != 0 {
		t.Errorf("Ended was called with %v", r.ended)
	}
	if a := r.attempts[0]; a.Log == nil || a.EngineStderr != nil {
		t.Errorf("without a log path: Log %v, EngineStderr %v; want a discarding log and no stderr", a.Log, a.EngineStderr)
	}
	l.StopAll("")
}

// Stop cancels the worker's attempt with why it is stopped
// (launch.WithStopCause), for the runner's log to say.
func TestLauncher_StopTellsTheRunnerWhy(t *testing.T) {
	started := make(chan struct{})
	r := &fakeRunner{code: 1, do: func(ctx context.Context, a Attempt) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	l := &Launcher{Handler: http.NotFoundHandler(), Runner: r}
	exited := make(chan error, 1)
	id, err := l.Launch(context.Background(), launch.Spec{Handle: "wh-x", OnExit: func(err error) { exited <- err }})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := l.Stop(launch.WithStopCause(context.Background(), "the run was interrupted"), id); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-exited:
		if got == nil || !strings.Contains(errors.Unwrap(got).Error(), "the run was interrupted") {
			t.Errorf("OnExit got %v; want the stop's cause", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnExit was not called")
	}
	l.StopAll("")
}

// A launcher the wiring gave no Runner refuses to launch, naming what it
// lacks, rather than failing on a worker's goroutine.
func TestLauncher_WithoutARunnerRefusesToLaunch(t *testing.T) {
	l := &Launcher{Handler: http.NotFoundHandler()}
	if _, err := l.Launch(context.Background(), launch.Spec{Handle: "wh-x"}); err == nil || !strings.Contains(err.Error(), "no Runner") {
		t.Errorf("Launch without a Runner: %v; want an error naming the missing Runner", err)
	}
	l.StopAll("")
}
