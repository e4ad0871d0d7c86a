package runcheck

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A provider a task names that the config does not allow is said once,
// with the field and the valid names (it read
// "nodes.review.provider: provider: provider …").
func TestPreflight_UnknownProviderSaidOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "flows")
	workertest.WriteFiles(t, dir, workertest.ImplementationFlow(t))
	fl, err := flow.Load(dir, "implementation")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.Parse("t.md", []byte("---\nid: t\ntitle: T\nnodes:\n  review:\n    provider: nosuch\n---\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	probs := Preflight(fl, config.Default(), tk)
	if len(probs) != 1 || probs[0].Message != `nodes.review.provider: provider "nosuch" is not in agents.allowed; valid: `+strings.Join(config.Default().Agents.Allowed, ", ") {
		t.Errorf("problems %+v", probs)
	}
}
