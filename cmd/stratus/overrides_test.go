package main

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// docs/contracts.md § Per-node overrides, end to end: a node's model and
// extra_args, the task's reasoning, the flow's ceiling and network policy
// resolve against config.yaml; the engine receives them in argv (the
// provider's {model} {reasoning} {permission_profile} {network_access}
// placeholders, an empty one dropping its flag, extra_args last) and in
// STRATUS_MODEL, STRATUS_REASONING, STRATUS_PERMISSION_PROFILE and
// STRATUS_NETWORK_ACCESS; the attempt records the resolution with the
// configured pair it overrode.
func TestRun_PerNodeOverridesReachEngineAndAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// The engine records its argv and the four variables, then reports
	// (the first turn only: the answer node's, not the supervisor's after it).
	writeTestFile(t, filepath.Join(dir, "engine.sh"), `read line
[ -f argv.txt ] || printf '%s\n' "$@" > argv.txt
[ -f env.txt ] || printf 'model=%s\nreasoning=%s\nprofile=%s\nnetwork=%s\n' "$STRATUS_MODEL" "$STRATUS_REASONING" "$STRATUS_PERMISSION_PROFILE" "$STRATUS_NETWORK_ACCESS" > env.txt
printf '{"subrun_report": "ok"}\n'
`)
	path := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, path)
	cfg = strings.Replace(cfg, "  providers:\n", `  providers:
    shx:
      command: sh
      args: [engine.sh, --model, "{model}", --effort, "{reasoning}", --sandbox, "{permission_profile}", "--net={network_access}", --max-steps, "{max_steps}"]
      model: cfg-model
      reasoning: low
      timeout_seconds: 900
`, 1)
	cfg = strings.Replace(cfg, "primary: echo", "primary: shx", 1)
	writeTestFile(t, path, cfg)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny.yaml"), `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: workspace-write
  output_policy: repository_document
  publishing: local_artifact
  network_policy: research
  nodes:
    - id: answer
      kind: agent
      role_file: tiny/answer.md
      permission_profile: read-only
      model: node-model
      timeout_seconds: 120
      extra_args: [--label, fast]
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: answer, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/answer.md"), "Answer for {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-over\ntitle: Overrides\ntask_type: tiny\nnodes:\n  answer:\n    reasoning: high\n---\nbody\n")
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}

	wantArgv := []string{"--model", "node-model", "--effort", "high", "--sandbox", "read-only", "--net=true", "--label", "fast"}
	if got := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "argv.txt"))), "\n"); !reflect.DeepEqual(got, wantArgv) {
		t.Errorf("engine argv = %q, want %q (no max_steps: its flag dropped)", got, wantArgv)
	}
	if got, want := readFile(t, filepath.Join(dir, "env.txt")), "model=node-model\nreasoning=high\nprofile=read-only\nnetwork=true\n"; got != want {
		t.Errorf("engine environment:\n%s\nwant:\n%s", got, want)
	}

	res := decodeRun(t, r.stdout)
	st, err := sqlite.Open(filepath.Join(dir, ".stratus/stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	steps, err := st.ListSteps(ctx, res.RunID)
	if err != nil || len(steps) == 0 || steps[0].Node != "answer" {
		t.Fatalf("steps = %+v, %v", steps, err)
	}
	att, err := st.GetAttempt(ctx, steps[0].TID, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := stratus.Resolved{
		Provider: "shx", Model: "node-model", Reasoning: "high", PermissionProfile: "read-only", NetworkAccess: true,
		TimeoutSeconds: 120, ExtraArgs: []string{"--label", "fast"},
		Configured: stratus.ModelChoice{Model: "cfg-model", Reasoning: "low"},
	}
	if !reflect.DeepEqual(att.Resolved, want) {
		t.Errorf("attempt.Resolved = %+v\nwant %+v", att.Resolved, want)
	}
}
