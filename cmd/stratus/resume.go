package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/host"
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
	MaxCostUSD     float64
	MaxTokens      int64
	Self           string // the stratus binary workers run as ("" = this one)
	Target         string
	AWS            AWSOptions
	// Detach hands the resume to the work dir's host and returns once it
	// is under way, as run --detach does.
	Detach bool

	costSet, tokensSet bool
}

func newResumeCmd(io IO) *cobra.Command {
	o := &ResumeOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "resume RUN [--dir DIR] [--reset-fix-budget] [--detach]",
		Short: "Continue a failed, parked or interrupted run from the step that stopped it",
		Long: `resume continues run RUN, which ended failed, manual_action_required or
interrupted (Ctrl-C, or its process killed), from the step that stopped it, on the
flow, prompts, config and compiled state machine it started with. Finished steps
are not run again: their ctx files, budget counters and costs stay. A step that
did not complete runs again as a new visit (review#3 after review#2); after a
completed step the run goes on to what follows it.

A run parked because a loop budget ran out goes on only with --reset-fix-budget,
which gives every loop (and the global backstop, and each agent's hitl rounds)
its whole budget back. A run parked at its cost or token cap goes on with a
higher one: --max-cost-usd N, --max-tokens N (0: no cap).

Progress goes to stderr, the result to stdout, as for run; with --detach the
run goes on in the work dir's host, as run --detach hands it one, and resume
prints RUN once the run is under way. With --target aws the
run resumes on the deployed stack: a new execution of the run's own state machine
enters the stopped step's state, and this command follows it as run --target aws
does (Ctrl-C stops following, not the execution).

` + runArgHelp + `
Exit status: 0 done, 1 failed, 3 manual_action_required, 130 interrupted,
2 bad input (unknown run, a run that is done or still running, a spent budget
without --reset-fix-budget).`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.RunID = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			o.costSet, o.tokensSet = c.Flags().Changed("max-cost-usd"), c.Flags().Changed("max-tokens")
			if o.MaxCostUSD < 0 || math.IsNaN(o.MaxCostUSD) || math.IsInf(o.MaxCostUSD, 0) {
				return usageError{fmt.Errorf("--max-cost-usd %v: want a cost in US dollars >= 0 (0: no cap)", o.MaxCostUSD)}
			}
			if o.MaxTokens < 0 {
				return usageError{fmt.Errorf("--max-tokens %d: want a token count >= 0 (0: no cap)", o.MaxTokens)}
			}
			return runResume(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (the one the run ran in)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON on stdout")
	cmd.Flags().BoolVar(&o.Detach, "detach", false, "resume the run in the background and return once it is under way (its output goes on in DIR/.stratus/runs/RUN/run.log)")
	cmd.Flags().BoolVar(&o.ResetFixBudget, "reset-fix-budget", false, "give every loop budget back (a run parked because a budget ran out)")
	cmd.Flags().Float64Var(&o.MaxCostUSD, "max-cost-usd", 0, "the run's new cost cap in US dollars (0: none)")
	cmd.Flags().Int64Var(&o.MaxTokens, "max-tokens", 0, "the run's new token cap (0: none)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runResume(o *ResumeOptions) error {
	id, err := resolveRunArg(awsContext(), o.Target, o.Dir, &o.AWS, o.RunID)
	if err != nil {
		return usageOr(err)
	}
	o.RunID = id
	r := lifecycle.Resume{ResumeOptions: lifecycle.ResumeOptions{ResetFixBudget: o.ResetFixBudget}}
	if o.costSet {
		r.MaxCostUSD = &o.MaxCostUSD
	}
	if o.tokensSet {
		r.MaxTokens = &o.MaxTokens
	}
	if o.Target == TargetAWS {
		if o.Detach {
			return usageError{fmt.Errorf("--detach: a run on AWS runs on the stack already; resume it without --detach and Ctrl-C stops following, not the run")}
		}
		return resumeAWS(o, r)
	}
	if o.Detach {
		return resumeDetached(o, r)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // as runRun: a closed pipe must not kill the run
	d := newDisplay(o.IO, o.JSON)
	defer d.Close()
	res, err := orchestrator.Resume(ctx, orchestrator.ResumeOptions{Dir: o.Dir, RunID: o.RunID, Self: o.Self, Progress: d, Resume: r})
	if spentBudget(err) {
		return &exitError{code: ExitUsage, err: err}
	}
	return endRun(o.IO, d, o.JSON, res, err)
}

// spentBudget reports whether err refuses a resume for a spent budget
// (a usage error: the flag that allows it was not given).
func spentBudget(err error) bool {
	var spent *lifecycle.BudgetSpentError
	return errors.As(err, &spent)
}

// resumeDetached is `stratus resume --detach`: it hands the resume to the
// work dir's host (internal/host, started when none serves it: the run
// shares the host's engine slots, as a detached run does), returning once
// the resume is recorded or with the reason it was refused.
func resumeDetached(o *ResumeOptions, r lifecycle.Resume) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	st, err := openRuns(dir) // no runs here: said before a host starts
	if err != nil {
		return usageOr(err)
	}
	st.Close()
	c, err := ensureHost(dir, o.Self)
	if err != nil {
		return err
	}
	req := host.ResumeRequest{ResetFixBudget: r.ResetFixBudget, MaxCostUSD: r.MaxCostUSD, MaxTokens: r.MaxTokens}
	if err := c.Resume(context.Background(), o.RunID, req); err != nil {
		return usageOr(fmt.Errorf("the run did not resume: %w", err))
	}
	return printDetached(o.IO, o.JSON, o.RunID, orchestrator.DirFlag(dir))
}
