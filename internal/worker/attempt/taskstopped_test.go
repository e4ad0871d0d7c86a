package attempt_test

import (
	"context"
	"strings"
	"testing"
	"time"

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

// A worker launched in this process's memory (launch.InMemory: the
// in-process twin) gets its step's handle at launch, never a bootstrap
// value: no environment holds it, so there is nothing to exchange. The
// handle lives one lease, renewed by the worker's heartbeats, as an
// exchanged one does, and opens the worker's routes. Any other launcher's
// worker gets a bootstrap value (the test above).
func TestLaunchAttempt_AnInMemoryWorkerGetsItsHandle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
	r.Launcher.InMemory = true
	r.Launcher.Exchange = func(context.Context, string) (string, error) {
		t.Error("a bootstrap value was exchanged for an in-memory launch")
		return "", nil
	}
	before := time.Now()
	step := r.Dispatch(t, "build")
	sp := r.Launcher.Launched()[0]
	if !strings.HasPrefix(sp.Handle, "wh-") {
		t.Fatalf("launched with %q; want the step's wh- handle", sp.Handle)
	}
	h, err := r.Svc.Store.GetHandle(ctx, sp.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if h.TID != step.TID || h.Attempt != 1 || h.RunID != step.RunID {
		t.Errorf("handle of %s attempt %d run %s; want %s attempt 1 run %s", h.TID, h.Attempt, h.RunID, step.TID, step.RunID)
	}
	if lease := r.Svc.HandleLease(); h.ExpiresAt.After(time.Now().Add(lease)) || h.ExpiresAt.Before(before.Add(lease).Add(-time.Minute)) {
		t.Errorf("handle expires at %s; want one lease (%s) from its launch", h.ExpiresAt, lease)
	}
	if _, err := r.Svc.FetchPrompt(ctx, "Bearer "+sp.Handle, step.TID); err != nil {
		t.Errorf("the handle does not open the prompt: %v", err)
	}
}
