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
