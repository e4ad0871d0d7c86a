package awsrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/worker"
)

// DefaultPoll is how often Follow reads the run's records and its
// execution.
const DefaultPoll = 2 * time.Second

// FollowOptions configure Follow.
type FollowOptions struct {
	Progress io.Writer     // progress lines; nil = discard
	Poll     time.Duration // 0 = DefaultPoll
	// Skip lists the steps (by tid) whose progress is not printed: those a
	// resumed run had before its new execution (Started.Before).
	Skip []string
}

// Follow prints run's progress lines (orchestrator.FormatEvent of the
// events runview.Tracker reads back) until its execution ends, then
// Finish-es it. env is the run's environment (nil = read from its bundle).
//
// When ctx ends first, Follow returns ctx.Err() and leaves the execution
// running: the run lives on the stack, not in this process (`stratus
// status RUN --target aws` shows it).
func (t *Target) Follow(ctx context.Context, run stratus.Run, env *worker.RunEnv, o FollowOptions) (*orchestrator.Result, error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	poll := o.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	tr := runview.NewTracker(t.Store, run.ID)
	tr.Skip(o.Skip...)
	print := func() error {
		evs, err := tr.Poll(ctx)
		for _, e := range evs {
			fmt.Fprintln(progress, orchestrator.FormatEvent(e))
		}
		return err
	}
	for {
		x, err := t.Exec.DescribeExecution(ctx, run.Execution)
		if err != nil {
			return nil, err
		}
		// Read the records after the execution's state: an execution seen
		// ended has no step left to record.
		if err := print(); err != nil {
			return nil, err
		}
		if x.Done() {
			return t.Finish(ctx, run, env, x)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Finish records the terminal of run's ended execution x in the store and
// writes the run's summary from its final records, as an embedded run
// does once its execution ends (seed 004 § The summary artifacts: a
// failed or manual run gets a report too). The result's paths are s3://
// URLs. env is the run's environment (nil = read from its bundle).
func (t *Target) Finish(ctx context.Context, run stratus.Run, env *worker.RunEnv, x executor.Execution) (*orchestrator.Result, error) {
	if env == nil {
		var err error
		if env, err = runenv.Load(ctx, t.Sink, run.ID); err != nil {
			return nil, err
		}
	}
	res := &orchestrator.Result{Error: x.Error, Cause: x.Cause, Status: lifecycle.ExecutionStatus(x)}
	var out struct {
		Loops map[string]int `json:"loops"`
	}
	if json.Unmarshal(x.Output, &out) == nil {
		res.Budgets = out.Loops
	}
	run.Status, run.EndedAt = res.Status, x.StopDate.UTC()
	if run.EndedAt.IsZero() {
		run.EndedAt = time.Now().UTC()
	}
	if err := t.Store.UpdateRun(ctx, run); err != nil {
		return nil, err
	}
	res.Run = run
	f, err := report.Collect(ctx, t.Store, run, res.Status, worker.ReportEnv(env))
	if err != nil {
		return nil, err
	}
	res.Overhead = report.Overhead(f)
	if _, err := report.Write(ctx, t.Sink, f); err != nil {
		return nil, err
	}
	rd := report.Dir(run.TaskID)
	res.Summary = []string{t.URL(rd + "/summary.json"), t.URL(rd + "/summary.md")}
	if cd, err := projection.CtxDir(env.Config.Projection.Placement, run.TaskID); err == nil {
		res.CtxDir = t.URL(cd)
	}
	return res, nil
}
