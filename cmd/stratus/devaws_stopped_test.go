package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/stratusflow/stratus/internal/container/containertest"
)

// On the stand-in, the Fargate task of a running step is
// killed with SIGKILL, as an OOM kill or a Spot reclaim past its
// stopTimeout ends it. The step fails at once with what ECS says — the
// task's stoppedReason and the container's exit code, 137 — carried by
// the "ECS Task State Change" event the stack's WorkerTaskStoppedRule
// sends to the dispatch queue; its heartbeat (900 s here) is not what
// ends it, so nothing says States.Timeout. The run ends by its flow's
// failure path, and a resume finishes it done. With the tasks as local
// processes, and as containers of the runner image when it is built.
func TestDevAWS_AKilledTaskFailsItsStepWithECSStopReason(t *testing.T) {
	t.Run("process", func(t *testing.T) {
		killTaskOfRunningStep(t, "process", func(t *testing.T, task, where string) {
			var pid int
			if _, err := fmt.Sscanf(where, "process %d in", &pid); err != nil {
				t.Fatalf("no pid in where the task runs, %q: %v", where, err)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -KILL %d (task %s): %v", pid, task, err)
			}
		})
	})
	t.Run("container", func(t *testing.T) {
		needRunnerImage(t)
		e := containertest.WithImage(t, runnerImage)
		cli, err := client.NewClientWithOpts(client.WithHost(e.Host()), client.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		killTaskOfRunningStep(t, "container", func(t *testing.T, task, where string) {
			// The stand-in names each task's container stratus-task-<task id>.
			if err := cli.ContainerKill(context.Background(), "stratus-task-"+task, "KILL"); err != nil {
				t.Fatalf("kill the container of task %s (%s): %v", task, where, err)
			}
		})
	})
}

// killTaskOfRunningStep runs the example task on `stratus dev aws
// --runners runners` with its implementation step's engine sleeping an
// hour on its first visit, kills that step's task with kill once its
// engine has started, and checks the step's failure, the run's end and
// its resume.
func killTaskOfRunningStep(t *testing.T, runners string, kill func(t *testing.T, task, where string)) {
	flags, log, _ := devAWSLog(t, []string{"--runners", runners, "--heartbeat-seconds", "900"}, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, `
nodes:
  implementation:
    - sleep_ms: 3600000
    - report: implemented
  review:
    - report: {findings: []}
default:
  report: ok
`)
	dir := gitProject(t, scenario)
	runID := detachRun(t, filepath.Join(dir, "task.md"), dir, flags)
	tid := runID + ".implementation.1"
	ran := regexp.MustCompile(`task (\S+) of step ` + regexp.QuoteMeta(tid) + ` runs in (.*)`)
	// The step's engine has started (its worker fetched the prompt): its
	// attempt has a start_ms, and dev aws said where its task runs.
	var m []string
	eventually(t, 5*time.Minute, "the implementation step's engine to start", func() bool {
		st := statusJSON(t, runID, flags)
		if st.Status != "running" {
			t.Fatalf("run %s is %s before its implementation step was killed:\n%+v\ndev aws:\n%s", runID, st.Status, st, log.String())
		}
		s := stepOf(st, "implementation#1")
		m = ran.FindStringSubmatch(log.String())
		return s != nil && s.Status == "running" && s.StartMS > 0 && m != nil
	})
	kill(t, m[1], m[2])

	// The run ends well within the heartbeat: were the stop not noticed,
	// the step would wait out its 900 s.
	var st StatusResult
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		// The run reads ended as soon as its execution did; its steps once
		// the events function recorded the end (lifecycle.Finish): wait
		// for both.
		st = statusJSON(t, runID, flags)
		if s := stepOf(st, "implementation#1"); st.Status != "running" && (s == nil || s.Status != "running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still runs 5 min after its step's task was killed (implementation#1: %+v): the stop was not noticed, and only its heartbeat (900 s) would end the step\ndev aws:\n%s",
				runID, stepOf(st, "implementation#1"), log.String())
		}
	}
	f := runCLI(t, append([]string{"status", runID, "--follow"}, flags...)...)
	s := stepOf(st, "implementation#1")
	if st.Status != "failed" && st.Status != "manual_action_required" || s == nil || s.Status != "failed" || len(s.Attempts) != 1 {
		t.Fatalf("after the kill: run %s, implementation#1 %+v; want the run ended by its failure path, the step failed on its one attempt\nstatus --follow (exit %d):\n%s%s\ndev aws:\n%s",
			st.Status, s, f.code, f.stdout, f.stderr, log.String())
	}
	for _, where := range []struct{ name, text string }{
		{"the attempt's reason", s.Attempts[0].Reason},
		{"the step's reason", s.Reason},
		{"the run's progress (status --follow)", f.stderr},
	} {
		for _, want := range []string{"worker task stopped without a result", "Essential container in task exited", "(exit code 137)"} {
			if !strings.Contains(where.text, want) {
				t.Errorf("%s does not say %q:\n%s", where.name, want, where.text)
			}
		}
	}
	// What the runner logged is its own records, not news: the reason
	// is ECS's.
	if strings.Contains(s.Attempts[0].Reason, `"component":"runner"`) {
		t.Errorf("the attempt's reason carries the runner's log records: %s", s.Attempts[0].Reason)
	}
	t.Logf("the killed attempt's reason: %s", s.Attempts[0].Reason)
	all := f.stdout + f.stderr + fmt.Sprintf("%+v", st)
	if st.Execution != nil {
		all += st.Execution.Error + st.Execution.Cause
	}
	if strings.Contains(all, "States.Timeout") || strings.Contains(all, "HeartbeatTimeout") {
		t.Errorf("the killed step's failure says a timeout:\n%s", all)
	}

	r := runCLI(t, append([]string{"resume", runID}, flags...)...)
	if r.code != ExitOK || !strings.Contains(join(steps(r.stderr)), "implementation#2:done") || !strings.Contains(join(steps(r.stderr)), "publish#1:done") {
		t.Fatalf("resume on dev aws: exit %d, steps %s\n%s\ndev aws:\n%s", r.code, join(steps(r.stderr)), r.stderr, log.String())
	}
	if st := statusJSON(t, runID, flags); st.Status != "done" || st.Resumes != 1 {
		t.Errorf("after the resume: run %s, resumed %d times; want done, once", st.Status, st.Resumes)
	}
}

// stepOf is the step of st named ref ("implementation#1"), or nil.
func stepOf(st StatusResult, ref string) *StepStatus {
	for i := range st.Steps {
		if st.Steps[i].StepRef == ref {
			return &st.Steps[i]
		}
	}
	return nil
}
