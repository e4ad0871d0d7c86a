package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/testenv"
)

// worcHome writes a worc home as worc's install would leave it: a
// config.yaml in worc's shape, an operator flow named like a built-in, a
// flow of its own with its role file, and a tool.
func worcHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), ".worc")
	impl, err := builtin.Flows.ReadFile("flows/implementation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]string{
		"config.yaml": `schema_version: 35
repo:
  url: "git@github.com:OWNER/REPO.git"
  local_path: "./workspace/repo"
agents:
  allowed: [claude, codex]
  max_stage_attempts: 3
  max_fix_cycles: 4
  decomposition: { enabled: true, max_subtasks: 6 }
  providers:
    claude:
      command: "claude"
      primary: true
      model: "claude-sonnet-5"
      reasoning: high
      timeout_seconds: 5400
      max_turns: 250
      permission_profile: "workspace-write"
      extra_args: []
    codex:
      command: "codex"
      model: "gpt-5.4"
      reasoning: medium
      max_turns: none
checks:
  timeout_seconds: 900
  command_sets:
    repo:
      paths: []
      commands:
        - { name: tests, argv: ["go", "test", "./..."] }
security:
  strict_isolation: true
  allowed_environment: [PATH, HOME, GOPATH]
  denied_read_paths: [".env"]
supervisor:
  enabled: true
  provider: claude
  observe: { mode: events, triggers: [rework, failure] }
hitl:
  timeout_seconds: 3600
prompt_audit: true
telegram:
  enabled: false
`,
		"flows/implementation.yaml": strings.Replace(string(impl), "review_fix: 3", "review_fix: 2", 1),
		"flows/notes.yaml":          "flow:\n  name: notes\n  task_type: notes\n  permission_ceiling: read-only\n  output_policy: repository_document\n  publishing: local_artifact\n  nodes:\n    - { id: write, kind: agent, role_file: notes/write.md }\n    - { id: publish, kind: publish, policy: local_artifact }\n  edges:\n    - { from: write, to: publish }\n",
		"flows/notes/write.md":      "Write notes on {task_id}.\n",
		"tools/count_words.sh":      "#!/bin/sh\nwc -w \"$1\"\n",
	} {
		writeTestFile(t, filepath.Join(home, path), body)
	}
	os.Chmod(filepath.Join(home, "tools/count_words.sh"), 0o755)
	return home
}

// `install --from-worc` imports a worc setup: its flows (one
// replacing the built-in of its name, said so), its tools (executable), and
// a config.yaml mapped from worc's that validates; every worc key it could
// not map is listed with why.
func TestInstall_FromWorc(t *testing.T) {
	t.Parallel()
	home := worcHome(t)
	dir := t.TempDir()
	r := runCLI(t, "install", "--dir", dir, "--from-worc", home)
	if r.code != 0 {
		t.Fatalf("install --from-worc: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"config.yaml (primary claude)", "imported 2 flows (implementation, notes), 1 tool file;",
		"flow implementation replaces the built-in of that name",
		"not imported: repo — Stratus runs in the work dir it is given",
		"not imported: agents.providers.claude.permission_profile —",
		"not imported: agents.providers.codex.max_turns: none — no cap in Stratus is max_steps unset",
		"not imported: security.denied_read_paths —", "not imported: telegram —", "not imported: agents.decomposition.max_subtasks —"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "not imported: agents.max_stage_attempts") {
		t.Errorf("agents.max_stage_attempts is left out:\n%s", r.stdout)
	}
	cfg, err := config.Load(filepath.Join(dir, ".stratus/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Agents.RetrySettings(); s.MaxStageAttempts != 3 || s.MaxAttempts != config.DefaultRetryMaxAttempts {
		t.Errorf("retry settings %+v: want worc's max_stage_attempts 3 and the default agents.retry", s)
	}
	claude, codex := cfg.Agents.Providers["claude"], cfg.Agents.Providers["codex"]
	if cfg.Agents.Primary != "claude" || claude.Model != "claude-sonnet-5" || claude.Reasoning != "high" || claude.TimeoutSeconds != 5400 || claude.MaxSteps != 250 ||
		codex.Model != "gpt-5.4" || codex.MaxSteps != 0 || cfg.Agents.MaxFixCycles != 4 || !cfg.Agents.Decomposition.Enabled {
		t.Errorf("agents: %+v", cfg.Agents)
	}
	if cs := cfg.Checks.CommandSets["repo"]; cfg.Checks.TimeoutSeconds != 900 || len(cs.Commands) != 1 || cs.Commands[0].Name != "tests" {
		t.Errorf("checks: %+v", cfg.Checks)
	}
	if !strings.Contains(strings.Join(cfg.Security.AllowedEnvironment, ","), "GOPATH") || !cfg.Security.Strict() || cfg.HITL.TimeoutSeconds != 3600 || !cfg.PromptAudit ||
		cfg.Supervisor.Provider != "claude" || cfg.Supervisor.Observe.Mode != "events" {
		t.Errorf("security %+v, hitl %+v, prompt_audit %v, supervisor %+v", cfg.Security, cfg.HITL, cfg.PromptAudit, cfg.Supervisor)
	}
	if got := readFile(t, filepath.Join(dir, ".stratus/flows/implementation.yaml")); !strings.Contains(got, "review_fix: 2") {
		t.Errorf("the worc flow did not replace the built-in")
	}
	if fi, err := os.Stat(filepath.Join(dir, ".stratus/tools/count_words.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("the tool: %v %v; want it executable", fi, err)
	}
	// The imported flows are valid; what validate may still refuse is what
	// run would: the claude CLI and its key, absent from this machine.
	v := runCLI(t, "validate", "--all", "--dir", dir)
	for _, l := range strings.Split(v.stdout, "\n") {
		if strings.HasPrefix(l, "error: ") && !strings.Contains(l, ": provider claude (used by ") {
			t.Errorf("validate --all after the import: %s", l)
		}
	}
	if v.code != 0 && !strings.Contains(v.stdout, "provider claude") {
		t.Errorf("validate --all after the import: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	// An existing config is never replaced without --force; a path that is
	// no worc home is refused, naming it.
	if again := runCLI(t, "install", "--dir", dir, "--from-worc", home); again.code != ExitUsage || !strings.Contains(again.stderr, "--force") {
		t.Errorf("a second import: exit %d %s", again.code, again.stderr)
	}
	if bad := runCLI(t, "install", "--dir", t.TempDir(), "--from-worc", t.TempDir()); bad.code != ExitUsage || !strings.Contains(bad.stderr, "holds neither config.yaml nor flows/") {
		t.Errorf("a directory that is no worc home: exit %d %s", bad.code, bad.stderr)
	}
	// An empty path is no silent plain install, and a
	// flow that will not run is said at import.
	if bad := runCLI(t, "install", "--dir", t.TempDir(), "--from-worc", ""); bad.code != ExitUsage || !strings.Contains(bad.stderr, "worc home") {
		t.Errorf(`--from-worc "": exit %d %s`, bad.code, bad.stderr)
	}
	writeTestFile(t, filepath.Join(home, "flows/broken.yaml"), "flow:\n  name: broken\n  task_type: broken\n  nodes: [\n")
	if r := runCLI(t, "install", "--dir", t.TempDir(), "--from-worc", home); r.code != 0 || !strings.Contains(r.stderr, "imported flow broken does not validate; `stratus validate broken") {
		t.Errorf("a broken worc flow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// worc's own packaged flows import unchanged (../shared/peers: skipped on
// a clone without it).
func TestInstall_FromWorcPeerFlows(t *testing.T) {
	t.Parallel()
	flows := testenv.Peers(t, "worc", "flows")
	home := filepath.Join(t.TempDir(), ".worc")
	if err := os.CopyFS(filepath.Join(home, "flows"), os.DirFS(flows)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := runCLI(t, "install", "--dir", dir, "--from-worc", home)
	if r.code != 0 || !strings.Contains(r.stdout, "not imported: config.yaml — absent") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	entries, _ := os.ReadDir(flows)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			if _, err := os.Stat(filepath.Join(dir, ".stratus/flows", e.Name())); err != nil {
				t.Errorf("worc flow %s not imported: %v", e.Name(), err)
			}
		}
	}
}

// --reconfigure refreshes the built-in flows after moving
// flows/ and tools/ aside to <dir>.bak-<UTC>, keeping the newest three
// snapshots of each and never a directory named otherwise.
func TestInstall_ReconfigureSnapshotsAndKeepsThree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	flowPath := filepath.Join(dir, ".stratus/flows/implementation.yaml")
	writeTestFile(t, flowPath, "edited\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/tools/mine.sh"), "#!/bin/sh\n")
	os.MkdirAll(filepath.Join(dir, ".stratus/flows.bak-mine"), 0o755)
	clock := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for i := range 5 {
		o := &InstallOptions{IO: IO{In: strings.NewReader(""), Out: &syncBuffer{}, Err: &syncBuffer{}}, Dir: dir, Reconfigure: true,
			now: func() time.Time { return clock.Add(time.Duration(i) * time.Minute) }}
		if err := runInstall(o); err != nil {
			t.Fatalf("reconfigure %d: %v", i, err)
		}
	}
	if got := readFile(t, flowPath); got == "edited\n" || !strings.Contains(got, "task_type: implementation") {
		t.Errorf("the built-in was not refreshed: %q", got)
	}
	var flowSnaps, toolSnaps []string
	entries, _ := os.ReadDir(filepath.Join(dir, ".stratus"))
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "flows.bak-"):
			flowSnaps = append(flowSnaps, e.Name())
		case strings.HasPrefix(e.Name(), "tools.bak-"):
			toolSnaps = append(toolSnaps, e.Name())
		}
	}
	want := []string{"flows.bak-20261202T090200Z", "flows.bak-20261202T090300Z", "flows.bak-20261202T090400Z", "flows.bak-mine"}
	if strings.Join(flowSnaps, " ") != strings.Join(want, " ") {
		t.Errorf("flow snapshots %v; want %v", flowSnaps, want)
	}
	if len(toolSnaps) != 1 || readFile(t, filepath.Join(dir, ".stratus", toolSnaps[0], "mine.sh")) != "#!/bin/sh\n" {
		t.Errorf("tool snapshots %v; want the one tools/ that existed", toolSnaps)
	}
	if r := runCLI(t, "install", "--dir", t.TempDir(), "--reconfigure"); r.code != ExitUsage {
		t.Errorf("reconfigure without an install: exit %d", r.code)
	}
}
