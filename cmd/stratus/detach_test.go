package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/host"
)

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runsOf returns `stratus runs --dir DIR --json`.
func runsOf(t *testing.T, dir string) []RunLine {
	t.Helper()
	r := runCLI(t, "runs", "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("runs: exit %d\n%s", r.code, r.stderr)
	}
	var lines []RunLine
	if err := json.Unmarshal([]byte(r.stdout), &lines); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, r.stdout)
	}
	return lines
}

// detach starts `stratus run TASK --detach --json` and returns the run id.
func detach(t *testing.T, dir, task string) string {
	t.Helper()
	start := time.Now()
	r := runCLI(t, "run", task, "--dir", dir, "--detach", "--json")
	if r.code != 0 {
		t.Fatalf("run --detach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.RunID == "" {
		t.Fatalf("run --detach --json printed %q: %v", r.stdout, err)
	}
	// Run from elsewhere than dir, the printed commands carry --dir dir, or
	// they would look in the wrong place.
	if !strings.Contains(r.stderr, "stratus status "+out.RunID+" --dir "+dir+" --follow") {
		t.Errorf("run --detach does not say how to follow the run:\n%s", r.stderr)
	}
	t.Cleanup(func() { runCLI(t, "cancel", out.RunID, "--dir", dir) })
	_ = start
	return out.RunID
}

// docs/architecture.md § The run lifecycle: a human gate of a detached run
// waits without the terminal that started it; runs lists it as waiting,
// approve reaches it, status --follow streams it to its end and exits as run
// would.
func TestDetach_AHumanGateWaitsWithoutItsTerminal(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1), "default:\n  report: ok\n")
	runID := detach(t, dir, task)
	eventually(t, 60*time.Second, "the run waits at its gate", func() bool {
		lines := runsOf(t, dir)
		return len(lines) == 1 && lines[0].RunID == runID && lines[0].Status == "waiting"
	})
	if s := statusOf(t, dir, runID); s.Status != "waiting" {
		t.Errorf("status of a waiting run: %s", s.Status)
	}
	if r := runCLI(t, "approve", runID, "gate", "--dir", dir); r.code != ExitOK {
		t.Fatalf("approve a detached run: exit %d\n%s", r.code, r.stderr)
	}
	eventually(t, 60*time.Second, "the run waits at ask", func() bool {
		return strings.Contains(stepRefs(statusOf(t, dir, runID)), "ask#1:waiting")
	})
	if r := runCLI(t, "answer", runID, "ask", "the blue one", "--dir", dir); r.code != ExitOK {
		t.Fatalf("answer: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, "status", runID, "--dir", dir, "--follow")
	if r.code != ExitOK {
		t.Fatalf("status --follow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "draft#1:done gate#1:route:approve ask#1:done publish#1:done" {
		t.Errorf("followed steps: %s", got)
	}
	if !strings.Contains(r.stdout, "run "+runID+": done") {
		t.Errorf("status --follow ends without the run's status:\n%s", r.stdout)
	}
	log := readFile(t, filepath.Join(dir, ".stratus/runs", runID, "run.log"))
	if !strings.Contains(log, "run "+runID+": done") {
		t.Errorf("the detached run's log lacks its result:\n%s", log)
	}
}

// docs/architecture.md § The run lifecycle: cancel stops a detached run and
// its workers; the run ends interrupted, open step canceled; runs and status
// agree; resume then finishes it. The run's host (the engine's parent) stays
// up, its other runs untouched.
func TestDetach_CancelStopsTheRunAndItsWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), slowEngine)
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
	writeTestFile(t, task, "---\nid: t-cancel\ntitle: Cancel\ntask_type: tiny\n---\nbody\n")
	writeTestFile(t, filepath.Join(dir, "slow"), "")

	runID := detach(t, dir, task)
	var pids []string
	eventually(t, 60*time.Second, "the engine starts", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "engine.pids"))
		pids = strings.Fields(string(b))
		return err == nil && len(pids) == 3
	})
	if lines := runsOf(t, dir); len(lines) != 1 || lines[0].Status != "running" {
		t.Errorf("runs while it runs: %+v", lines)
	}
	r := runCLI(t, "cancel", runID, "--dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout, "run "+runID+": interrupted (was running)") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{pids[0], pids[2]} { // the engine and its child
		pid, _ := json.Number(p).Int64()
		eventually(t, 10*time.Second, "the worker "+p+" stops", func() bool { return !alive(int(pid)) })
	}
	if host, _ := json.Number(pids[1]).Int64(); !alive(int(host)) {
		t.Errorf("the run's host (pid %d) ended with the run it was asked to stop", host)
	}
	s := statusOf(t, dir, runID)
	if s.Status != "interrupted" || stepRefs(s) != "answer#1:canceled" {
		t.Errorf("status after cancel: %s %s", s.Status, stepRefs(s))
	}
	if lines := runsOf(t, dir); len(lines) != 1 || lines[0].Status != "interrupted" {
		t.Errorf("runs after cancel: %+v", lines)
	}
	// Cancelling again changes nothing.
	if r := runCLI(t, "cancel", runID, "--dir", dir); r.code != ExitOK || !strings.Contains(r.stdout, "already ended: interrupted") {
		t.Errorf("cancel again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.Remove(filepath.Join(dir, "slow"))
	if r := runCLI(t, "resume", runID, "--dir", dir); r.code != ExitOK || join(steps(r.stderr)) != "answer#2:done publish#1:done" {
		t.Errorf("resume after cancel: exit %d steps %s\n%s", r.code, join(steps(r.stderr)), r.stderr)
	}
}

// Bad input to run --detach, runs, cancel and status --follow is a usage
// error naming it; a run that cannot start says why, from its log.
func TestDetach_BadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "runs", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "no run was made in") {
		t.Errorf("runs in a dir without runs: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "bad.md"), "---\nid: t-bad\ntitle: Bad\ntask_type: nosuchflow\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "bad.md"), "--dir", dir, "--detach")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "the run did not start") || !strings.Contains(r.stderr, "nosuchflow") {
		t.Errorf("run --detach of a task with no flow: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "runs", "--dir", dir, "--limit", "-1"); r.code != ExitUsage || !strings.Contains(r.stderr, "--limit -1") {
		t.Errorf("runs --limit -1: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "runs", "--dir", dir); r.code != ExitUsage {
		// still no run recorded in this dir: the store was never made
		t.Errorf("runs: exit %d\n%s", r.code, r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-echo\ntitle: Echo\n---\nbody\n")
	if r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir); r.code != ExitManual {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"cancel", "r-20260101T000000-abcdef", "--dir", dir},
		{"status", "r-20260101T000000-abcdef", "--dir", dir, "--follow"},
		{"cancel", "r-x", "--dir", dir, "--grace", "-1s"},
		{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--run-id", "../../etc"},
	} {
		if r := runCLI(t, args...); r.code != ExitUsage {
			t.Errorf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	if lines := runsOf(t, dir); len(lines) != 1 || lines[0].Status != "manual_action_required" || lines[0].Tokens == 0 {
		t.Errorf("runs: %+v", lines)
	}
}

// resume --detach: a failed run goes on in the work
// dir's host (owned by it, sharing its engine slots) and the
// command returns at once with its id; a run that cannot be resumed says
// why, exit 2.
func TestResume_Detach(t *testing.T) {
	t.Parallel()
	dir, _, runID := failedRun(t, "t-redetach")
	r := runCLI(t, "resume", runID, "--dir", dir, "--detach")
	if r.code != 0 || strings.TrimSpace(r.stdout) != runID || !strings.Contains(r.stderr, "stratus status "+runID+" --dir "+dir+" --follow") {
		t.Fatalf("resume --detach: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	if f := runCLI(t, "status", runID, "--dir", dir, "--follow"); f.code != ExitOK || !strings.Contains(f.stdout, "run "+runID+": done") {
		t.Errorf("status --follow after resume --detach: exit %d\n%s%s", f.code, f.stdout, f.stderr)
	}
	c, err := host.Dial(dir)
	if err != nil {
		t.Fatalf("no host after resume --detach: %v", err)
	}
	pid, _, err := c.Runs(context.Background())
	st, oerr := openRuns(dir)
	if err != nil || oerr != nil {
		t.Fatal(err, oerr)
	}
	defer st.Close()
	if run, err := st.GetRun(context.Background(), runID); err != nil || !strings.Contains(run.Owner, "/"+strconv.Itoa(pid)+"/") {
		t.Errorf("the resumed run's owner is %q, not the host (pid %d): %v", run.Owner, pid, err)
	}
	if again := runCLI(t, "resume", runID, "--dir", dir, "--detach"); again.code != ExitUsage || !strings.Contains(again.stderr, "the run did not resume") {
		t.Errorf("resume --detach of a done run: exit %d\n%s", again.code, again.stderr)
	}
}

// worker.max_concurrent_engines bounds the engines of every
// run a host runs, first come first served, whichever the isolation
// (newcomer: process isolation ignored it). Three detached runs with one
// slot: the engines never overlap, and every run ends done.
func TestDetach_EngineSlotsBoundTheHostsRuns(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"in-process", "process"} {
		t.Run(isolation, func(t *testing.T) {
			t.Parallel()
			const engine = "read line\necho start >> trace\nsleep 0.5\necho end >> trace\nprintf '{\"subrun_report\": \"ok\"}\\n'\n"
			dir, _ := tinyRun(t, "", engine, "", "t-slot0")
			useIsolation(t, dir, isolation)
			cfg := filepath.Join(dir, ".stratus/config.yaml")
			writeTestFile(t, cfg, strings.Replace(readFile(t, cfg), "  isolation: ", "  max_concurrent_engines: 1\n  isolation: ", 1))
			var ids []string
			for i := range 3 {
				task := filepath.Join(dir, "slot"+strconv.Itoa(i)+".md")
				writeTestFile(t, task, "---\nid: t-slot"+strconv.Itoa(i)+"\ntitle: Slot\ntask_type: tiny\n---\nbody\n")
				ids = append(ids, detach(t, dir, task))
			}
			eventually(t, 90*time.Second, "the three runs end", func() bool {
				for _, id := range ids {
					if s := statusOf(t, dir, id); s.Status == "running" {
						return false
					}
				}
				return true
			})
			for _, id := range ids {
				if s := statusOf(t, dir, id); s.Status != "done" {
					t.Errorf("run %s: %s %s", id, s.Status, stepRefs(s))
				}
			}
			trace := strings.Fields(readFile(t, filepath.Join(dir, "trace")))
			for i, w := range trace {
				if want := []string{"start", "end"}[i%2]; w != want {
					t.Fatalf("engines overlapped with one slot: %v", trace)
				}
			}
		})
	}
}

// A step its run's end stops says in its runner log what stopped it (the
// run was cancelled, interrupted or ended), in-process and as a runner
// process, never a bare "context canceled" (what its log said before).
func TestCancel_AStoppedStepsLogSaysWhatStoppedIt(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"in-process", "process"} {
		t.Run(isolation, func(t *testing.T) {
			t.Parallel()
			dir, task := tinyRun(t, "", slowEngine, "", "t-why")
			useIsolation(t, dir, isolation)
			writeTestFile(t, filepath.Join(dir, "slow"), "")
			runID := detach(t, dir, task)
			eventually(t, 60*time.Second, "the engine starts", func() bool {
				b, err := os.ReadFile(filepath.Join(dir, "engine.pids"))
				return err == nil && len(strings.Fields(string(b))) == 3
			})
			if r := runCLI(t, "cancel", runID, "--dir", dir); r.code != ExitOK {
				t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			var log string
			eventually(t, 30*time.Second, "the runner log says the step stopped", func() bool {
				log = runCLI(t, "logs", runID, "first", "--dir", dir).stdout
				return strings.Contains(log, "stopped before its result")
			})
			if strings.Contains(log, "error: context canceled") || !strings.Contains(log, "the run was interrupted") {
				t.Errorf("the stopped step's log does not say what stopped it:\n%s", log)
			}
		})
	}
}
