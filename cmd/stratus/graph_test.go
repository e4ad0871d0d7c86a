package main

import (
	"regexp"
	"strings"
	"testing"
)

// issue 15 § 2: `stratus graph` prints an installed flow as Mermaid or dot;
// a bad format or an unknown flow is a usage error.
func TestGraph_MermaidDotAndErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	m := runCLI(t, "graph", "implementation", "--dir", dir)
	if m.code != 0 || !strings.HasPrefix(m.stdout, "flowchart TD\n") || !strings.Contains(m.stdout, `n_review -->|"rework · review_fix ≤3"| n_fixing`) {
		t.Errorf("graph (mermaid): exit %d\n%s%s", m.code, m.stdout, m.stderr)
	}
	d := runCLI(t, "graph", "implementation", "--dir", dir, "--format", "dot")
	if d.code != 0 || !strings.Contains(d.stdout, `"fixing" -> "review" [style=dashed, constraint=false]`) {
		t.Errorf("graph --format dot: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	for _, args := range [][]string{{"graph", "implementation", "--dir", dir, "--format", "png"}, {"graph", "nope", "--dir", dir}, {"graph"}} {
		if r := runCLI(t, args...); r.code != ExitUsage || r.stderr == "" {
			t.Errorf("%v: exit %d %q; want %d with a message", args, r.code, r.stderr, ExitUsage)
		}
	}
}

// issue 15 § 2: `stratus --version` names the version, the commit and Go.
func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "--version")
	if r.code != 0 || !regexp.MustCompile(`^stratus \S+ \(commit \S+.*, go1\.\d+`).MatchString(r.stdout) {
		t.Errorf("--version: exit %d %q", r.code, r.stdout)
	}
}
