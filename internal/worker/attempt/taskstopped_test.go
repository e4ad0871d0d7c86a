package attempt_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A worker task that stopped (ECS's "ECS Task State Change", read by
// awsapp.TaskStopped) fails its attempt now, as an infrastructure failure
// with ECS's reason, the exit code and the last lines, instead of at its
// heartbeat's lapse: before its prompt fetch the bootstrap value names the
// attempt (and is spent, so a late start is refused); after it, the task
// id and attempt number its overrides carried. A second delivery of the
// same event, and the stop of a task whose attempt already ended, change
// nothing.
func TestWorkerTaskStopped_FailsTheAttemptItLeftWithoutAResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	why := "Essential container in task exited (exit code 3): panic: no such file (task arn:aws:ecs:us-east-1:123456789012:task/c/abc)"

	t.Run("before its prompt fetch", func(t *testing.T) {
		t.Parallel()
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
		r.Launcher.Exchange = nil // the task never exchanged its bootstrap value
		step := r.Dispatch(t, "build")
		sp := r.Launcher.Launched()[0]
		if !strings.HasPrefix(sp.Handle, "wb-") {
			t.Fatalf("launched with %q; want a bootstrap value", sp.Handle)
		}
		for range 2 { // the event is delivered at least once
			if err := attempt.WorkerTaskStopped(ctx, r.Svc.Service, sp.Handle, "", 0, why); err != nil {
				t.Fatalf("WorkerTaskStopped: %v", err)
			}
		}
		att, err := r.Svc.Store.LatestAttempt(ctx, step.TID)
		if err != nil {
			t.Fatal(err)
		}
		if att.N != 1 || att.Status != stratus.AttemptFailed || att.Class != failclass.Infrastructure ||
			!strings.Contains(att.Reason, "stopped before it fetched its prompt") || !strings.Contains(att.Reason, "exit code 3") {
			t.Errorf("attempt %d %s class %q reason %q; want attempt 1 failed, infrastructure, naming the stop", att.N, att.Status, att.Class, att.Reason)
		}
		if _, err := r.Svc.ExchangeBootstrap(ctx, "Bearer "+sp.Handle); err == nil {
			t.Error("the stopped task's bootstrap value can still be exchanged")
		}
		if _, n := r.Tokens.Counts(); n != 1 {
			t.Errorf("%d task failures sent; want 1", n)
		}
	})

	t.Run("after its prompt fetch", func(t *testing.T) {
		t.Parallel()
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
		step := r.Dispatch(t, "build") // the rig's launcher exchanges the value, as the runner does
		if err := attempt.WorkerTaskStopped(ctx, r.Svc.Service, "wb-spent", step.TID, 1, why); err != nil {
			t.Fatalf("WorkerTaskStopped: %v", err)
		}
		att, err := r.Svc.Store.GetAttempt(ctx, step.TID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if att.Status != stratus.AttemptFailed || !strings.Contains(att.Reason, "stopped without a result") || !strings.Contains(att.Reason, "panic: no such file") {
			t.Errorf("attempt %s reason %q; want failed, naming the stop and its last lines", att.Status, att.Reason)
		}
	})

	t.Run("after its result", func(t *testing.T) {
		t.Parallel()
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
		step := r.Dispatch(t, "build")
		if _, err := r.Submit(t, "# Built\n"); err != nil {
			t.Fatal(err)
		}
		if err := attempt.WorkerTaskStopped(ctx, r.Svc.Service, "wb-spent", step.TID, 1, "Essential container in task exited (exit code 0)"); err != nil {
			t.Fatalf("WorkerTaskStopped: %v", err)
		}
		att, err := r.Svc.Store.GetAttempt(ctx, step.TID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if att.Status == stratus.AttemptFailed {
			t.Errorf("a task that stopped after its result failed its attempt: %q", att.Reason)
		}
		if _, n := r.Tokens.Counts(); n != 0 {
			t.Errorf("%d task failures sent; want none", n)
		}
	})
}
