package flow

import (
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// peerFlowsDir is worc's packaged flows directory (the role_file root).
// It skips t when they are not beside the checkout (internal/testenv).
func peerFlowsDir(t *testing.T) string {
	t.Helper()
	return testenv.Peers(t, "worc", "flows")
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
