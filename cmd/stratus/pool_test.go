package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// poolEngine leaves, per dispatch task, its working directory, its
// environment and its pid and parent's (the runner) in the spy dir; its
// first step leaves a process of its own session (out of the engine's
// process group, which the step's end kills), its pid in the spy dir; its
// answer step hangs while the spy dir holds "hang", saying it is alive
// (an agent step a second: the runner's stats heartbeat its state).
const poolEngine = `read line
case "$STRATUS_TASK_ID" in
*.first.*) setsid sleep 300 & echo $! > "$SPY/escaped-$STRATUS_TASK_ID.txt" ;;
esac
pwd > "$SPY/pwd-$STRATUS_TASK_ID.txt"
env > "$SPY/env-$STRATUS_TASK_ID.txt"
case "$STRATUS_TASK_ID" in
*.answer.*)
  if [ -f "$SPY/hang" ]; then
    echo "$$ $PPID" > "$SPY/pids-$STRATUS_TASK_ID.txt"
    n=0
    while [ -f "$SPY/hang" ]; do n=$((n+1)); printf '{"event":"agent_step","step":%d}\n' $n; sleep 1; done
  fi ;;
esac
printf '{"subrun_report": "ok"}\n'
`

// poolRun installs a work dir for the tiny flow whose engine is poolEngine
// and returns it, its task file and the spy dir.
func poolRun(t *testing.T, id string) (dir, task, spy string) {
	t.Helper()
	dir, spy = t.TempDir(), t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), poolEngine)
	usePrimaryShellEngineEnv(t, dir, "shx", "{SPY: "+spy+"}")
	writeTwoStepFlow(t, dir)
	task = filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: "+id+"\ntitle: Pool\ntask_type: tiny\n---\nbody\n")
	return dir, task, spy
}

// statusJSON is `stratus status RUN --json` on the stand-in.
func statusJSON(t *testing.T, runID string, flags []string) StatusResult {
	t.Helper()
	r := runCLI(t, append([]string{"status", runID, "--json"}, flags...)...)
	var s StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return s
}

func detachRun(t *testing.T, task, dir string, flags []string) string {
	t.Helper()
	r := runCLI(t, append([]string{"run", task, "--dir", dir, "--detach", "--json"}, flags...)...)
	var started struct {
		RunID string `json:"run_id"`
	}
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &started) != nil || started.RunID == "" {
		t.Fatalf("run --detach: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	return started.RunID
}

// README.md § Warm runners (pool mode), on the stand-in (stratus dev aws
// --pool 2): pooled runners
// are `stratus runner pool` processes polling moto's SQS, as the pool's
// ECS service's tasks are; the stack's heartbeat window is 15 s, the
// pickup window 16 s.
//
//  1. A run's steps run on the pool: each engine works in a step directory
//     of a pooled runner, its environment holds the step's handle and no
//     AWS credential of the runner's, a process the step left outside its
//     engine's group is killed, and status says each step's dispatch →
//     engine start (start_ms).
//  2. Backlog over the heartbeat window: while both offline runners are
//     busy (two runs' hanging steps), a third run's step waits out the
//     pickup window — longer than its state's heartbeat window —
//     heartbeaten by dispatch, then goes cold and ends done.
//  3. A pooled runner killed mid-step (SIGKILL): its engine ends with it,
//     the step's state times out on its heartbeat and its run ends (no
//     step left running); the other busy runner's step ends done.
func TestDevAWS_WarmRunnerPool(t *testing.T) {
	flags := devAWSWith(t, []string{"--pool", "2", "--pool-pickup", "16s", "--heartbeat-seconds", "15"},
		"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")

	// 1. A run on the pool.
	dir, task, spy := poolRun(t, "t-pool")
	r := runCLI(t, append([]string{"run", task, "--dir", dir}, flags...)...)
	if r.code != ExitOK || join(steps(r.stderr)) != "first#1:done answer#1:done publish#1:done" {
		t.Fatalf("run on the pool: exit %d, steps %s\n%s", r.code, join(steps(r.stderr)), r.stderr)
	}
	pwds, _ := filepath.Glob(filepath.Join(spy, "pwd-*.txt"))
	if len(pwds) < 2 {
		t.Fatalf("engine spies %v; want one per step", pwds)
	}
	for _, p := range pwds {
		pwd := strings.TrimSpace(readFile(t, p))
		if !strings.Contains(pwd, "/pool-offline-") || !strings.Contains(pwd, "/step-") {
			t.Errorf("an engine worked in %s, not in a pooled runner's step directory", pwd)
		}
		env := readFile(t, strings.Replace(p, "pwd-", "env-", 1))
		if strings.Contains(env, "AWS_ACCESS_KEY_ID=") || strings.Contains(env, "AWS_SECRET_ACCESS_KEY=") || !strings.Contains(env, "STRATUS_HANDLE=wh-") {
			t.Errorf("a pooled engine's environment holds the runner's AWS credentials or no handle:\n%s", env)
		}
	}
	// What escaped the engine's process group is gone before the runner
	// takes its next step (README.md § Warm runners (pool mode): the runner
	// reaps its steps).
	escaped, _ := filepath.Glob(filepath.Join(spy, "escaped-*.txt"))
	if len(escaped) != 1 {
		t.Fatalf("escaped pids %v; want the first step's", escaped)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(t, escaped[0])))
	eventually(t, 10*time.Second, "the process that left the engine's group is gone", func() bool { return pid > 0 && !alive(pid) })
	runID := strings.TrimSuffix(strings.Fields(strings.SplitN(r.stderr, "stratus: run ", 2)[1])[0], ":")
	for _, st := range statusJSON(t, runID, flags).Steps {
		if st.Kind == "agent" && st.StartMS <= 0 {
			t.Errorf("step %s has no start_ms", st.StepRef)
		}
	}

	// 2. Both runners busy: a third run's step waits past its heartbeat
	// window, then goes cold.
	writeTestFile(t, filepath.Join(spy, "hang"), "")
	// Two tasks: a task runs once at a time on a stack (README § On an
	// AWS account).
	other := filepath.Join(dir, "task-2.md")
	writeTestFile(t, other, "---\nid: t-pool-2\ntitle: Pool\ntask_type: tiny\n---\nbody\n")
	hung := []string{detachRun(t, task, dir, flags), detachRun(t, other, dir, flags)}
	pids := map[string][]string{}
	eventually(t, 90*time.Second, "both hung answers' engines started", func() bool {
		for _, id := range hung {
			if m, _ := filepath.Glob(filepath.Join(spy, "pids-"+id+".answer.1.txt")); len(m) == 1 {
				if f := strings.Fields(readFile(t, m[0])); len(f) == 2 {
					pids[id] = f
				}
			}
		}
		return len(pids) == 2
	})
	dir2, task2, spy2 := poolRun(t, "t-backlog")
	start := time.Now()
	backlog := detachRun(t, task2, dir2, flags)
	eventually(t, 60*time.Second, "the backlogged run's first step ended", func() bool {
		for _, st := range statusJSON(t, backlog, flags).Steps {
			if st.StepRef == "first#1" {
				return st.Status != "running"
			}
		}
		return false
	})
	if took := time.Since(start); took < 16*time.Second {
		t.Errorf("the backlogged step ended %s after its run started; it should have waited the 16 s pickup window", took)
	}
	cold, _ := filepath.Glob(filepath.Join(spy2, "pwd-*.first.1.txt"))
	if len(cold) != 1 || strings.Contains(readFile(t, cold[0]), "/pool-") {
		t.Errorf("the backlogged step ran on the pool, not cold: %v", cold)
	}

	// 3. Kill one busy pooled runner mid-step; let the other's step end.
	killed, spared := hung[0], hung[1]
	engine, _ := strconv.Atoi(pids[killed][0])
	runner, _ := strconv.Atoi(pids[killed][1])
	if err := syscall.Kill(runner, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the pooled runner %d: %v", runner, err)
	}
	eventually(t, 10*time.Second, "the killed runner's engine ended", func() bool { return !alive(engine) })
	os.Remove(filepath.Join(spy, "hang"))
	// A run has ended once its status and every step's say so (status
	// reads the execution's end before the events function records it).
	ended := func(id string) StatusResult {
		var s StatusResult
		// A deadline, not a timing: the killed runner's step ends by its
		// heartbeat lapse, slower under -race on a loaded machine.
		role := map[string]string{killed: "the killed runner's", spared: "the spared runner's", backlog: "the backlogged"}[id]
		defer func() {
			if t.Failed() {
				t.Logf("%s run %s: status %s, steps %+v", role, id, s.Status, s.Steps)
			}
		}()
		eventually(t, 180*time.Second, role+" run "+id+" ended, no step left running", func() bool {
			s = statusJSON(t, id, flags)
			open := slices.ContainsFunc(s.Steps, func(st StepStatus) bool { return st.Status == "running" })
			return s.Status != "running" && !open
		})
		return s
	}
	if s := ended(spared); s.Status != "done" {
		t.Errorf("the spared runner's run ended %s: %+v", s.Status, s.Steps)
	}
	if s := ended(backlog); s.Status != "done" {
		t.Errorf("the backlogged run ended %s: %+v", s.Status, s.Steps)
	}
	if s := ended(killed); s.Status != "failed" {
		t.Errorf("the run whose runner was killed ended %s: %+v; want failed (its step's heartbeat lapsed)", s.Status, s.Steps)
	}
}
