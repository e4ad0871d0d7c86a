package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The handle-fencing finding, reproduced as an attacker did it: two runs
// of one work dir (two `stratus run`s, or one `stratus host`) share the
// work dir's store and HMAC key, each serving its own worker API. An
// engine of run A keeps its handle; once A has ended, run B's API must
// not serve A's prompt for it (docs/security.md § Handles).
func TestHandle_AnotherRunsAPIRefusesIt(t *testing.T) {
	t.Parallel()
	const flowYAML = `flow:
  name: gated
  task_type: gated
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: draft, kind: agent, role_file: gated/draft.md }
    - { id: gate, kind: hitl, signal: approval }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: draft, to: gate }
    - { from: gate, to: publish, outcome: route:approve }
    - { from: gate, to: publish, outcome: route:deny }
`
	dir, taskA := setupHITLRun(t, "gated", flowYAML, "default:\n  report: ok\n")
	// The engine is the script engine behind a wrapper that keeps what an
	// engine holds: its handle, its task id and its API.
	spy := filepath.Join(dir, "spy.txt")
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	wrapper := `echo "$STRATUS_HANDLE $STRATUS_TASK_ID $STRATUS_API_URL" >> ` + spy + `; exec ` + stratusBin + ` engine script --scenario ` + filepath.Join(dir, "scenario.yaml")
	spyProvider, _ := json.Marshal(map[string]any{"command": "/bin/sh", "args": []string{"-c", wrapper}})
	cfg = strings.Replace(cfg, "primary: script", "primary: spy", 1)
	cfg = strings.Replace(cfg, "  allowed:\n", "  allowed:\n  - spy\n", 1)
	cfg = strings.Replace(cfg, "  providers:\n", "  providers:\n    spy: "+string(spyProvider)+"\n", 1)
	writeTestFile(t, cfgPath, cfg)
	taskB := filepath.Join(dir, "task-b.md")
	writeTestFile(t, taskB, strings.Replace(readFile(t, taskA), "id: t-gated", "id: t-gated-b", 1))

	a := startRun(t, dir, taskA)
	runA, _ := a.waiting(t)
	b := startRun(t, dir, taskB)
	runB, _ := b.waiting(t)
	lines := strings.Split(strings.TrimSpace(readFile(t, spy)), "\n")
	var handleA, tidA string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[1], runA+".") {
			handleA, tidA = f[0], f[1]
		}
	}
	if handleA == "" {
		t.Fatalf("no engine of run %s recorded its handle:\n%s", runA, strings.Join(lines, "\n"))
	}
	if r := runCLI(t, "approve", runA, "gate", "--dir", dir); r.code != ExitOK {
		t.Fatalf("approve %s: exit %d %s", runA, r.code, r.stderr)
	}
	if code := a.wait(t); code != ExitOK {
		t.Fatalf("run A exit %d\n%s", code, a.log())
	}

	var addr struct {
		APIURL string `json:"api_url"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/runs", runB+".json"))), &addr); err != nil || addr.APIURL == "" {
		t.Fatalf("run B's address: %v", err)
	}
	req, _ := http.NewRequest("GET", addr.APIURL+"/v1/worker/prompt?task_id="+tidA, nil)
	req.Header.Set("Authorization", "Bearer "+handleA)
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), runB) || strings.Contains(string(body), "Work on") {
		t.Errorf("run B's API answered run A's handle (run A ended) with %d %.300s; want 403 naming the run the API serves", resp.StatusCode, body)
	}

	if r := runCLI(t, "approve", runB, "gate", "--dir", dir); r.code != ExitOK {
		t.Fatalf("approve %s: exit %d %s", runB, r.code, r.stderr)
	}
	if code := b.wait(t); code != ExitOK {
		t.Fatalf("run B exit %d\n%s", code, b.log())
	}
	os.Remove(spy)
}
