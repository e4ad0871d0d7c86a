package submit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/submit"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// The repeated-fail guard (reference.md § tool node) finds the node's
// previous visit among the node's steps (store.Store NodeSteps), without
// reading the run's whole step list (README.md § Performance); a visit of
// another node in between is not it.
func TestToolVerdict_PreviousVisitReadsOnlyTheNodesSteps(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow("code_change")})
	ctx := context.Background()
	res := &nodeexec.ToolResult{Name: "lint", Status: nodeexec.StatusExited, ExitCode: 1, Stdout: "too short: 120 chars"}
	digest := nodeexec.ToolOutcome(res).Digest
	if digest == "" {
		t.Fatal("a fail without findings has no digest")
	}
	create := func(node, status string, value any) stratus.Step {
		t.Helper()
		raw, _ := json.Marshal(value)
		st, _, err := r.Svc.Store.CreateNextStep(ctx, r.Run.ID, node, "", func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", r.Run.ID, node, v), RunID: r.Run.ID, Node: node, Visit: v,
				Kind: "tool", StepRef: fmt.Sprintf("%s#%d", node, v), Status: status, Value: raw}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	create("lint", stratus.StepCompleted, map[string]string{"outcome": "fail", "digest": digest})
	create("fix", stratus.StepCompleted, map[string]string{"outcome": "done", "digest": "not lint's"})
	cur := create("lint", stratus.StepRunning, nil)
	r.Svc.Store = workertest.ListlessStore{Store: r.Svc.Store}
	tv, err := submit.ToolVerdict(ctx, r.Svc.Service, &core.Caller{Run: r.Run, Step: cur}, res)
	if err != nil || !tv.Manual || tv.Error != nodeexec.ErrToolRepeatedFail {
		t.Errorf("ToolVerdict = %+v, %v; want manual, %s (failed exactly as in lint#1)", tv.Verdict, err, nodeexec.ErrToolRepeatedFail)
	}
}
