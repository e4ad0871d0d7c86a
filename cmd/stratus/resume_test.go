package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statusOf returns `stratus status RUN --dir DIR --json`.
func statusOf(t *testing.T, dir, runID string) StatusResult {
	t.Helper()
	r := runCLI(t, "status", runID, "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("status %s: exit %d\n%s", runID, r.code, r.stderr)
	}
	var s StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return s
}

// stepRefs lists "step_ref:status" of a status, supervisor turns left out.
func stepRefs(s StatusResult) string {
	var out []string
	for _, st := range s.Steps {
		if st.Kind != "supervisor" {
			out = append(out, st.StepRef+":"+st.Status)
		}
	}
	return join(out)
}

// README.md § Durable runs: a failed run resumes from the step that failed.
// The steps before it are not run again (their ctx files stay), the failed
// step runs as a new visit, and the run goes on to done; its summary counts
// every step, the failed attempt's included.
func TestResume_AFailedRunGoesOnFromTheStepThatFailed(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  implementation:
    - fail: the model refused
    - report: implemented
  review:
    - report: {findings: []}
default:
  report: ok
`)
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitFailed {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	runID := decodeRun(t, r.stdout).RunID
	planning := readFile(t, filepath.Join(dir, "workspace/tasks/t-implementation/ctx/planning.md"))

	r = runCLI(t, "resume", runID, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "stratus: resume run "+runID+": implementation#1 runs again") {
		t.Errorf("resume does not say where it goes on:\n%s", r.stderr)
	}
	if got := join(steps(r.stderr)); got != "implementation#2:done review#1:accept publish#1:done" {
		t.Errorf("resumed steps: %s; want implementation#2 review#1 publish#1 (planning not again)", got)
	}
	if res := decodeRun(t, r.stdout); res.RunID != runID || res.Status != "done" {
		t.Errorf("resume result %+v", res)
	}
	if got := readFile(t, filepath.Join(dir, "workspace/tasks/t-implementation/ctx/planning.md")); got != planning {
		t.Errorf("planning's ctx file changed across the resume")
	}
	s := statusOf(t, dir, runID)
	if s.Status != "done" || stepRefs(s) != "planning#1:completed implementation#1:failed implementation#2:completed review#1:completed publish#1:completed" {
		t.Errorf("status after resume: %s %s", s.Status, stepRefs(s))
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.md"))
	if !strings.Contains(md, "implementation#1") || !strings.Contains(md, "implementation#2") {
		t.Errorf("the summary does not count both attempts at implementation:\n%s", md)
	}
	// A done run has nothing to resume.
	if r := runCLI(t, "resume", runID, "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "it is done") {
		t.Errorf("resume of a done run: exit %d\n%s", r.code, r.stderr)
	}
}

// README.md § Durable runs: a run parked because its rework budget ran out
// resumes only with --reset-fix-budget, and then goes on into the loop.
func TestResume_ASpentBudgetGoesOnWithResetFixBudget(t *testing.T) {
	t.Parallel()
	blocking := "    - report: {findings: [{severity: blocking, path: a.go, what: broken, fix: fix it}]}\n"
	dir, task := installScript(t, "implementation", "", "nodes:\n  review:\n"+strings.Repeat(blocking, 4)+"    - report: {findings: []}\ndefault:\n  report: ok\n")
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitManual {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	runID := decodeRun(t, r.stdout).RunID
	r = runCLI(t, "resume", runID, "--dir", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, `budget "review_fix" is spent`) || !strings.Contains(r.stderr, "--reset-fix-budget") {
		t.Fatalf("resume without --reset-fix-budget: exit %d\n%s", r.code, r.stderr)
	}
	if s := statusOf(t, dir, runID); s.Status != "manual_action_required" {
		t.Errorf("a refused resume changed the run: %s", s.Status)
	}
	r = runCLI(t, "resume", runID, "--dir", dir, "--reset-fix-budget", "--json")
	if r.code != ExitOK {
		t.Fatalf("resume --reset-fix-budget: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "after review#4, at fixing (budgets reset: review_fix 3→0)") {
		t.Errorf("resume does not say it reset the budget:\n%s", r.stderr)
	}
	if got := join(steps(r.stderr)); got != "fixing#4:done review#5:accept publish#1:done" {
		t.Errorf("resumed steps: %s", got)
	}
	if res := decodeRun(t, r.stdout); res.Budgets["review_fix"] != 1 {
		t.Errorf("budgets spent after the reset: %v, want review_fix 1", res.Budgets)
	}
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no procfs: kill(0) is all there is
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// docs/architecture.md § The run lifecycle: killing the process that owns a
// run (SIGKILL, no chance to clean up) ends its runner and engine within 10
// s, `stratus status` says interrupted (its open step canceled), and `stratus
// resume` takes the run to its end from that step.
//
// Both ways of running workers (docs/contracts.md § The in-process twin): in
// process, where the engine's child is reached by the reaper alone, and a
// runner process per step, which watches its owner.
func TestResume_AKilledOwnerLeavesNothingRunningAndTheRunResumes(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"in-process", "process"} {
		t.Run(isolation, func(t *testing.T) {
			t.Parallel()
			killedOwner(t, isolation)
		})
	}
}

// secondHangsEngine is slowEngine for a run whose first step must end and
// whose second must hang, however fast one step follows another: while
// "slow" exists, every engine but the first hangs, after saying who it is.
const secondHangsEngine = `read line
if [ -f slow ] && [ -f engine.ran ]; then
  sleep 300 &
  echo "$$ $PPID $!" > engine.pids
  wait
fi
touch engine.ran
printf '{"subrun_report": "ok"}\n'
`

func killedOwner(t *testing.T, isolation string) {
	dir, task := tinyRun(t, "", secondHangsEngine, "", "t-kill")
	useIsolation(t, dir, isolation)
	writeTestFile(t, filepath.Join(dir, "slow"), "")

	runID := killOwner(t, dir, startRun(t, dir, task))
	s := statusOf(t, dir, runID)
	if s.Status != "interrupted" || stepRefs(s) != "first#1:completed answer#1:canceled" {
		t.Fatalf("status after the owner died: %s %s; want interrupted with answer#1 canceled", s.Status, stepRefs(s))
	}
	if err := os.Remove(filepath.Join(dir, "slow")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	r := runCLI(t, "resume", runID, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "answer#2:done publish#1:done" {
		t.Errorf("resumed steps: %s; want answer#2 then publish (first not again)", got)
	}
}

// killOwner waits until run, started in dir by startRun, hangs in its
// second step (secondHangsEngine with "slow" in dir), kills its process
// (SIGKILL: no chance to clean up), and waits until its runner, engine and
// the engine's child are gone (10 s at most). It returns the run's id.
func killOwner(t *testing.T, dir string, run *background) string {
	t.Helper()
	pidsFile := filepath.Join(dir, "engine.pids")
	// first runs; answer hangs.
	deadline := time.Now().Add(60 * time.Second)
	var engine, runner, child int
	for {
		if b, err := os.ReadFile(pidsFile); err == nil && strings.Count(string(b), "\n") == 1 {
			f := strings.Fields(string(b))
			engine, _ = strconv.Atoi(f[0])
			runner, _ = strconv.Atoi(f[1])
			child, _ = strconv.Atoi(f[2])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer engine did not start:\n%s", run.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	runID := ""
	if i := strings.Index(run.log(), "stratus: run "); i >= 0 {
		runID = strings.Fields(run.log()[i+len("stratus: run "):])[0]
		runID = strings.TrimSuffix(runID, ":")
	}
	if err := run.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	run.wait(t)
	gone := time.Now().Add(10 * time.Second)
	for alive(engine) || alive(runner) || alive(child) {
		if time.Now().After(gone) {
			r, e, c := alive(runner), alive(engine), alive(child)
			for _, pid := range []int{engine, runner, child} {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("10 s after its owner was killed, the runner (pid %d, alive %v), the engine (pid %d, alive %v) or the engine's child (pid %d, alive %v) still runs", runner, r, engine, e, child, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return runID
}

// Bad input to resume is a usage error naming what is wrong.
func TestResume_BadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "resume", "r-nosuch", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "no runs in") {
		t.Errorf("resume in a dir without runs: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-echo\ntitle: Echo\n---\nbody\n")
	if r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir); r.code != ExitManual {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "resume", "r-nosuch", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, `run "r-nosuch" not found`) {
		t.Errorf("resume of an unknown run: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "resume", "--dir", dir); r.code != ExitUsage {
		t.Errorf("resume without a run: exit %d\n%s", r.code, r.stderr)
	}
}

// README.md § Cost and token caps: a cost cap (the task's max_cost_usd over
// config.yaml's limits) parks the run once a step ends with the run at the
// cap — no further step starts — says so on stdout and in the summary, warns
// at 80 %, and resume --max-cost-usd raises it and goes on. A cap not above
// what was spent is refused.
func TestResume_ACostCapParksTheRunAndResumeRaisesIt(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  planning:
    - report: planned
      cost_usd: 0.50
  implementation:
    - report: implemented
      cost_usd: 0.35
  review:
    - report: {findings: []}
      cost_usd: 0.10
default:
  report: ok
  cost_usd: 0.01
`)
	path := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, path, readFile(t, path)+"limits:\n  max_cost_usd: 100\n")
	writeTestFile(t, task, strings.Replace(readFile(t, task), "task_type: implementation\n", "task_type: implementation\nmax_cost_usd: 0.8\n", 1))
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitManual {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	if got := join(steps(r.stderr)); got != "planning#1:done implementation#1:done review#1:failed" {
		t.Errorf("steps: %s; want review#1 refused at the cap (0.85 of 0.80)", got)
	}
	if !strings.Contains(res.Cause, "cost cap reached: $0.8500 of $0.8000") {
		t.Errorf("why: %q", res.Cause)
	}
	// A supervisor turn is an engine turn: none starts past the cap.
	if strings.Contains(r.stderr, "stratus: supervisor supervisor#") || !strings.Contains(r.stderr, "supervisor observations not started from here on: cost cap reached") {
		t.Errorf("a supervisor turn started past the cap, or the skip was not said:\n%s", r.stderr)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.md"))
	if !strings.Contains(md, "cost cap reached: $0.8500 of $0.8000") || !strings.Contains(md, "Capped at $0.80.") {
		t.Errorf("summary.md does not say the cap stopped the run:\n%s", md)
	}
	for _, args := range [][]string{{"--max-cost-usd", "0.85"}, nil} {
		if r := runCLI(t, append([]string{"resume", res.RunID, "--dir", dir}, args...)...); r.code != ExitUsage || !strings.Contains(r.stderr, "would stop again at once") {
			t.Errorf("resume %v with a cap already spent: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	for _, v := range []string{"NaN", "Inf", "-1"} {
		if r := runCLI(t, "resume", res.RunID, "--dir", dir, "--max-cost-usd", v); r.code != ExitUsage || !strings.Contains(r.stderr, "--max-cost-usd") {
			t.Errorf("resume --max-cost-usd %s: exit %d, want %d naming the flag\n%s", v, r.code, ExitUsage, r.stderr)
		}
	}
	r = runCLI(t, "resume", res.RunID, "--dir", dir, "--max-cost-usd", "2")
	if r.code != ExitOK {
		t.Fatalf("resume --max-cost-usd 2: exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "review#2:accept publish#1:done" {
		t.Errorf("resumed steps: %s", got)
	}
}

// The 80 % line comes once, before the cap is reached.
func TestRun_ACostCapWarnsAt80Percent(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  planning:
    - report: planned
      cost_usd: 0.85
  review:
    - report: {findings: []}
default:
  report: ok
  cost_usd: 0.01
`)
	writeTestFile(t, task, strings.Replace(readFile(t, task), "task_type: implementation\n", "task_type: implementation\nmax_cost_usd: 1\n", 1))
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "of its $1.0000 cost cap"); n != 1 {
		t.Errorf("the 80%% warning came %d times, want once:\n%s", n, r.stderr)
	}
}

// A run whose last worker step takes it past its cap ends done, but the
// supervisor's finalize turn — an engine turn — is not started: the
// deterministic summary is written instead (not $8 spent of a $5 cap).
func TestRun_NoSupervisorFinalizePastTheCap(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  planning:
    - report: planned
      cost_usd: 0.10
  implementation:
    - report: implemented
      cost_usd: 0.10
  review:
    - report: {findings: []}
      cost_usd: 0.70
default:
  report: ok
  cost_usd: 0.01
`)
	writeTestFile(t, task, strings.Replace(readFile(t, task), "task_type: implementation\n", "task_type: implementation\nmax_cost_usd: 0.8\n", 1))
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "finalize (publish#1)") || !strings.Contains(r.stderr, "supervisor finalize not started: cost cap reached") {
		t.Errorf("the finalize turn started past the cap, or its skip was not said:\n%s", r.stderr)
	}
}
