package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// checkGenerated compiles with args into a temp dir and compares it with
// the committed dir: every compiled file must be there byte for byte, and
// no committed file may lack a flow (the ASL of every flow is generated into
// statemachine/ and committed; DESIGN.md § Layout: CI fails when it is
// stale).
func checkGenerated(t *testing.T, committed string, args ...string) {
	t.Helper()
	out := t.TempDir()
	if r := runCLI(t, append(args, "--out-dir", out)...); r.code != 0 {
		t.Fatalf("stratus %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	names := func(dir string) []string {
		files, _ := filepath.Glob(filepath.Join(dir, "*.asl.json"))
		for i, f := range files {
			files[i] = filepath.Base(f)
		}
		sort.Strings(files)
		return files
	}
	compiled := names(out)
	if len(compiled) == 0 {
		t.Fatal("no state machines compiled")
	}
	rel, _ := filepath.Rel(testenv.ModuleRoot(t), committed)
	for _, name := range compiled {
		want, _ := os.ReadFile(filepath.Join(out, name))
		got, err := os.ReadFile(filepath.Join(committed, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s/%s is stale or missing: run `make statemachines` and commit", rel, name)
		}
	}
	for _, name := range names(committed) {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s/%s has no flow any more: run `make statemachines` (it removes it) and commit", rel, name)
		}
	}
}

// statemachine/<flow>.asl.json is what `make statemachines` writes for
// each built-in flow.
func TestStatemachines_BuiltinUpToDate(t *testing.T) {
	t.Parallel()
	checkGenerated(t, filepath.Join(testenv.ModuleRoot(t), "statemachine"), "compile", "--builtin", "--all")
}

// statemachine/worc/<task_type>.asl.json is what `make statemachines`
// writes for each worc peer flow, compiled structurally (their tools and
// role files need not be here). Without ../shared/peers beside the
// checkout it is skipped, saying so (internal/testenv); CI has it.
func TestStatemachines_WorcPeersUpToDate(t *testing.T) {
	t.Parallel()
	peers := testenv.Peers(t, "worc", "flows")
	checkGenerated(t, filepath.Join(testenv.ModuleRoot(t), "statemachine", "worc"), "compile", "--all", "--structural", "--flows", peers)
}

// --structural compiles a flow whose role files are absent (worc's
// implementation.yaml names implementation/refinement.md, which the peer
// tree does not ship), yet still applies the security ceiling.
func TestCompile_StructuralSkipsRoleFileExistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "tiny.yaml"), `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - id: answer
      kind: agent
      role_file: tiny/missing.md
    - id: publish
      kind: publish
      policy: local_artifact
  edges:
    - { from: answer, to: publish }
`)
	r := runCLI(t, "compile", "tiny", "--structural", "--flows", dir)
	if r.code != 0 || !strings.Contains(r.stdout, `"StartAt"`) {
		t.Fatalf("--structural: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Structural still means the security ceiling: an escaping role_file
	// is refused.
	writeTestFile(t, filepath.Join(dir, "tiny.yaml"), strings.Replace(readFile(t, filepath.Join(dir, "tiny.yaml")), "tiny/missing.md", "../escape.md", 1))
	if r := runCLI(t, "compile", "tiny", "--structural", "--flows", dir); r.code == 0 || !strings.Contains(r.stderr, "escape.md") {
		t.Errorf("--structural with role_file ../escape.md: exit %d, stderr %s; want a refusal naming it", r.code, r.stderr)
	}
}
