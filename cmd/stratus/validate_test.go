package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/sharedtest"
)

// Every flow worc ships reads unchanged (issue 2 § Real input). The only
// fatal problems allowed are the one role file the peer copy lacks
// (implementation/refinement.md, peers/worc/README.md § Caveats) and tools
// that are not installed here.
func TestValidate_PeerFlowsReadUnchanged(t *testing.T) {
	t.Parallel()
	flows := sharedtest.Path(t, "peers", "worc", "flows")
	r := runCLI(t, "validate", "--all", "--flows", flows)
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(line, "error: ") {
			continue
		}
		if strings.Contains(line, "refinement.md") || strings.Contains(line, "tool") {
			continue
		}
		t.Errorf("unexpected fatal problem: %s", line)
	}
	for _, name := range []string{"implementation", "merge", "blog_article", "blog_article_revise", "content_chapter", "content_translate", "content_book"} {
		if !strings.Contains(r.stdout, "flow "+name+": ") {
			t.Errorf("flow %s not reported:\n%s", name, r.stdout)
		}
	}
}

// The built-in flows validate cleanly once installed.
func TestValidate_InstalledBuiltinsAreClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runCLI(t, "validate", "--all", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "flow implementation: ok") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Breaking an edge is fatal and named with its position.
	p := filepath.Join(dir, ".stratus/flows/implementation.yaml")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), "{ from: fixing, to: review }", "{ from: fixing, to: nosuch }", 1)), 0o644)
	r = runCLI(t, "validate", "implementation", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stdout, "nosuch") || !strings.Contains(r.stdout, "implementation.yaml:") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
}

// statemachine/ holds what `make statemachines` writes; a stale file fails.
func TestStatemachines_UpToDate(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if r := runCLI(t, "compile", "--builtin", "--all", "--out-dir", out); r.code != 0 {
		t.Fatal(r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.asl.json"))
	if len(files) == 0 {
		t.Fatal("no state machines compiled")
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(sharedtest.ModuleRoot(t), "statemachine", filepath.Base(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("statemachine/%s is stale: run `make statemachines` and commit", filepath.Base(f))
		}
	}
}
