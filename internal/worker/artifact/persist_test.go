package artifact_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/artifact"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/security.md § Output that did not persist: a part whose file the
// disk refuses is not staged — the worker gets 507 and the step's parts do
// not list it — while a part staged before stays listed and on disk.
func TestArtifact_RefusedFileStagesNothing(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
	step := r.Dispatch(t, "draft")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	if err := artifact.Artifact(context.Background(), r.Svc.Service, auth, "kept.md", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	r.Svc.Sink = &workertest.RefusingSink{Sink: r.Svc.Sink, Suffix: "/lost.md", Err: syscall.ENOSPC}
	if err := artifact.Artifact(context.Background(), r.Svc.Service, auth, "lost.md", []byte("lost")); stratus.ErrorCode(err) != stratus.ENOSPACE {
		t.Fatalf("artifact on a full disk: %v; want ENOSPACE", err)
	}
	sv, err := r.Submit(t, "# Draft\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sv.Parts, ",") != "kept.md" {
		t.Errorf("%s lists parts %v; want only kept.md (lost.md never persisted)", step.StepRef, sv.Parts)
	}
	if got := workertest.Read(t, r.Ctx("kept.md")); got != "kept" {
		t.Errorf("kept.md holds %q", got)
	}
}
