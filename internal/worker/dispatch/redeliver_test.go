package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/dispatch"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// failOnce fails the first Put of a key containing sub, as a transient S3
// error would.
type failOnce struct {
	sink.Sink
	sub    string
	failed atomic.Bool
}

func (f *failOnce) Put(ctx context.Context, key string, body []byte) error {
	if strings.Contains(key, f.sub) && f.failed.CompareAndSwap(false, true) {
		return errors.New("transient: S3 503 SlowDown")
	}
	return f.Sink.Put(ctx, key, body)
}

// docs/architecture.md § The path of one step: a dispatch message is
// delivered at least once. A delivery that fails before the step's first
// attempt is written returns its error (SQS redelivers); the redelivery finds
// the step without an attempt and launches it, exactly once; a further
// redelivery launches nothing.
func TestDispatch_RedeliveryAfterATransientFailureLaunchesTheWorkerOnce(t *testing.T) {
	r := workertest.NewRig(t, workertest.RigOptions{Flow: `flow:
  name: f
  task_type: f
  permission_ceiling: read-only
  output_policy: code_change
  publishing: none
  nodes:
    - {id: a, kind: agent, role_file: f/a.md}
    - {id: p, kind: publish, policy: none}
  edges:
    - {from: a, to: p}
`})
	r.Svc.Sink = &failOnce{Sink: r.Svc.Sink, sub: "rendered-prompt.md"}
	m := core.Message{RunID: r.Run.ID, Node: "a", Kind: "agent", TaskToken: "tok-a"}
	if err := dispatch.Invoke(context.Background(), r.Svc.Service, m); err == nil {
		t.Fatal("first delivery: no error, want the transient failure returned for redelivery")
	}
	if n := len(r.Launcher.Launched()); n != 0 {
		t.Fatalf("first delivery launched %d workers", n)
	}
	for i := 0; i < 2; i++ {
		if err := dispatch.Invoke(context.Background(), r.Svc.Service, m); err != nil {
			t.Fatalf("redelivery %d: %v", i+1, err)
		}
	}
	if n := len(r.Launcher.Launched()); n != 1 {
		t.Fatalf("redeliveries launched %d workers, want 1", n)
	}
	steps, _ := r.Svc.Store.ListSteps(context.Background(), r.Run.ID)
	if len(steps) != 1 {
		t.Fatalf("%d steps, want 1", len(steps))
	}
	if _, err := r.Svc.Store.GetAttempt(context.Background(), steps[0].TID, 1); err != nil {
		t.Fatalf("attempt 1: %v", err)
	}
}
