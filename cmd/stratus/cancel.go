package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/host"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store"
)

// CancelOptions are the flags of `stratus cancel`.
type CancelOptions struct {
	IO     IO
	RunID  string
	Dir    string
	JSON   bool
	Grace  time.Duration
	Target string
	AWS    AWSOptions
}

// DefaultCancelGrace is how long cancel lets a run stop its workers itself
// before it kills the run's process.
const DefaultCancelGrace = 5 * time.Second

func newCancelCmd(io IO) *cobra.Command {
	o := &CancelOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "cancel RUN [--dir DIR | --target aws ...] [--grace 5s]",
		Short: "Stop a running run; it ends interrupted and can be resumed",
		Long: `cancel stops run RUN. An embedded run's process is asked to stop (SIGTERM,
as Ctrl-C would): it stops its workers and engines, records the run interrupted
and writes its summary; if it has not ended within --grace, it is killed, and
its workers stop themselves once they see it gone. On AWS the run's execution is
stopped (StopExecution) and the run recorded interrupted. cancel returns once
the run is recorded interrupted; ` + "`stratus resume RUN`" + ` goes on from where it stopped.

A run that already ended is left as it is (exit 0, saying so).

` + runArgHelp + `
Exit status: 0 stopped (or already ended), 1 the run could not be stopped,
2 no such run or bad flags.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.RunID = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if o.Grace < 0 {
				return usageError{fmt.Errorf("--grace %s: want a duration >= 0", o.Grace)}
			}
			return runCancel(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, `print {"run_id", "status", "was"} as JSON on stdout`)
	cmd.Flags().DurationVar(&o.Grace, "grace", DefaultCancelGrace, "how long the run may take to stop its workers before its process is killed")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// CancelResult is what `stratus cancel --json` prints.
type CancelResult struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"` // the run's status now
	Was    string `json:"was"`    // its status before the cancel
}

func runCancel(o *CancelOptions) error {
	ctx := awsContext()
	id, rerr := resolveRunArg(ctx, o.Target, o.Dir, &o.AWS, o.RunID)
	if rerr != nil {
		return usageOr(rerr)
	}
	o.RunID = id
	var (
		res CancelResult
		err error
	)
	if o.Target == TargetAWS {
		res, err = cancelOnAWS(ctx, o)
	} else {
		st, oerr := openRuns(o.Dir)
		if oerr != nil {
			return usageOr(oerr)
		}
		defer st.Close()
		res, err = cancelEmbedded(ctx, st, o.Dir, o.RunID, o.Grace)
	}
	if res.RunID == "" {
		return usageOr(err) // the run could not be read
	}
	switch {
	case o.JSON:
		json.NewEncoder(o.IO.Out).Encode(res)
	case stratus.RunTerminal(res.Was):
		fmt.Fprintf(o.IO.Out, "run %s already ended: %s\n", res.RunID, res.Status)
	case err == nil:
		hint := ""
		if o.Target == TargetAWS {
			hint = o.AWS.flagsHint()
		} else if f := orchestrator.DirFlag(o.Dir); f != "" {
			hint = " " + f
		}
		fmt.Fprintf(o.IO.Out, "run %s: %s (was %s); `stratus resume %s%s` goes on from where it stopped\n", res.RunID, res.Status, res.Was, res.RunID, hint)
	}
	return err
}

// cancelEmbedded stops run runID of work dir dir: a run hosted by the work
// dir's host (internal/host) is stopped by the host, which goes on with
// its other runs; any other run's process is stopped, SIGTERM, then
// SIGKILL after grace. The run is then read (reconciled).
func cancelEmbedded(ctx context.Context, st store.Store, dir, runID string, grace time.Duration) (CancelResult, error) {
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return CancelResult{}, err
	}
	if run, err = lifecycle.Reconcile(ctx, st, run); err != nil {
		return CancelResult{}, err
	}
	res := CancelResult{RunID: run.ID, Was: run.Status, Status: run.Status}
	if stratus.RunTerminal(run.Status) {
		return res, nil
	}
	alive, known := lifecycle.OwnerAlive(run.Owner)
	if !known {
		return res, fmt.Errorf("run %s is running in a process this machine cannot reach (owner %q); cancel it where it runs", run.ID, run.Owner)
	}
	parts := strings.Split(run.Owner, "/")
	pid, _ := strconv.Atoi(parts[min(1, len(parts)-1)])
	if hosted, err := cancelHosted(ctx, dir, run.ID, pid); err != nil {
		return res, err
	} else if !hosted && alive {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return res, fmt.Errorf("stop the process of run %s (pid %d): %w", run.ID, pid, err)
		}
		if !waitGone(run.Owner, grace) {
			syscall.Kill(pid, syscall.SIGKILL)
			if !waitGone(run.Owner, 5*time.Second) {
				return res, fmt.Errorf("the process of run %s (pid %d) did not end after SIGKILL", run.ID, pid)
			}
		}
	}
	if run, err = st.GetRun(ctx, runID); err == nil {
		run, err = lifecycle.Reconcile(ctx, st, run)
	}
	res.Status = run.Status
	return res, err
}

// cancelHosted stops run runID in dir's host when the host is the run's
// owner (pid) and says whether it was; the host is never signalled, since
// its other runs go on.
func cancelHosted(ctx context.Context, dir, runID string, pid int) (bool, error) {
	c, err := host.Dial(dir)
	if err != nil {
		return false, nil // no host: the run has a process of its own
	}
	hostPID, runs, err := c.Runs(ctx)
	if err != nil || hostPID != pid {
		return false, nil
	}
	if !slices.Contains(runs, runID) {
		return true, nil // it ended meanwhile
	}
	if _, err := c.Cancel(ctx, runID); err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return true, fmt.Errorf("stop run %s in its host (pid %d): %w", runID, pid, err)
	}
	return true, nil
}

// waitGone polls until the owner is dead or d has passed.
func waitGone(owner string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if alive, _ := lifecycle.OwnerAlive(owner); !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
