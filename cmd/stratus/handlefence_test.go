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

// handleEngine records the handle and task id it was started with in
// handles.txt, then works while the file slow exists.
const handleEngine = `read line
echo "$STRATUS_HANDLE $STRATUS_TASK_ID" >> handles.txt
while [ -f slow ]; do sleep 0.1; done
printf '{"subrun_report": "ok"}\n'
`

// The old-handle finding of a hardening review, reproduced as the tester
// did it: the planning#1 handle from before `stratus cancel` got GET
// /v1/worker/prompt 200 on the resumed run's API. A handle dies with its
// attempt (docs/security.md § Handles): cancelled, resumed, the old handle
// gets 409 naming the run and its attempt, while the resumed step's own
// handle reads its prompt and the run ends done.
func TestHandle_OldAttemptsHandleRefusedAfterCancelAndResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), handleEngine)
	usePrimaryShellEngine(t, dir, "shx")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny.yaml"), `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: workspace-write
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - { id: answer, kind: agent, role_file: tiny/answer.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: answer, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/answer.md"), "Answer for {task_id}.\n")
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-oldhandle\ntitle: Old handle\ntask_type: tiny\n---\nbody\n")
	writeTestFile(t, filepath.Join(dir, "slow"), "")

	handles := func() [][]string {
		b, _ := os.ReadFile(filepath.Join(dir, "handles.txt"))
		var out [][]string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				out = append(out, f)
			}
		}
		return out
	}
	runID := detach(t, dir, task)
	eventually(t, 60*time.Second, "the engine of answer#1 starts", func() bool { return len(handles()) == 1 })
	if r := runCLI(t, "cancel", runID, "--dir", dir); r.code != ExitOK {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "resume", runID, "--dir", dir, "--detach"); r.code != ExitOK {
		t.Fatalf("resume --detach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	eventually(t, 60*time.Second, "the engine of the resumed step starts", func() bool { return len(handles()) == 2 })
	hs := handles()
	old, oldTID, live, liveTID := hs[0][0], hs[0][1], hs[1][0], hs[1][1]

	var addr struct {
		APIURL string `json:"api_url"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/runs", runID+".json"))), &addr); err != nil || addr.APIURL == "" {
		t.Fatalf("the resumed run's address: %v", err)
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	get := func(handle, tid string) (int, string) {
		req, _ := http.NewRequest("GET", addr.APIURL+"/v1/worker/prompt?task_id="+tid, nil)
		req.Header.Set("Authorization", "Bearer "+handle)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(old, oldTID); code != http.StatusConflict || !strings.Contains(body, "run "+runID+": attempt 1 of answer#1") ||
		!strings.Contains(body, "already ended") || strings.Contains(body, "Answer for") {
		t.Errorf("the resumed run's API answered the cancelled attempt's handle with %d %.300s; want 409 naming the run and the attempt", code, body)
	}
	if code, body := get(live, liveTID); code != http.StatusOK || !strings.Contains(body, "Answer for t-oldhandle") {
		t.Errorf("the resumed step's own handle: %d %.300s; want its prompt", code, body)
	}
	os.Remove(filepath.Join(dir, "slow"))
	if f := runCLI(t, "status", runID, "--dir", dir, "--follow"); f.code != ExitOK || !strings.Contains(f.stdout, "run "+runID+": done") {
		t.Errorf("status --follow after resume: exit %d\n%s%s", f.code, f.stdout, f.stderr)
	}
}
