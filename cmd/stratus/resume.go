package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// ResumeOptions are the flags of `stratus resume`.
type ResumeOptions struct {
	IO             IO
	RunID          string
	Dir            string
	JSON           bool
	ResetFixBudget bool
	Self           string // the stratus binary workers run as ("" = this one)
}

func newResumeCmd(io IO) *cobra.Command {
	o := &ResumeOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "resume RUN [--dir DIR] [--reset-fix-budget]",
		Short: "Continue a failed, parked or interrupted run from the step that stopped it",
		Long: `resume continues run RUN, which ended failed, manual_action_required or
interrupted (Ctrl-C, or its process killed), from the step that stopped it, on the
flow, prompts, config and compiled state machine it started with. Finished steps
are not run again: their ctx files, budget counters and costs stay. A step that
did not complete runs again as a new visit (review#3 after review#2); after a
completed step the run goes on to what follows it.

A run parked because a loop budget ran out goes on only with --reset-fix-budget,
which gives every loop (and the global backstop, and each agent's hitl rounds)
its whole budget back.

Progress goes to stderr, the result to stdout, as for run.

Exit status: 0 done, 1 failed, 3 manual_action_required, 130 interrupted,
2 bad input (unknown run, a run that is done or still running, a spent budget
without --reset-fix-budget).`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.RunID = args[0]
			return runResume(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (the one the run ran in)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON on stdout")
	cmd.Flags().BoolVar(&o.ResetFixBudget, "reset-fix-budget", false, "give every loop budget back (a run parked because a budget ran out)")
	return cmd
}

func runResume(o *ResumeOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // as runRun: a closed pipe must not kill the run
	res, err := orchestrator.Resume(ctx, orchestrator.ResumeOptions{Dir: o.Dir, RunID: o.RunID, Self: o.Self, Progress: o.IO.Err,
		ResumeOptions: lifecycle.ResumeOptions{ResetFixBudget: o.ResetFixBudget}})
	var spent *lifecycle.BudgetSpentError
	if errors.As(err, &spent) {
		return &exitError{code: ExitUsage, err: err}
	}
	return endRun(o.IO, o.JSON, res, err)
}
