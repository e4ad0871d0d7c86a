package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/report"
)

// installScript installs DIR with the script engine as primary answering
// from scenario, and a task of task_type flowName (its flow written when
// flowYAML is not "", its role files generated).
func installScript(t *testing.T, flowName, flowYAML, scenario string) (dir, task string) {
	t.Helper()
	dir = t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), scenario)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %s", r.stderr)
	}
	if flowYAML != "" {
		writeTestFile(t, filepath.Join(dir, ".stratus/flows", flowName+".yaml"), flowYAML)
		for _, m := range regexp.MustCompile(`role_file: ([^\s,}]+)`).FindAllStringSubmatch(flowYAML, -1) {
			writeTestFile(t, filepath.Join(dir, ".stratus/flows", m[1]), "Work on {task_id} as "+m[1]+".\n")
		}
	}
	task = filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-"+flowName+"\ntitle: Run end\ntask_type: "+flowName+"\n---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n")
	return dir, task
}

// A parked run says which budget ran out, and its size, on stdout and right
// after the summary's lead — never "(or no edge takes that outcome)" — and
// prints what it spent of each budget.
func TestRun_BudgetSpentSaysWhichBudgetInSummaryAndOutput(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  review:
    - report: {findings: [{severity: blocking, path: a.go, what: broken, fix: fix it}]}
default:
  report: ok
`)
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	const why = `review#4 returned "rework", and loop "review_fix" has spent its budget of 3`
	if !strings.Contains(r.stdout, "why:      "+why+"\n") || strings.Contains(r.stdout, "(or ") {
		t.Errorf("stdout does not say which budget:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "budgets spent: review_fix 3\n") {
		t.Errorf("a manual run does not print what it spent:\n%s", r.stdout)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.md"))
	if !strings.Contains(md, "**manual_action_required**.\n\n## Why the run stopped\n\nReview#4 returned \"rework\", and loop \"review_fix\" has spent its budget of 3.\n\n## Changes") {
		t.Errorf("summary.md does not say why after its lead:\n%s", md)
	}
	var res RunResult
	if rj := runCLI(t, "run", task, "--dir", dir, "--json"); rj.code != ExitManual {
		t.Fatalf("--json: exit %d", rj.code)
	} else if res = decodeRun(t, rj.stdout); res.Budgets["review_fix"] != 3 || res.Cause != why {
		t.Errorf("--json budgets %v cause %q", res.Budgets, res.Cause)
	}
}

// A failed step's reason and an evaluator's invalid report reach the summary,
// not only stderr.
func TestRun_FailedAndInvalidSummariesSayWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, scenario string
		code           int
		why            string
	}{
		{"failed agent", "nodes:\n  implementation:\n    - fail: model refused\ndefault:\n  report: ok\n", ExitFailed, "Implementation#1 failed: "},
		{"invalid evaluator report", "nodes:\n  review:\n    - report: \"looks fine to me\"\ndefault:\n  report: ok\n", ExitManual, "Review#1: the evaluator's report is invalid: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, task := installScript(t, "implementation", "", tc.scenario)
			r := runCLI(t, "run", task, "--dir", dir)
			if r.code != tc.code {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			md := readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.md"))
			if !strings.Contains(md, "\n## Why the run stopped\n\n"+tc.why) {
				t.Errorf("summary.md does not say why:\n%s", md)
			}
			if tc.code == ExitFailed && !strings.Contains(md, "model refused") {
				t.Errorf("summary.md lacks the failure's reason:\n%s", md)
			}
		})
	}
}

const prFlow = `flow:
  name: shipping
  task_type: shipping
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: write, kind: agent, role_file: shipping/write.md }
    - { id: ship, kind: publish, policy: pull_request }
  edges:
    - { from: write, to: ship }
`

// docs/architecture.md § Publishing: in a git repository without the remote
// publishing pushes to, validate warns at the policy (worc: non-fatal);
// outside one it does not (a run works in place). Either way the run ends
// done, its publish step saying why nothing was pushed, and the summary has
// no Publishing section (nothing was published).
func TestRun_PullRequestPublishingWithoutARemoteSaysNothingPushed(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "shipping", prFlow, "default:\n  report: ok\n")
	if v := runCLI(t, "validate", "shipping", "--dir", dir); v.code != ExitOK || !strings.Contains(v.stdout, "flow shipping: ok") {
		t.Errorf("validate outside a repository: exit %d\n%s", v.code, v.stdout)
	}
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	for _, f := range []string{".stratus/config.yaml", ".stratus/flows/shipping.yaml", ".stratus/flows/shipping/write.md"} {
		writeTestFile(t, filepath.Join(repo, f), readFile(t, filepath.Join(dir, f)))
	}
	note := report.PublishingNote("pull_request", "origin")
	v := runCLI(t, "validate", "shipping", "--dir", repo)
	flowFile := filepath.Join(repo, ".stratus/flows/shipping.yaml")
	if v.code != ExitOK || !strings.Contains(v.stdout, "warning: "+flowFile+":9:") || !strings.Contains(v.stdout, `node "ship": `+note) ||
		!strings.Contains(v.stdout, "flow shipping: 0 errors, 1 warning") {
		t.Errorf("validate in a repository without origin: exit %d\n%s", v.code, v.stdout)
	}
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run exit %d\n%s", r.code, r.stderr)
	}
	const said = "ship#1: not pushed: the run edited the work dir in place (workspace: workdir)"
	if strings.Count(r.stderr, said) != 1 {
		t.Errorf("the run does not say once why nothing was pushed:\n%s", r.stderr)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-shipping/summary.md"))
	if strings.Contains(md, "\n## Publishing\n") {
		t.Errorf("summary.md has a Publishing section though nothing was published:\n%s", md)
	}
}

// README.md § Engines (extra_args come after a `--` for a bundled engine): a
// node's extra_args no longer fail the bundled script
// engine; it ignores them and says so once on its stderr (the runner log).
func TestRun_ExtraArgsIgnoredByTheBundledScriptEngine(t *testing.T) {
	t.Parallel()
	const flowYAML = `flow:
  name: extras
  task_type: extras
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: write, kind: agent, role_file: extras/write.md, extra_args: ["--foo", "bar"] }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: write, to: publish }
`
	dir, task := installScript(t, "extras", flowYAML, "default:\n  report: ok\n")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "write#1:done publish#1:done" {
		t.Errorf("steps %s", got)
	}
	var said int
	filepath.Walk(filepath.Join(dir, ".stratus/logs/t-extras"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && filepath.Base(p) == "runner.log" && strings.Contains(p, "write") {
			said += strings.Count(readFile(t, p), "stratus engine script: ignoring 2 extra argument(s) after --: --foo bar")
		}
		return nil
	})
	if said != 1 {
		t.Errorf("the engine said %d times that it ignores the extra args, want once", said)
	}
	// Arguments before -- are still an error.
	if e := runCLI(t, "engine", "script", "--scenario", filepath.Join(dir, "scenario.yaml"), "stray"); e.code != ExitUsage || !strings.Contains(e.stderr, `unexpected argument "stray"`) {
		t.Errorf("stray argument: exit %d %s", e.code, e.stderr)
	}
}

// docs/contracts.md § What the supervisor layer does: an
// observation launched for the failure that ends the run is let finish — its
// engine answers after a short sleep — instead of being killed by the end of
// the run with a warning.
func TestRun_FailureObservationFinishesBeforeTheWorkersStop(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", `
nodes:
  review:
    - fail: the reviewer crashed
  supervisor.observe:
    - sleep_ms: 1500
      report: "The review's engine failed; nothing was reviewed."
default:
  report: ok
`)
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitFailed {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`stratus: supervisor supervisor#\d+ observe ended: done`).MatchString(r.stderr) {
		t.Errorf("the observation did not finish:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "warning: supervisor observation") || strings.Contains(r.stderr, "signal: terminated") {
		t.Errorf("the observation was killed by the end of the run:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stratus/logs/t-implementation/supervisor/observe-review-1.md")); err != nil {
		t.Errorf("the observation's note was not written: %v", err)
	}
}

// `stratus run … 2>&1 | head` must not kill the run
// when head exits: writes to the closed pipe fail, the run ends done and
// removes its runs/<run>.json.
func TestRun_ClosedStderrPipeDoesNotKillTheRun(t *testing.T) {
	t.Parallel()
	dir, task := installScript(t, "implementation", "", "nodes:\n  review:\n    - report: {findings: []}\ndefault:\n  report: ok\n")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(stratusBin, "run", task, "--dir", dir)
	cmd.Stdout, cmd.Stderr = pw, pw // 2>&1 | head -1
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if _, err := bufio.NewReader(pr).ReadString('\n'); err != nil {
		t.Fatalf("no first line: %v", err)
	}
	pr.Close() // head exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the run did not end within 120 s")
	}
	if err != nil {
		t.Fatalf("the run did not end done once its pipe closed: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".stratus/runs/*.json")); len(left) != 0 {
		t.Errorf("stale run address files: %v", left)
	}
	if md := readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.md")); !strings.Contains(md, "publish#1") {
		t.Errorf("the run did not reach publish:\n%s", md)
	}
}

// Messages say what a newcomer can act on — a kind that is not allowed is one
// error (no contradicting "not supported by this build" warning), counts are
// plural-correct, a number too large names the maximum, a task value is named
// by its YAML type.
func TestMessages_NewcomerWording(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/odd.yaml"), `flow:
  name: odd
  task_type: odd
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: a, kind: weird }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: a, to: publish }
`)
	r := runCLI(t, "validate", "odd", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, `kind "weird" is not allowed`) || strings.Contains(r.stdout, "not supported by this build") ||
		!strings.Contains(r.stdout, "flow odd: 1 error, 0 warnings") {
		t.Errorf("kind weird: exit %d\n%s", r.code, r.stdout)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/slow.yaml"), `flow:
  name: slow
  task_type: slow
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: a, kind: agent, role_file: implementation/planning.md, timeout_seconds: 99999999999 }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: a, to: publish }
`)
	if r := runCLI(t, "validate", "slow", "--dir", dir); !strings.Contains(r.stdout, "timeout_seconds: 99999999999 is too large; the maximum is 2147483647") {
		t.Errorf("too large: exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, "validate", "implementation", "--dir", dir); !strings.Contains(r.stdout, "flow implementation: ok\n") {
		t.Errorf("clean flow: %s", r.stdout)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-msg\ntitle: Messages\nnodes:\n  review:\n    enabled: 0\n---\nbody\n")
	if r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "enabled is 0 (a number); want true or false") || strings.Contains(r.stderr, "uint64") {
		t.Errorf("task value: exit %d %s", r.code, r.stderr)
	}
}
