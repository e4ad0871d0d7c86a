package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// worc: "all fatal, all collected": an unknown key, a value of
// the wrong type and a key given twice no longer hide the graph, security
// and tool-registry problems: validate lists them all, sorted by position,
// and leaves out what only restates a parse problem.
func TestValidate_ParseProblemsDoNotHideTheOtherLayers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	flowFile := filepath.Join(dir, ".stratus/flows/mixed.yaml")
	writeTestFile(t, flowFile, `flow:
  name: mixed
  task_type: mixed
  permission_ceiling: read-only
  output_policy: code_change
  publishing: local_artifact
  colour: blue
  nodes:
    - { id: write, kind: agent, role_file: [mixed/write.md], permission_profile: workspace-write }
    - { id: gate, kind: tool, tool: nosuch, tool: again }
    - { id: done, kind: publish, policy: local_artifact }
  edges:
    - { from: write, to: gate }
    - { from: gate, to: done, outcome: pass }
    - { from: gate, to: nowhere, outcome: fail, budget: 1 }
`)
	r := runCLI(t, "validate", "mixed", "--dir", dir)
	if r.code != ExitFailed {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := []string{
		"error: " + flowFile + `:7:3: unknown key "colour" in flow`,
		"error: " + flowFile + `:9:44: nodes[0].role_file must be a string, got a list`,
		"error: " + flowFile + `:9:62: node "write" permission_profile "workspace-write" exceeds the flow permission_ceiling "read-only"`,
		"error: " + flowFile + `:10:31: node "gate": tool "nosuch" is not installed`,
		"error: " + flowFile + `:10:45: duplicate key "tool" (first at line 10, column 31)`,
		"error: " + flowFile + `:15:21: edge to "nowhere": no node has that id`,
		"flow mixed: 6 errors, ",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "flow ") {
			got = append(got, l)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("want %d lines, got:\n%s", len(want), r.stdout)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("line %d:\n got %s\nwant %s...", i, got[i], w)
		}
	}
	if strings.Contains(r.stdout, "requires role_file") {
		t.Errorf("a cascade of the role_file type problem was listed:\n%s", r.stdout)
	}
}

// config.yaml's problems come in one error, each with file:line:col, the
// semantic ones located at their key too.
func TestValidate_ConfigProblemsAllAtOnceWithPositions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	cfg = strings.Replace(cfg, "primary: echo", "primary: nope\n  colour: blue", 1)
	cfg = strings.Replace(cfg, "token_ttl_seconds: 600", "token_ttl_seconds: -1", 1)
	writeTestFile(t, cfgPath, cfg)
	r := runCLI(t, "validate", "--all", "--dir", dir)
	if r.code == 0 {
		t.Fatalf("exit 0 with a broken config.yaml\n%s", r.stdout)
	}
	lineOf := func(s string) int {
		return strings.Count(cfg[:strings.Index(cfg, s)], "\n") + 1
	}
	for _, want := range []string{
		cfgPath + ":" + strconv.Itoa(lineOf("primary: nope")) + ":3: agents.primary: provider \"nope\" has no launch spec",
		cfgPath + ":" + strconv.Itoa(lineOf("colour: blue")) + ":3: agents.colour: unknown key \"colour\" in agents",
		cfgPath + ":" + strconv.Itoa(lineOf("token_ttl_seconds: -1")) + ":3: worker.token_ttl_seconds: -1 is negative",
	} {
		if !strings.Contains(r.stdout, "error: "+want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != ExitFailed || !strings.Contains(r.stdout, "config "+cfgPath+": 3 errors, 0 warnings\n") {
		t.Errorf("exit %d; want %d and a summary line of 3 errors:\n%s", r.code, ExitFailed, r.stdout)
	}
}
