package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/contracts.md § What the supervisor layer does, § The summary artifacts, § Prompt audit:
// `stratus run` end to end with a script engine. The supervisor layer
// observes the review's rework (a deviation under the default events mode),
// its finalize turn at publish returns prose, and summary.md is that prose
// under the task title with the follow-ups and the fact sections; the
// supervisor's turns are no flow steps. The task turns the prompt audit on.
func TestRun_SupervisorFinalizeProseBecomesSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const prose = "The run added a --name flag to the greeting command. The first review found the empty-name case unhandled; the fix now rejects it with exit status 2, and the second review accepted with one low finding left as a follow-up."
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), `
nodes:
  review:
    - report: {findings: [{severity: high, path: main.go, what: "Empty names print garbage.", fix: "Reject them."}]}
    - report: {findings: [{severity: low, path: main_test.go, what: "Test names are vague. They do not say which case they cover.", fix: "Name each row."}]}
  supervisor.observe:
    - report: "The review sent the change back for the empty-name case."
  supervisor.finalize:
    - prompt_tokens: 700
      completion_tokens: 90
      report: "<summary>`+prose+`</summary><follow_ups>[{\"title\": \"leaked\"}]</follow_ups>"
default:
  report: done
`)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-sup\ntitle: Add a --name flag\nprompt_audit: true\n---\n## Description\n\nAdd it.\n\n## Acceptance criteria\n\n- it works\n")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run exit %d\n%s", r.code, r.stderr)
	}
	// The supervisor's turns are not flow steps.
	want := "planning#1:done implementation#1:done review#1:rework fixing#1:done review#2:accept publish#1:done"
	if got := join(steps(r.stderr)); got != want {
		t.Fatalf("steps:\n got %s\nwant %s\nstderr:\n%s", got, want, r.stderr)
	}
	for _, re := range []string{`stratus: supervisor supervisor#\d+ observe \(review#1\)`, `stratus: supervisor supervisor#\d+ finalize ended: written`} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("stderr lacks %s:\n%s", re, r.stderr)
		}
	}

	logs := filepath.Join(dir, ".stratus/logs/t-sup")
	md := readFile(t, filepath.Join(logs, "summary.md"))
	if !strings.HasPrefix(md, "# Add a --name flag\n\n"+prose+"\n\n## Follow-ups\n\n- **Test names are vague.**") || strings.Contains(md, "leaked") {
		t.Errorf("summary.md:\n%s", md)
	}
	for _, h := range []string{"## Pipeline nodes skipped\n", "## Provider fallbacks\n", "## Run cost\n"} {
		if strings.Count(md, h) != 1 {
			t.Errorf("summary.md has %q %d times:\n%s", h, strings.Count(md, h), md)
		}
	}
	var sum struct {
		Summary         string            `json:"summary"`
		FollowUps       []json.RawMessage `json:"follow_ups"`
		Degraded        *bool             `json:"degraded"`
		SupervisorUsage struct {
			ByJob map[string]struct {
				Calls       int   `json:"calls"`
				InputTokens int64 `json:"input_tokens"`
			} `json:"by_job"`
		} `json:"supervisor_usage"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(logs, "summary.json"))), &sum); err != nil {
		t.Fatal(err)
	}
	if fin := sum.SupervisorUsage.ByJob["finalize"]; sum.Summary != prose || sum.Degraded != nil || len(sum.FollowUps) != 1 || fin.Calls != 1 || fin.InputTokens != 700 {
		t.Errorf("summary.json = %+v", sum)
	}
	if pk := readFile(t, filepath.Join(logs, "supervisor/packet.json")); !strings.Contains(pk, `"step_ref": "review#1"`) || !strings.Contains(pk, "Empty names print garbage.") {
		t.Errorf("packet.json:\n%s", pk)
	}

	// prompt_audit: true in the task: one record per agent/evaluator step run.
	files, _ := filepath.Glob(filepath.Join(logs, "prompt-audit/*.md"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if got := strings.Join(names, " "); got != "000001-planning.md 000002-implementation.md 000003-review.md 000004-fixing.md 000005-review.md" {
		t.Errorf("prompt-audit files: %s", got)
	}
	if lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(logs, "prompt-audit/timeline.jsonl"))), "\n"); len(lines) != 5 {
		t.Errorf("timeline.jsonl has %d lines, want 5", len(lines))
	}
}

// docs/contracts.md § Running without a supervisor: supervisor.enabled false
// runs no supervisor turn and the report is rendered from the facts.
func TestRun_SupervisorDisabledRendersFromFacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), "nodes:\n  review:\n    - report: {findings: []}\ndefault:\n  report: done\n")
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	if !strings.Contains(cfg, "\nsupervisor:\n") {
		t.Fatalf("config has no supervisor block:\n%s", cfg)
	}
	writeTestFile(t, cfgPath, strings.Replace(cfg, "\nsupervisor:\n", "\nsupervisor:\n  enabled: false\n", 1))
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-off\ntitle: Off\n---\nbody\n")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "stratus: supervisor ") {
		t.Errorf("a supervisor turn ran with the layer off:\n%s", r.stderr)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-off/summary.md"))
	js := readFile(t, filepath.Join(dir, ".stratus/logs/t-off/summary.json"))
	if !strings.Contains(md, "## Steps\n") || !strings.Contains(md, "## Gates\n") || strings.Contains(js, "degraded") || strings.Contains(js, "supervisor_usage") {
		t.Errorf("summary.json:\n%s\nsummary.md:\n%s", js, md)
	}
}
