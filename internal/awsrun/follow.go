package awsrun

import (
	"context"
	"io"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker"
)

// DefaultPoll is how often Follow reads the run's records and its
// execution.
const DefaultPoll = 2 * time.Second

// FollowOptions configure Follow.
type FollowOptions struct {
	Progress io.Writer     // as orchestrator.Options.Progress
	Poll     time.Duration // 0 = DefaultPoll
	// Skip lists the steps (by tid) whose progress is not printed: those a
	// resumed run had before its new execution (Started.Before).
	Skip []string
	// ReplyFlags are what the reply commands of a wait line need to reach
	// the stack ("--target aws --stack S …"; runview.Tracker.ReplyFlags).
	ReplyFlags string
}

// Follow shows run's progress (the events runview.Tracker reads back,
// through a progress.Display) until its execution ends, then
// Finish-es it. env is the run's environment (nil = read from its bundle).
//
// When ctx ends first, Follow returns ctx.Err() and leaves the execution
// running: the run lives on the stack, not in this process (`stratus
// status RUN --target aws` shows it).
func (t *Target) Follow(ctx context.Context, run stratus.Run, env *worker.RunEnv, o FollowOptions) (*orchestrator.Result, error) {
	progress, release := progress.For(o.Progress)
	defer release()
	poll := o.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	tr := runview.NewTracker(t.Store, run.ID)
	tr.Skip(o.Skip...)
	tr.ReplyFlags = o.ReplyFlags
	print := func() error {
		evs, err := tr.Poll(ctx)
		for _, e := range evs {
			progress.Event(e)
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
		// A run cancelled while followed is recorded interrupted before
		// its execution reports the stop (a stand-in may report it late).
		if cur, err := t.Store.GetRun(ctx, run.ID); err == nil && cur.Status == stratus.RunInterrupted {
			return &orchestrator.Result{Run: cur, Status: cur.Status}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Finish records the end of run's ended execution x as every runtime does
// (lifecycle.Finish: its status, the budgets it spent and why it stopped,
// read from the execution's history and the run's compiled definition, and
// its summary, among the run's own files: sink.ForRun) and releases the
// task's lock; the result's paths are s3:// URLs. env is the run's
// environment (nil = read from its bundle). An execution's end is applied
// only to the run that names it: a run resumed since names its new
// execution, and is left to it.
//
// Errors: ECONFLICT when the run names another execution now; the
// store's, the sink's and runenv.Load's.
func (t *Target) Finish(ctx context.Context, run stratus.Run, env *worker.RunEnv, x executor.Execution) (*orchestrator.Result, error) {
	if cur, err := t.Store.GetRun(ctx, run.ID); err != nil {
		return nil, err
	} else if cur.Execution != "" && x.ARN != "" && cur.Execution != x.ARN {
		return nil, stratus.Errorf(stratus.ECONFLICT, "run %s is execution %s now, not %s, which ended %s: it was resumed meanwhile (stratus status %s --follow --target aws follows it)",
			run.ID, cur.Execution, x.ARN, x.Status, run.ID)
	}
	if env == nil {
		var err error
		if env, err = runenv.Load(ctx, t.Sink, run.ID); err != nil {
			return nil, err
		}
	}
	def, _ := lifecycle.GetDefinition(ctx, t.Sink, run.ID) // a run from before definitions were kept: its stop line names the error only
	res, err := lifecycle.Finish(ctx, lifecycle.Ports{Store: t.Store, Sink: sink.ForRun(t.Sink, run.ID), Exec: t.Exec}, run, worker.ReportEnv(env), def, x)
	if err != nil {
		return nil, err
	}
	// Released once the run is recorded ended; a release that fails leaves
	// a lock whose holder has ended, which the task's next run takes over.
	t.Store.UnlockTask(ctx, run.TaskID, run.ID)
	for i, k := range res.Summary {
		res.Summary[i] = t.RunURL(run.ID, k)
	}
	if res.CtxDir != "" {
		res.CtxDir = t.RunURL(run.ID, res.CtxDir)
	}
	return res, nil
}
