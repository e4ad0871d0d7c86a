package functions_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/architecture.md § Layout (a Lambda's main only wires): each main builds
// only what it uses. A Lambda reaches runs through the ports (DynamoDB store, S3
// sink, Step Functions) and the run lifecycle (internal/lifecycle), never
// through the embedded runtime: not the orchestrator, its executor, its
// launcher, nor SQLite (`go list -deps` of the Lambdas shows no embedded
// orchestrator; docs/architecture.md § The two runtimes).
func TestLambdas_LinkNoEmbeddedRuntime(t *testing.T) {
	t.Parallel()
	goCmd := testenv.MustHaveCommand(t, "go", "go list -deps reads what each function links")
	forbidden := []string{
		"github.com/stratusflow/stratus/internal/orchestrator",
		"github.com/stratusflow/stratus/internal/executor/embedded",
		"github.com/stratusflow/stratus/internal/launch/local",
		"github.com/stratusflow/stratus/internal/store/sqlite",
		"github.com/stratusflow/stratus/internal/awsrun", // the operator's CLI side
		"modernc.org/sqlite",
	}
	for _, name := range functionDirs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(goCmd, "list", "-deps", "./"+name).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", name, err, out)
			}
			deps := strings.Fields(string(out))
			for _, f := range forbidden {
				for _, d := range deps {
					if d == f {
						t.Errorf("functions/%s links %s", name, f)
					}
				}
			}
			if !strings.Contains(string(out), "github.com/stratusflow/stratus/internal/lifecycle") && name == "events" {
				t.Errorf("functions/events does not link internal/lifecycle: who records a run's end?")
			}
			// docs/security.md § Workspace commits: the worker API checks
			// each workspace head move, reading bundles with go-git (its
			// Lambda has no git binary); no other function moves a head,
			// so none other links go-git.
			checks := slices.Contains(deps, "github.com/stratusflow/stratus/internal/workspace/bundlecheck")
			goGit := slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, "github.com/go-git/") })
			switch {
			case name == "workerapi" && !checks:
				t.Errorf("functions/workerapi does not link internal/workspace/bundlecheck: who checks a workspace head move?")
			case name != "workerapi" && (checks || goGit):
				t.Errorf("functions/%s links go-git or internal/workspace/bundlecheck; only the worker API checks head moves", name)
			}
		})
	}
}
