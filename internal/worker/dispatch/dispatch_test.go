package dispatch_test

import (
	"testing"

	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/architecture.md § Limits (heartbeats): HeartbeatSeconds runs from the
// dispatch message, so the step's task token is heartbeaten as soon as its
// worker is launched (a Fargate task takes 30-90 s before its runner posts
// any stats).
func TestDispatch_HeartbeatsOnceTheWorkerIsLaunched(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow})
	st := r.Dispatch(t, "planning")
	if n := r.Tokens.Heartbeats(st.TaskToken); n != 1 {
		t.Errorf("%d heartbeats of %s after its launch; want 1", n, st.TaskToken)
	}
}

// worc reference.md § Conditional nodes: a skipped node's Task state is
// completed "skipped" at dispatch, no worker is launched, and a later
// variable it would have set stays empty.
func TestDispatch_SkippedNodeCompletesWithoutWorker(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Task: "---\nid: t1\ntitle: T\nnodes: { planning: { enabled: false } }\n---\nDo it.\n"})
	st := r.Dispatch(t, "planning")
	if st.Verdict != "skipped" || len(r.Launcher.Launched()) != 0 {
		t.Fatalf("planning: verdict %q, %d workers launched; want skipped and none", st.Verdict, len(r.Launcher.Launched()))
	}
	if v := r.Vars(t, "implementation"); v["plan_path"] != "" {
		t.Errorf("{plan_path} = %q after a skipped planning, want empty", v["plan_path"])
	}
}
