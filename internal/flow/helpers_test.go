package flow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedDir returns the read-only spec tree: walk up from the package
// directory to the one holding go.mod, then ../shared.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// peerFlowsDir is worc's packaged flows directory (the role_file root).
func peerFlowsDir(t *testing.T) string {
	return filepath.Join(sharedDir(t), "peers", "worc", "flows")
}

// header is a valid flow header; tests append nodes/edges/budgets to it.
const header = `flow:
  name: t
  task_type: t
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
`

// mustParse parses header+body or fails the test.
func mustParse(t *testing.T, body string) *Flow {
	t.Helper()
	f, err := Parse("t.yaml", []byte(header+body))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

// fatalPaths returns the Path of each fatal problem, in order.
func fatalPaths(ps []Problem) []string {
	var out []string
	for _, p := range Fatal(ps) {
		out = append(out, p.Path)
	}
	return out
}

func problemsText(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		if !p.Fatal {
			b.WriteString(" (warning)")
		}
		b.WriteString("\n")
	}
	return b.String()
}
