package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// helloFlow: the script engine writes a file, a checks node gates it.
const helloFlow = `flow:
  name: hello
  task_type: hello
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: implementation
      kind: agent
      role_file: hello/implementation.md
      permission_profile: workspace-write
    - id: testing
      kind: checks
      checker: command_profile
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: implementation, to: testing }
    - { from: testing, to: publish, outcome: pass }
`

// helloScenario is a script-engine scenario whose implementation writes
// file with body.
func helloScenario(file, body string) string {
	return "nodes:\n  implementation:\n    - files:\n        " + file + ": \"" + body + "\\n\"\n      report: wrote " + file + "\ndefault:\n  report: ok\n"
}

// README § Workspaces, on a new user's own repository: install, then a
// run (script engine, a checks node) with the task file untracked in the
// work dir. The printed `git merge stratus/<task>` succeeds and adds only
// the run's change; a second run's branch carries nothing of the first
// (its task file, ctx files, logs); `git add -A` then stages the
// operator's files of .stratus/ and no runtime file.
func TestFirstHour_BranchMergesCleanlyAndCarriesOnlyTheRunsChange(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the run's change comes back as a git branch")
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "README.md"), "my project\n")
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "my project")
	scenarios := t.TempDir()
	install := func(file, body string) {
		t.Helper()
		scen := filepath.Join(scenarios, file+".yaml")
		writeTestFile(t, scen, helloScenario(file, body))
		if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", scen); r.code != 0 || !strings.Contains(r.stdout, "commit with your project: .stratus/.gitignore") {
			t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	install("hello.txt", "hello world")
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	sets := "checks:\n  timeout_seconds: 60\n  command_sets:\n    hello:\n      commands:\n        - { name: says-hello, argv: [sh, -c, \"test -s hello.txt || test -s bye.txt\"] }\n"
	if !strings.Contains(cfg, "checks:\n  timeout_seconds: 7200\n") {
		t.Fatalf("config.yaml has no default checks block:\n%s", cfg)
	}
	writeTestFile(t, cfgPath, strings.Replace(cfg, "checks:\n  timeout_seconds: 7200\n", sets, 1))
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/hello.yaml"), helloFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/hello/implementation.md"), "Implement {task_id}.\n")

	run := func(id string) {
		t.Helper()
		task := filepath.Join(dir, id+".md") // untracked, in the work dir, as the README has it
		writeTestFile(t, task, "---\nid: "+id+"\ntitle: Say hello\ntask_type: hello\n---\nbody\n")
		r := runCLI(t, "run", task, "--dir", dir)
		if got := join(steps(r.stderr)); r.code != ExitOK || got != "implementation#1:done testing#1:pass publish#1:done" {
			t.Fatalf("run %s: exit %d, steps %s\n%s", id, r.code, got, r.stderr)
		}
		if !strings.Contains(r.stderr, "take it with git merge stratus/"+id) || strings.Contains(r.stderr, "no branch will be made") {
			t.Errorf("run %s does not say how to take its branch:\n%s", id, r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, filepath.Join(dir, ".stratus", "ctx", id)) {
			t.Errorf("run %s: its ctx dir is not in the state dir:\n%s%s", id, r.stdout, r.stderr)
		}
	}
	merge := func(id, want string) {
		t.Helper()
		before := gitIn(t, dir, "rev-parse", "HEAD")
		if got := gitIn(t, dir, "diff", "--name-only", "HEAD", "stratus/"+id); got != want {
			t.Errorf("branch stratus/%s changes %q, want %q alone", id, got, want)
		}
		gitIn(t, dir, "merge", "stratus/"+id)
		if got := gitIn(t, dir, "diff", "--name-only", before, "HEAD"); got != want {
			t.Errorf("git merge stratus/%s added %q, want %q alone", id, got, want)
		}
	}

	run("t-first")
	merge("t-first", "hello.txt")
	if got := readFile(t, filepath.Join(dir, "hello.txt")); got != "hello world\n" {
		t.Errorf("hello.txt after the merge = %q", got)
	}
	install("bye.txt", "bye")
	run("t-second")
	merge("t-second", "bye.txt")

	gitIn(t, dir, "add", "-A")
	for _, p := range strings.Fields(gitIn(t, dir, "diff", "--cached", "--name-only")) {
		rest, inState := strings.CutPrefix(p, ".stratus/")
		if !inState {
			if p != "t-first.md" && p != "t-second.md" {
				t.Errorf("git add -A staged %s, neither a task file nor Stratus's", p)
			}
			continue
		}
		if rest != ".gitignore" && rest != "config.yaml" && rest != "scenario.yaml" && !strings.HasPrefix(rest, "flows/") {
			t.Errorf("git add -A staged the runtime file %s", p)
		}
	}
}

// README § Workspaces, bad input: a work dir that is not a git repository
// keeps in-place mode, and its run says once, on stderr, that no branch
// will be made and why; naming the mode in config.yaml silences it.
func TestFirstHour_NoGitWorkDirSaysOnceNoBranchWillBeMade(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(root, "examples/scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(root, "examples/task.md")))
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "no branch will be made"); n != 1 || !strings.Contains(r.stderr, "no git repository contains it") {
		t.Errorf("stderr says %d times that no branch will be made (want once, with why):\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, filepath.Join(dir, "workspace/tasks/demo-greeting/ctx")) {
		t.Errorf("an in-place run's ctx dir is not at projection.placement:\n%s", r.stderr)
	}
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, readFile(t, cfgPath)+"workspace: workdir\n")
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK || strings.Contains(r.stderr, "no branch will be made") {
		t.Errorf("with workspace: workdir named: exit %d\n%s", r.code, r.stderr)
	}
}
