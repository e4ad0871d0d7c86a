//go:build !slim

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awspool"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/taskpool"
	"github.com/stratusflow/stratus/internal/webui"
	"github.com/stratusflow/stratus/internal/worker"
)

// fullBuild: this build runs every command itself (the slim build hands
// some to FullBinary).
const fullBuild = true

// runRunAWS is `stratus run --target aws`: the run starts on a deployed
// stack (internal/awsrun) and this process follows its execution with the
// progress lines of an embedded run, then prints the same result and
// exits with the same status. Interrupted, it stops following (exit 130)
// and leaves the execution running.
func runRunAWS(o *RunOptions) error {
	ctx, stop := signal.NotifyContext(awsContext(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return usageOr(err)
	}
	d := newDisplay(o.IO, o.JSON && !o.Detach)
	defer d.Close()
	st, err := tg.Start(ctx, awsrun.StartOptions{Dir: o.Dir, TaskPath: o.Task, Progress: d, RunID: o.RunID})
	if err != nil {
		return usageOr(err)
	}
	if o.Detach {
		return printDetached(o.IO, o.JSON, st.Run.ID, strings.TrimPrefix(o.AWS.flagsHint(), " "))
	}
	res, err := tg.Follow(ctx, st.Run, st.Env, awsrun.FollowOptions{Progress: d, Poll: o.AWS.Poll, ReplyFlags: o.AWS.replyFlags()})
	d.Close()
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(o.IO.Err, "stratus: interrupted: stopped following run %s; its execution goes on (stratus status %s%s shows it)\n", st.Run.ID, st.Run.ID, o.AWS.flagsHint())
		return &exitError{code: ExitInterrupted}
	}
	if err != nil {
		return err
	}
	if !o.NoPull {
		pullAtEnd(ctx, o.IO, tg, res.Run.ID, o.Dir, o.AWS.flagsHint())
	}
	return printRun(o.IO, d, o.JSON, res)
}

// resumeAWS resumes a run on the deployed stack and follows it as
// `run --target aws` does.
func resumeAWS(o *ResumeOptions, r lifecycle.Resume) error {
	ctx, stop := signal.NotifyContext(awsContext(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return usageOr(err)
	}
	d := newDisplay(o.IO, o.JSON)
	defer d.Close()
	st, err := tg.Resume(ctx, awsrun.ResumeOptions{RunID: o.RunID, Progress: d, Resume: r})
	if spentBudget(err) {
		return &exitError{code: ExitUsage, err: err}
	}
	if err != nil {
		return usageOr(err)
	}
	res, err := tg.Follow(ctx, st.Run, st.Env, awsrun.FollowOptions{Progress: d, Poll: o.AWS.Poll, Skip: st.Before, ReplyFlags: o.AWS.replyFlags()})
	d.Close()
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(o.IO.Err, "stratus: interrupted: stopped following run %s; its execution goes on (stratus status %s%s shows it)\n", st.Run.ID, st.Run.ID, o.AWS.flagsHint())
		return &exitError{code: ExitInterrupted}
	}
	if err != nil {
		return err
	}
	pullAtEnd(ctx, o.IO, tg, res.Run.ID, "", o.AWS.flagsHint())
	return printRun(o.IO, d, o.JSON, res)
}

// cancelAWS stops run runID's execution and records the run's end as the
// events function would (awsrun.Finish).
func cancelAWS(ctx context.Context, tg *awsrun.Target, runID string) (CancelResult, error) {
	run, err := tg.Store.GetRun(ctx, runID)
	if err != nil {
		return CancelResult{}, err
	}
	res := CancelResult{RunID: run.ID, Was: run.Status, Status: run.Status}
	if stratus.RunTerminal(run.Status) {
		return res, nil
	}
	if err := tg.Exec.StopExecution(ctx, run.Execution, "stratus.Cancelled", "cancelled by the operator (stratus cancel)"); err != nil {
		return res, err
	}
	// The execution is stopping: the run is interrupted now, its open steps
	// canceled, so a worker still running has its next stats and its report
	// refused (409) and stops its engine, whenever the execution reads
	// ABORTED (the events function then stops its task).
	if run, err = lifecycle.Interrupt(ctx, tg.Store, run, "cancelled by the operator (stratus cancel)", time.Now().UTC()); err != nil {
		return res, err
	}
	// StopExecution may answer before the execution reads ABORTED.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	x, err := tg.Exec.WaitExecution(wctx, run.Execution)
	cancel()
	if err != nil && ctx.Err() != nil {
		return res, err
	}
	// The stop ended the execution, whatever it reads (moto 5.2.1 aborts a
	// waiting execution only when its task wakes, and then reports it
	// FAILED with States.Timeout): unless it succeeded first, the run was
	// cancelled, hence interrupted.
	if !x.Done() || x.Status != executor.StatusSucceeded {
		x.Status, x.Error, x.Cause = executor.StatusAborted, "stratus.Cancelled", "cancelled by the operator (stratus cancel)"
		if x.StopDate.IsZero() {
			x.StopDate = time.Now().UTC()
		}
	}
	out, err := tg.Finish(ctx, run, nil, x)
	if err != nil {
		return res, err
	}
	res.Status = out.Status
	return res, nil
}

// pullAtEnd pulls the run's commits at the end of a run or resume that
// this process followed on AWS: the run is read again (its head moved while
// it ran); a pull that cannot be made is a warning, and the run's status
// stands.
func pullAtEnd(ctx context.Context, io IO, tg *awsrun.Target, runID, dir, hint string) {
	run, err := tg.Store.GetRun(ctx, runID)
	if err != nil || run.Workspace == nil {
		return
	}
	if dir == "" {
		// A resume: the work dir the run started in, when this machine has it.
		if dir = "."; run.WorkDir != "" {
			if fi, err := os.Stat(run.WorkDir); err == nil && fi.IsDir() {
				dir = run.WorkDir
			}
		}
	}
	if _, err := pull(ctx, io, tg.Sink, run, dir, false); err != nil {
		fmt.Fprintf(io.Err, "stratus: warning: the run's commits were not pulled: %s (stratus pull %s --dir DIR%s tries again)\n", safetext.Line(err.Error()), runID, hint)
	}
}

func awsStatus(ctx context.Context, o *StatusOptions) (*runview.View, StatusResult, error) {
	res := StatusResult{Target: TargetAWS}
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return nil, res, err
	}
	v, err := runview.LoadPage(ctx, tg.Store, o.RunID, o.page())
	if err != nil {
		return nil, res, err
	}
	if err := res.readSpend(ctx, tg.Store, o.RunID); err != nil {
		return nil, res, err
	}
	if v.Run.Execution != "" {
		x, err := tg.Exec.DescribeExecution(ctx, v.Run.Execution)
		if err != nil {
			return nil, res, err
		}
		res.Execution = &ExecutionStatus{ARN: x.ARN, Status: x.Status, Error: x.Error, Cause: x.Cause}
		if x.Done() && v.Run.Status == stratus.RunRunning {
			// Nobody followed the run to its end: say what the execution's
			// end makes it, without recording it (that is `run`'s part).
			v.Run.Status = lifecycle.ExecutionStatus(x)
		}
	}
	dir, err := report.RunDir(ctx, tg.Sink, v.Run.TaskID, v.Run.ID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return v, res, nil // a later run of the task wrote over them
	} else if err != nil {
		return nil, res, err
	}
	for _, name := range []string{"summary.json", "summary.md"} {
		key := dir + "/" + name
		if _, err := tg.Sink.Get(ctx, key); err == nil {
			res.Summary = append(res.Summary, tg.URL(key))
		} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
			return nil, res, err
		}
	}
	return v, res, nil
}

// deniedHint says what to do about an AWS call the caller's credentials
// may not make (docs/architecture.md § The run lifecycle): the error itself
// names the action and the resource; the stack's operator policy grants what
// the CLI needs. An endpoint that refuses the connection is one that is gone:
// a stand-in that stopped, its state with it.
func deniedHint(err error) string {
	if m := err.Error(); strings.Contains(m, "dial tcp") && strings.Contains(m, "connection refused") {
		return "nothing answers at that AWS endpoint: a stand-in (stratus dev aws) that has stopped took its stack and its runs with it; start one and run again, or check --endpoint-url"
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	switch ae.ErrorCode() {
	case "AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "AuthorizationError":
		return "your AWS credentials may not make that call: attach the managed policy the stack's OperatorPolicyArn output names (aws cloudformation describe-stacks --stack-name STACK), which grants what stratus --target aws needs on that stack"
	}
	return ""
}

// cancelOnAWS is `stratus cancel --target aws`: it opens the stack and
// cancels the run there (cancelAWS).
func cancelOnAWS(ctx context.Context, o *CancelOptions) (CancelResult, error) {
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return CancelResult{}, err
	}
	return cancelAWS(ctx, tg, o.RunID)
}

// openRecords opens the stack's store and sink (pull and runs read no
// more of it).
func (o *AWSOptions) openRecords(ctx context.Context) (store.Store, sink.Sink, error) {
	tg, err := o.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return tg.Store, tg.Sink, nil
}

// followAWS is `stratus status --follow --target aws`: the run's progress
// lines until it ends, as `run --target aws` follows it.
func followAWS(ctx context.Context, o *StatusOptions, d *progress.Display) error {
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return usageOr(err)
	}
	run, err := tg.Store.GetRun(ctx, o.RunID)
	if err != nil {
		return usageOr(err)
	}
	if _, err := tg.Follow(ctx, run, nil, awsrun.FollowOptions{Progress: d, Poll: o.AWS.Poll, ReplyFlags: o.AWS.replyFlags()}); err != nil {
		return followStopped(o, d, err)
	}
	return nil
}

// uiSource is what `stratus ui --target aws` shows: the stack's records,
// and its gates' forms.
func (o *AWSOptions) uiSource(ctx context.Context) (webui.Source, error) {
	tg, err := o.open(ctx)
	if err != nil {
		return webui.Source{}, err
	}
	// A gate's form replies as `stratus approve --target aws` does, with
	// this process's AWS identity (awsrun.Target.Reply).
	// The runs page shows the stack's queued tasks as `stratus runs
	// --target aws` does, read at each request.
	pool := tg.Pool()
	return webui.Source{Target: "aws " + tg.Sink.Bucket(), Store: tg.Store, Sink: tg.Sink, Env: runenv.EnvFunc(tg.Sink),
		Reply: tg.Reply, ShellReplies: true, ReplyFlags: o.replyFlags(), Tasks: pool.Queued}, nil
}

// openPool opens the stack's store and its task pool's listing
// (awspool.Pool.Listing) for a claim serving queue ("": the stack's
// TaskQueue).
func (o *AWSOptions) openPool(ctx context.Context, queue string) (store.Store, poolLister, error) {
	tg, err := o.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	pool := tg.Pool()
	if queue != "" {
		pool.Queue = queue
	}
	return tg.Store, pool.Listing, nil
}

// replyAWS is `stratus approve|reject|answer --target aws`: it opens the
// stack and replies there with the operator's AWS identity
// (awsrun.Target.Reply).
func replyAWS(ctx context.Context, o *HITLOptions, r worker.Reply) (*worker.HITLValue, error) {
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return nil, err
	}
	return tg.Reply(ctx, o.RunID, o.Node, r)
}

// submitAWS is `stratus submit --target aws`: the runs are prepared and
// the tasks queued in the stack's pool (awsrun.Target.Submit).
func submitAWS(ctx context.Context, o *SubmitOptions) ([]SubmitResult, error) {
	tg, err := o.AWS.open(ctx)
	if err != nil {
		return nil, err
	}
	prs, err := tg.Submit(ctx, o.Dir, o.Tasks, o.IO.Err)
	out := []SubmitResult{}
	for _, pr := range prs {
		out = append(out, SubmitResult{TaskID: pr.Run.TaskID, File: tg.URL(awspool.TaskKey(taskpool.Pending, pr.File)), RunID: pr.Run.ID})
	}
	return out, err
}
