package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// worc reference.md § Conditional nodes: a gate the task
// disables (nodes.testing.enabled: false) does not gate. Its step reads
// skipped, and the run goes down its pass edge to done — the check, which
// would fail here (no fix), never runs.
func TestRun_DisabledChecksGateDoesNotGate(t *testing.T) {
	t.Parallel()
	dir := gatedSetup(t, false)
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-gated\ntitle: Gated\ntask_type: gated\nnodes: { testing: { enabled: false } }\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d, want %d (done)\n%s", r.code, ExitOK, r.stderr)
	}
	if got, want := join(steps(r.stderr)), "implementation#1:done testing#1:skipped publish#1:done"; got != want {
		t.Fatalf("steps:\n got %s\nwant %s\n%s", got, want, r.stderr)
	}
}

// On worc's implementation.yaml read unchanged: with review
// disabled by the task, the evaluator is skipped on every pass and the run
// continues down its accept edge (leaving the decomposition region) to
// documentation and publish.
func TestRun_WorcImplementationWithReviewDisabledEndsDone(t *testing.T) {
	t.Parallel()
	peers := testenv.Peers(t, "worc")
	dir := t.TempDir()
	scenario := filepath.Join(dir, "scenario.yaml")
	writeTestFile(t, scenario, peersScenario)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", scenario); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	copyTree(t, filepath.Join(peers, "flows"), filepath.Join(dir, ".stratus/flows"))
	task := readFile(t, filepath.Join(peers, "tasks/task-minimal.md"))
	task = strings.Replace(task, "---\n", "---\nnodes: { review: { enabled: false } }\n", 1)
	if !strings.Contains(task, "id: task-pagination") {
		t.Fatalf("task-minimal.md changed shape:\n%s", task)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), task)
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d, want %d (done)\n%s", r.code, ExitOK, r.stderr)
	}
	want := "refinement#1:skipped planning#1:done implementation#1:done testing#1:pass review#1:skipped documentation#1:done publish#1:done"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\n%s", got, want, r.stderr)
	}
}

// terminalGateFlow is gatedFlow ending on its checks node: no edge
// leaves testing.
const terminalGateFlow = `flow:
  name: gated
  task_type: gated
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: implementation
      kind: agent
      role_file: gated/implementation.md
      permission_profile: workspace-write
    - id: testing
      kind: checks
      checker: command_profile
  edges:
    - { from: implementation, to: testing }
`

// A gate with no outgoing edge ends the run done on its pass
// outcome only; a failing check there parks the run at
// manual_action_required (fail closed) rather than ending it done, and
// validate warns that the gate is terminal.
func TestRun_FailingTerminalGateParksTheRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fixed bool // the work tree passes the check
		code  int
		want  string
	}{
		{"failing check parks", false, ExitManual, "implementation#1:done testing#1:fail"},
		{"passing check ends done", true, ExitOK, "implementation#1:done testing#1:pass"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := gatedSetup(t, false)
			writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated.yaml"), terminalGateFlow)
			if c.fixed {
				// implementation writes "broken"; a check that reads a file
				// the engine never touches passes.
				writeTestFile(t, filepath.Join(dir, "check.sh"), "exit 0\n")
			}
			r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, c.code, r.stderr)
			}
			if got := join(steps(r.stderr)); got != c.want {
				t.Fatalf("steps:\n got %s\nwant %s\n%s", got, c.want, r.stderr)
			}
		})
	}
	dir := gatedSetup(t, false)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated.yaml"), terminalGateFlow)
	r := runCLI(t, "validate", "gated", "--dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout+r.stderr, `node "testing" is a terminal gate: only its pass outcome ends done`) {
		t.Errorf("validate: exit %d, want 0 with the terminal-gate warning\n%s%s", r.code, r.stdout, r.stderr)
	}
}
