package submit_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A report refused because its engine wrote into the operator's work dir
// (docs/security.md § Workspace commits) is the engine's failure: quality,
// whatever the names of the files it wrote say (an engine cannot steer
// its class to a transient one by naming a file "ECONNREFUSED").
func TestFailures_AWorkDirWriteIsQuality(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true})
	r.Svc.WatchWorkDir = true
	step := r.Dispatch(t, "impl")
	workertest.Write(t, filepath.Join(r.Dir, "ECONNREFUSED-429.txt"), "written by the engine\n")
	if _, err := r.Submit(t, "done"); err != nil {
		t.Fatalf("submit: %v", err)
	}
	att, err := r.Svc.Store.LatestAttempt(context.Background(), step.TID)
	if err != nil {
		t.Fatal(err)
	}
	if att.Status != stratus.AttemptFailed || att.Class != failclass.Quality || !strings.Contains(att.Reason, "ECONNREFUSED-429.txt") {
		t.Errorf("attempt %s, class %q, reason %q; want failed, quality, naming the file", att.Status, att.Class, att.Reason)
	}
}
