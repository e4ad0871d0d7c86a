package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// served is a host serving an installed work dir in this process.
type served struct {
	dir    string
	client *Client
}

// serve installs a config into a fresh work dir, starts its host in this
// process and returns a client of it; the host stops when the test ends.
// The work dir is directly in the temporary directory, so that its socket
// is DIR/.stratus/host/host.sock.
func serve(t *testing.T) served {
	t.Helper()
	dir, err := os.MkdirTemp("", "stratus-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg, err := config.Marshal(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, orchestrator.StateDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, orchestrator.ConfigFile), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Host{Dir: dir, Self: "/bin/false"}).Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(dir)
		if err == nil {
			return served{dir: dir, client: c}
		}
		select {
		case err := <-done:
			t.Fatalf("the host ended before it served: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host does not serve: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A start request naming an existing run's id with a task that cannot run
// is refused, and the existing run's files and record stay as they were
// (the finding: the refused start removed the run's directory while the
// database still listed it). Nothing a request that fails validation
// names is deleted; a new run never reuses an existing run's directory.
func TestHost_ARefusedStartLeavesAnExistingRunAlone(t *testing.T) {
	t.Parallel()
	s := serve(t)
	state := filepath.Join(s.dir, orchestrator.StateDir)
	const id = "r-20260101T000000-abcdef"
	st, err := sqlite.Open(filepath.Join(state, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateRun(ctx, stratus.Run{ID: id, TaskID: "t1", Flow: "tiny", Status: stratus.RunDone, WorkDir: s.dir, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(state, orchestrator.RunsDir, id, "run.log"):                 "run " + id + ": done\n",
		filepath.Join(state, orchestrator.RunsDir, id, "bundle", "manifest.json"): "{}\n",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, req := range map[string]StartRequest{
		"missing task":  {RunID: id, Task: filepath.Join(s.dir, "no-such-task.md")},
		"relative task": {RunID: id, Task: "task.md"},
		"bad run id":    {RunID: "../runs/" + id, Task: filepath.Join(s.dir, "no-such-task.md")},
	} {
		_, err := s.client.Start(ctx, req)
		if code := stratus.ErrorCode(err); code != stratus.ECONFLICT && code != stratus.EINVALID && code != stratus.ENOTFOUND {
			t.Errorf("%s: Start = %v (%s); want a 4xx refusal", name, err, code)
		}
	}
	for p, body := range files {
		if b, err := os.ReadFile(p); err != nil || string(b) != body {
			t.Errorf("%s after the refused starts: %q, %v; want %q", p, b, err, body)
		}
	}
	if r, err := st.GetRun(ctx, id); err != nil || r.Status != stratus.RunDone {
		t.Errorf("the existing run after the refused starts: %+v, %v", r, err)
	}
	// A fresh id with a task that cannot run leaves nothing behind.
	const fresh = "r-20260101T000000-fedcba"
	if _, err := s.client.Start(ctx, StartRequest{RunID: fresh, Task: filepath.Join(s.dir, "no-such-task.md")}); err == nil {
		t.Error("Start of a missing task succeeded")
	}
	if _, err := os.Lstat(filepath.Join(state, orchestrator.RunsDir, fresh)); !os.IsNotExist(err) {
		t.Errorf("a refused new run left its directory: %v", err)
	}
}
