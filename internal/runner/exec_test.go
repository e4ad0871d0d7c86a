package runner

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/worker"
)

// execAPI is a worker API serving an exec payload (a checks or tool node).
type execAPI struct {
	mu        sync.Mutex
	spec      nodeexec.Spec
	onStats   func(worker.Stats)
	submitted []nodeexec.Result
	failed    []string
	stats     []worker.Stats
}

func (f *execAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/v1/worker/prompt":
		json.NewEncoder(w).Encode(worker.Payload{TaskID: "t1", Attempt: 1, Agent: "n", Prompt: "p", StepRef: "n#1", Exec: &f.spec})
	case "/v1/worker/submit":
		var res nodeexec.Result
		json.Unmarshal(body, &res)
		f.submitted = append(f.submitted, res)
		w.Write([]byte(`{}`))
	case "/v1/worker/result":
		f.failed = append(f.failed, string(body))
		w.Write([]byte(`{}`))
	case "/v1/worker/stats":
		var s worker.Stats
		json.Unmarshal(body, &s)
		f.stats = append(f.stats, s)
		if f.onStats != nil {
			f.onStats(s)
		}
		w.WriteHeader(204)
	default:
		w.WriteHeader(404)
	}
}

func execSetup(t *testing.T, spec nodeexec.Spec) (*execAPI, Options) {
	t.Helper()
	f := &execAPI{spec: spec}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, Options{APIURL: srv.URL, Handle: "wh-abcdefgh", SpoolDir: filepath.Join(t.TempDir(), "spool")}
}

// Heartbeats: while a check command runs silently, the runner re-posts its
// counters every heartbeat interval (so the Task state's HeartbeatSeconds
// does not lapse). The command here only finishes once a heartbeat arrived.
func TestRunExec_HeartbeatsWhileCommandsRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	beat := filepath.Join(dir, "beat")
	f, o := execSetup(t, nodeexec.Spec{Kind: nodeexec.KindChecks, Dir: dir, AllowedEnvironment: []string{"PATH"},
		Checks: &nodeexec.ChecksSpec{Checker: nodeexec.CommandProfile, CommandSets: []nodeexec.CommandSet{{Name: "s", TimeoutSeconds: 30,
			Commands: []nodeexec.Command{{Name: "wait-for-heartbeat", Argv: []string{"sh", "-c", "while [ ! -f beat ]; do sleep 0.01; done"}}}}}}})
	f.onStats = func(s worker.Stats) {
		if s.Steps != nil && s.EngineStartedAt == nil {
			os.WriteFile(beat, nil, 0o644)
		}
	}
	o.HeartbeatInterval = 20 * time.Millisecond
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.submitted) != 1 || f.submitted[0].Checks == nil {
		t.Fatalf("submitted %+v, failed %v", f.submitted, f.failed)
	}
	r := f.submitted[0].Checks.Runs[0]
	if r.Status != nodeexec.StatusExited || r.ExitCode != 0 {
		t.Errorf("the command did not see a heartbeat: %+v", r)
	}
	if f.stats[0].EngineStartedAt == nil || *f.stats[len(f.stats)-1].Steps != 1 {
		t.Errorf("stats = %+v", f.stats)
	}
}

// A tool node: the runner runs the tool and submits its result as a
// nodeexec.Result; a refused tool is a result too (launch_error), not a
// runner failure.
func TestRunExec_ToolResultSubmitted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tools := filepath.Join(dir, ".stratus/tools")
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "ok"), []byte("#!/bin/sh\ncat >/dev/null\necho '{\"outcome\":\"pass\"}'\n"), 0o755)
	for name, want := range map[string]string{"ok": nodeexec.StatusExited, "absent": nodeexec.StatusLaunchError} {
		f, o := execSetup(t, nodeexec.Spec{Kind: nodeexec.KindTool, Dir: dir, AllowedEnvironment: []string{"PATH"},
			Tool: &nodeexec.ToolSpec{Name: name, Dir: tools, TimeoutSeconds: 30, Input: json.RawMessage(`{"task_id":"t"}`)}})
		if err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if len(f.submitted) != 1 || f.submitted[0].Kind != nodeexec.KindTool || f.submitted[0].Tool.Status != want {
			t.Errorf("%s: submitted %+v", name, f.submitted)
		}
	}
}

// A spec the runner cannot run is reported as a failed attempt.
func TestRunExec_UnknownKindFailsTheAttempt(t *testing.T) {
	t.Parallel()
	f, o := execSetup(t, nodeexec.Spec{Kind: "hitl", Dir: t.TempDir()})
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.submitted) != 0 || len(f.failed) != 1 || !strings.Contains(f.failed[0], "checks, tool and publish nodes only") {
		t.Errorf("submitted %+v failed %v", f.submitted, f.failed)
	}
}
