package submit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/security.md § Part names: a tail staged before the rule (by an
// older build) may hold a name NFKC changes; the submit folds and lists
// the parts without it, says so, and keeps it in the tail.
func TestSubmit_LeavesOutAStagedPartNameNFKCChanges(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.OnePlanFlow})
	st := r.Dispatch(t, "planning")
	ctx := context.Background()
	for _, name := range []string{"plan.md", "pl\u2024an.md"} {
		if _, err := r.Svc.Store.AppendOutput(ctx, stratus.OutputEvent{TID: st.TID, Attempt: 1, Kind: stratus.OutputArtifact,
			Name: name, Body: []byte("body of " + name), OK: true, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	sv, err := r.Submit(t, "done")
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if strings.Join(sv.Parts, ",") != "plan.md" {
		t.Errorf("step value parts = %q; want plan.md alone", sv.Parts)
	}
	got, err := r.Svc.Store.GetStep(ctx, st.TID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got.Value), "2024") || strings.Contains(string(got.Value), "\u2024") {
		t.Errorf("the step's value names the refused part: %s", got.Value)
	}
	if !r.Warned(`"pl\u2024an.md" is not NFKC-stable`) {
		t.Errorf("no warning about the part left out: %q", r.Warnings.Messages())
	}
	tail, _ := r.Svc.Store.ListOutput(ctx, st.TID, 1)
	if len(tail) != 3 {
		t.Errorf("tail has %d events; want both parts and the Final kept", len(tail))
	}
}
