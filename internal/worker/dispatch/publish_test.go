package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/security.md § Output that did not persist: a publish whose summary
// the disk refuses — or whose completed record the store refuses — stops
// the run (DiskFull) with the publish step left open, which the stop
// cancels and a resume publishes again; it is never failed nor done, its
// state never told. Without DiskFull (AWS), a refused summary fails the
// step with stratus.PublishFailed as before.
func TestPublish_SummaryAFullDiskRefusedStopsTheRun(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("fs sink: write /work/.stratus/logs/t1/summary.json: %w", syscall.ENOSPC)
	for _, tc := range []struct {
		name     string
		publish  error // Publish's error; nil: it writes, and the store refuses the step done
		diskFull bool
		status   string // the publish step's after the dispatch
		wants    string // in DiskFull's error
	}{
		{"summary, embedded", full, true, stratus.StepRunning, "publish#1: write the summary: fs sink: write /work/.stratus/logs/t1/summary.json"},
		{"record, embedded", nil, true, stratus.StepRunning, "publish#1: record it done: "},
		{"summary, AWS", full, false, stratus.StepFailed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
			spy := &workertest.DiskFullSpy{}
			if tc.diskFull {
				r.Svc.DiskFull = spy.Hook
			}
			r.Svc.Publish = func(context.Context, stratus.Run, *core.RunEnv) ([]string, error) {
				if tc.publish != nil {
					return nil, tc.publish
				}
				return []string{".stratus/logs/t1/summary.json", ".stratus/logs/t1/summary.md"}, nil
			}
			if tc.publish == nil {
				r.Svc.Store = workertest.RefusingStore{Store: r.Svc.Store}
			}
			step := r.Dispatch(t, "publish")
			if got, _ := r.Svc.Store.GetStep(context.Background(), step.TID); got.Status != tc.status {
				t.Errorf("publish#1 is %s; want %s", got.Status, tc.status)
			}
			told := spy.Told()
			if !tc.diskFull {
				if !strings.HasPrefix(r.Tokens.Failure(step.TaskToken), core.ErrPublish+": ") {
					t.Errorf("the state's failure %q; want %s", r.Tokens.Failure(step.TaskToken), core.ErrPublish)
				}
				return
			}
			if len(told) != 1 || !stratus.StorageFull(told[0]) || !strings.Contains(told[0].Error(), tc.wants) {
				t.Fatalf("DiskFull told %v; want one full-disk error saying %q", told, tc.wants)
			}
			if s, f := r.Tokens.Counts(); s != 0 || f != 0 {
				t.Errorf("the Task state was told (%d successes, %d failures); want it left to the run's stop", s, f)
			}
		})
	}
}
