package attempt_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/contracts.md § Terminal classification (internal/failclass): the
// failures the worker API sees itself are classified here — a launch that
// failed, a worker gone without a result, a Task state caught with another
// error (its task stopped), output that did not persist: infrastructure; a
// Task state whose TimeoutSeconds or HeartbeatSeconds lapsed: timeout; a
// report refused because its engine wrote into the operator's work dir:
// quality. What follows does not change (the task failure's error name is the
// one it was).
func TestFailures_TheWorkerAPISeesAreClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fail  func(t *testing.T, r *workertest.Rig, step stratus.Step)
		class string
	}{
		{"a launch that failed", nil, failclass.Infrastructure},
		{"a launch that failed for want of capacity", nil, failclass.Infrastructure},
		{"a worker gone without a result", func(t *testing.T, r *workertest.Rig, _ stratus.Step) {
			specs := r.Launcher.Launched()
			specs[len(specs)-1].OnExit(errors.New("exit status 2"))
		}, failclass.Infrastructure},
		{"a state caught with States.HeartbeatTimeout", func(t *testing.T, r *workertest.Rig, step stratus.Step) {
			stop(t, r, step, asl.ErrHeartbeatTimeout)
		}, failclass.Timeout},
		{"a state caught with States.Timeout", func(t *testing.T, r *workertest.Rig, step stratus.Step) {
			stop(t, r, step, asl.ErrTimeout)
		}, failclass.Timeout},
		{"a state caught with States.TaskFailed (its task stopped)", func(t *testing.T, r *workertest.Rig, step stratus.Step) {
			stop(t, r, step, asl.ErrTaskFailed)
		}, failclass.Infrastructure},
		{"output that did not persist", func(t *testing.T, r *workertest.Rig, _ stratus.Step) {
			r.Svc.Sink = &workertest.RefusingSink{Sink: r.Svc.Sink, Suffix: "/build.md", Err: syscall.ENOSPC}
			if _, err := r.Submit(t, "# Built\n"); !errors.Is(err, core.ErrNotPersisted) {
				t.Fatalf("submit: %v; want ErrNotPersisted", err)
			}
		}, failclass.Infrastructure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.BuildPublishFlow})
			switch tc.name {
			case "a launch that failed":
				r.Svc.Launcher = workertest.FailingLauncher{Err: errors.New("ecs:RunTask: ClusterNotFoundException")}
			case "a launch that failed for want of capacity":
				r.Svc.Launcher = workertest.FailingLauncher{Err: fmt.Errorf("ecs:RunTask: RESOURCE:CPU: %w", launch.ErrInfrastructure)}
			}
			step := r.Dispatch(t, "build")
			if tc.fail != nil {
				tc.fail(t, r, step)
			}
			att, err := r.Svc.Store.LatestAttempt(context.Background(), step.TID)
			if err != nil {
				t.Fatal(err)
			}
			if att.Status != stratus.AttemptFailed || att.Class != tc.class || !att.RetryAt.IsZero() {
				t.Errorf("attempt %s, class %q, retry_at %v; want failed, %q, no reset", att.Status, att.Class, att.RetryAt, tc.class)
			}
		})
	}
}

// stop sends the stop message of step's node caught with errName, as the
// compiled Catch does.
func stop(t *testing.T, r *workertest.Rig, step stratus.Step, errName string) {
	t.Helper()
	if err := r.Svc.Dispatch(context.Background(), core.Message{RunID: step.RunID, Node: step.Node, Kind: compiler.KindStop,
		Error: &core.CaughtError{Error: errName, Cause: "lapsed"}}); err != nil {
		t.Fatal(err)
	}
}
