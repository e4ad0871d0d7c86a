package handler_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// A Lambda links what it uses. None of the functions links the SQLite driver
// or store, the embedded executor, the local launcher, the orchestrator that
// drives embedded runs, or the run viewer: those are the embedded mode's, and
// each would add size and init time to every cold start.
func TestLambdas_LinkOnlyWhatTheyUse(t *testing.T) {
	testenv.MustHaveCommand(t, "go", "go list reads the functions' dependencies")
	forbidden := []string{
		"modernc.org/sqlite",
		"github.com/stratusflow/stratus/internal/store/sqlite",
		"github.com/stratusflow/stratus/internal/executor/embedded",
		"github.com/stratusflow/stratus/internal/launch/local",
		"github.com/stratusflow/stratus/internal/orchestrator",
		"github.com/stratusflow/stratus/internal/webui",
		"github.com/spf13/cobra",
	}
	for _, fn := range []string{"claim", "dispatch", "events", "workerapi"} {
		cmd := exec.Command("go", "list", "-deps", "./functions/"+fn)
		cmd.Dir = testenv.ModuleRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./functions/%s: %v", fn, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps ./functions/%s listed %d packages", fn, len(deps))
		}
		for _, d := range deps {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("functions/%s links %s", fn, d)
				}
			}
		}
	}
}
