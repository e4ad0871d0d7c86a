package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/progress"
)

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
	res, err := tg.Follow(ctx, st.Run, st.Env, awsrun.FollowOptions{Progress: d, Poll: o.AWS.Poll})
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

// runResult is what `stratus run --json` prints of res, last.
func runResult(res *orchestrator.Result) RunResult {
	out := RunResult{RunID: res.Run.ID, TaskID: res.Run.TaskID, Flow: res.Run.Flow, Status: res.Status,
		CtxDir: res.CtxDir, Summary: res.Summary, Budgets: res.Budgets}
	if res.Status != stratus.RunDone {
		out.Error, out.Cause = res.Error, res.Cause
	}
	if m, ok := median(res.Overhead); ok {
		ms := float64(m.Microseconds()) / 1000
		out.OverheadMedianMS = &ms
	}
	return out
}

// usageOr makes a bad-input error (EINVALID, ENOTFOUND, ETOOLARGE: a
// workspace over its cap) exit with
// ExitUsage, as `stratus run` does.
func usageOr(err error) error {
	if code := stratus.ErrorCode(err); code == stratus.EINVALID || code == stratus.ENOTFOUND || code == stratus.ETOOLARGE {
		return &exitError{code: ExitUsage, err: err}
	}
	return err
}

// printRun prints a run's result as `stratus run` does and returns its
// exit status (done 0, manual_action_required 3, failed 1).
func printRun(io IO, d *progress.Display, asJSON bool, res *orchestrator.Result) error {
	d.Close() // the ticking lines go before the result is printed
	out := runResult(res)
	if asJSON {
		d.RunEnded(out)
	} else {
		fmt.Fprintf(io.Out, "run %s: %s\n", out.RunID, out.Status)
		// The why in words; the error's name (stratus.Failed, …) is the
		// JSON's "error" for scripts, never prose for a reader (issue 15 § 2).
		switch {
		case out.Cause != "":
			fmt.Fprintf(io.Out, "  why:      %s\n", out.Cause)
		case out.Error != "":
			fmt.Fprintf(io.Out, "  why:      %s\n", out.Error)
		}
		fmt.Fprintf(io.Out, "  ctx dir:  %s\n", out.CtxDir)
		for _, s := range out.Summary {
			fmt.Fprintf(io.Out, "  summary:  %s\n", s)
		}
		if b := budgetsLine(out.Budgets); b != "" {
			fmt.Fprintf(io.Out, "  budgets spent: %s\n", b)
		}
		if out.OverheadMedianMS != nil {
			fmt.Fprintf(io.Out, "  orchestration overhead per step (report -> next engine start): median %.1f ms over %d transitions\n", *out.OverheadMedianMS, len(res.Overhead))
		}
	}
	switch res.Status {
	case stratus.RunDone:
		return nil
	case stratus.RunManualActionRequired:
		return &exitError{code: ExitManual}
	case stratus.RunInterrupted:
		return &exitError{code: ExitInterrupted}
	default:
		return &exitError{code: ExitFailed}
	}
}
