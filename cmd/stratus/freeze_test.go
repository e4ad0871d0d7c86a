package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/orchestrator"
)

const tinyFlow = `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: read-only
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: write
      kind: agent
      role_file: tiny/write.md
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: write, to: publish }
`

func setupTiny(t *testing.T, placement string) string {
	t.Helper()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny.yaml"), tinyFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/write.md"), "Write.\n")
	if placement != "" {
		cfgPath := filepath.Join(dir, ".stratus/config.yaml")
		cfg := strings.Replace(readFile(t, cfgPath), "placement: workspace/tasks/{task_id}/ctx", "placement: \""+placement+"\"", 1)
		if !strings.Contains(cfg, placement) {
			t.Fatalf("no placement in config.yaml:\n%s", cfg)
		}
		writeTestFile(t, cfgPath, cfg)
	}
	return dir
}

// With projection.placement "{task_id}" and task id "src", the
// ctx dir is the user's own src/. The run refuses to start (exit 2, naming
// the dir and the placement) and src/ is left exactly as it was; before,
// the first run "archived the previous run's ctx dir" — src/main.go — into
// .stratus/logs/src/attempt-1/ctx/.
func TestRun_PlacementOntoAUserDirIsRefusedAndTouchesNothing(t *testing.T) {
	t.Parallel()
	dir := setupTiny(t, "{task_id}")
	writeTestFile(t, filepath.Join(dir, "src/main.go"), "package main\n")
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: src\ntitle: Src\ntask_type: tiny\n---\nbody\n")

	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, filepath.Join(dir, "src")) || !strings.Contains(r.stderr, `"{task_id}"`) {
		t.Fatalf("exit %d, want %d naming the dir and the placement; stderr:\n%s", r.code, ExitUsage, r.stderr)
	}
	if strings.Contains(r.stderr, "stratus: start") {
		t.Errorf("a step ran:\n%s", r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, "src/main.go")); got != "package main\n" {
		t.Errorf("src/main.go = %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "src"))
	if len(entries) != 1 {
		t.Errorf("src/ holds %v, want only main.go", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stratus/logs/src/attempt-1")); err == nil {
		t.Errorf("an attempt-1 archive was made")
	}
}

// A normal rerun still archives: the ctx dir the first run created (it
// carries the marker) moves into .stratus/logs/<task>/attempt-1/ctx/.
func TestRun_RerunArchivesTheCtxDirItCreated(t *testing.T) {
	t.Parallel()
	dir := setupTiny(t, "")
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-rerun\ntitle: Rerun\ntask_type: tiny\n---\nbody\n")
	ctx := filepath.Join(dir, "workspace/tasks/t-rerun/ctx")
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ctx, orchestrator.CtxMarker)); err != nil {
		t.Fatalf("the ctx dir has no marker: %v", err)
	}
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stderr, "attempt-1") {
		t.Fatalf("rerun: exit %d\n%s", r.code, r.stderr)
	}
	arch := filepath.Join(dir, ".stratus/logs/t-rerun/attempt-1")
	for _, p := range []string{"ctx/write.md", "ctx/" + orchestrator.CtxMarker, "summary.md"} {
		if _, err := os.Stat(filepath.Join(arch, p)); err != nil {
			t.Errorf("archive lacks %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ctx, "write.md")); err != nil {
		t.Errorf("the rerun's ctx dir lacks write.md: %v", err)
	}
}

const frozenFlow = `flow:
  name: frozen
  task_type: frozen
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - id: mutate
      kind: tool
      tool: mutate
    - id: write
      kind: agent
      role_file: frozen/write.md
    - id: stamp
      kind: tool
      tool: stamp
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: mutate, to: write, outcome: pass }
    - { from: write, to: stamp }
    - { from: stamp, to: publish, outcome: pass }
`

// worc WRI-010: a run reads its role files and tools from a
// snapshot taken when it starts. Its first node, a tool, rewrites the role
// file of the next node and the tool of the one after (what an edit
// mid-run, or a workspace-write agent, would do); the later steps still
// see the originals. The snapshot is kept as the run's record under
// .stratus/runs/<run_id>/bundle/.
func TestRun_RoleFilesAndToolsAreFrozenAtRunStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/frozen.yaml"), frozenFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/frozen/write.md"), "ORIGINAL role text.\n")
	tools := filepath.Join(dir, ".stratus/tools")
	writeTestFile(t, filepath.Join(tools, "mutate"), `#!/bin/sh
cat > /dev/null
echo 'EDITED role text.' > .stratus/flows/frozen/write.md
printf '#!/bin/sh\ncat > /dev/null\necho edited > stamp.txt\necho pass\n' > .stratus/tools/stamp
echo '{"outcome":"pass"}'
`)
	writeTestFile(t, filepath.Join(tools, "stamp"), "#!/bin/sh\ncat > /dev/null\necho original > stamp.txt\necho '{\"outcome\":\"pass\"}'\n")
	os.Chmod(filepath.Join(tools, "mutate"), 0o755)
	os.Chmod(filepath.Join(tools, "stamp"), 0o755)
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-frozen\ntitle: Frozen\ntask_type: frozen\n---\nbody\n")

	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "mutate#1:pass write#1:done stamp#1:pass publish#1:done" {
		t.Fatalf("steps: %s\n%s", got, r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, ".stratus/flows/frozen/write.md")); !strings.Contains(got, "EDITED") {
		t.Fatalf("the mutate tool did not edit the role file: %q", got)
	}
	prompt := readFile(t, filepath.Join(dir, ".stratus/logs/t-frozen/stages/write/run-000001/rendered-prompt.md"))
	if !strings.Contains(prompt, "ORIGINAL role text.") || strings.Contains(prompt, "EDITED") {
		t.Errorf("write#1 did not render the role file frozen at the start:\n%s", prompt)
	}
	if got := readFile(t, filepath.Join(dir, "stamp.txt")); got != "original\n" {
		t.Errorf("stamp#1 ran the tool as edited mid-run: stamp.txt = %q", got)
	}
	res := decodeRun(t, r.stdout)
	bundle := filepath.Join(dir, ".stratus/runs", res.RunID, "bundle")
	if got := readFile(t, filepath.Join(bundle, "flows/frozen/write.md")); got != "ORIGINAL role text.\n" {
		t.Errorf("the run's bundle holds write.md = %q", got)
	}
	if _, err := os.Stat(filepath.Join(bundle, "manifest.json")); err != nil {
		t.Errorf("no manifest in the run's bundle: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, ".stratus/runs", res.RunID))
	if len(entries) != 2 || entries[0].Name() != "bundle" || entries[1].Name() != "definition.asl.json" {
		t.Errorf(".stratus/runs/%s holds %v after the run; want only bundle/ and definition.asl.json (the materialized copy is removed)", res.RunID, entries)
	}
}
