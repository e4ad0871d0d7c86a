package attempt_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/contracts.md § Prompt templates: each node run saves its rendered
// prompt, redacted, under
// .stratus/logs/<task>/stages/<node>/run-<NNNNNN>/rendered-prompt.md, one per
// run.
func TestLaunch_SavesRedactedRenderedPromptPerNodeRun(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Roles: map[string]string{
		"r/scan.md": "Scan {task_id} with key sk-abcdefghijklmnopqrstuv.\n",
	}})
	r.Visit(t, "scan", "one")
	r.Visit(t, "scan", "two")
	for _, run := range []string{"run-000001", "run-000002"} {
		got := workertest.Read(t, filepath.Join(r.Dir, ".stratus", "logs", "t1", "stages", "scan", run, "rendered-prompt.md"))
		if got != "Scan t1 with key [REDACTED].\n" {
			t.Errorf("%s rendered-prompt.md = %q", run, got)
		}
	}
	if !strings.Contains(r.LastPrompt(t), "sk-abcdefghijklmnopqrstuv") {
		t.Error("the prompt the engine receives should be the unredacted text")
	}
}
