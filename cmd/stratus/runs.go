package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// RunsOptions are the flags of `stratus runs`.
type RunsOptions struct {
	IO     IO
	Dir    string
	JSON   bool
	Limit  int
	Status string
	Target string
	AWS    AWSOptions
}

func newRunsCmd(io IO) *cobra.Command {
	o := &RunsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "runs [--dir DIR | --target aws ...] [--limit N] [--status S]",
		Short: "List runs, newest first: status, task, flow, when, cost",
		Long: `runs lists the runs made in DIR (or on a deployed stack with --target aws),
newest first: run id, status, task, flow, when it started, how long it ran (the
sum of its active spans: the idle time before a resume is not counted) and what
it cost (README § Cost and token caps: "unknown" when attempts used tokens and
none reported a cost, never $0). --status S lists only the runs of status S:
running, waiting, done, failed, manual_action_required or interrupted. A run
whose process is gone shows interrupted (and is recorded so; when
the disk is too full to record it, it shows interrupted all the same, with a note);
one that waits for a human shows waiting; one pruned after retention_days shows
"(pruned)" beside its status, with no tokens or cost (they went with its steps).

Above the runs, the task pool's queued tasks (README.md § Task pool: pending,
claimed by a watcher or the stack's claim, or running: then its run is listed
below too) are shown with their state and why each waits (depends_on X, queue
other, queue full), as ` + "`stratus tasks`" + ` lists them; not with --status, which lists runs only. --json
prints the runs alone, the array it always was: ` + "`stratus tasks --json`" + ` gives
the pool.

Exit status: 0 listed, 2 no runs were ever made under DIR, or bad flags (a
--status that is no run status).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if o.Limit < 0 {
				return usageError{fmt.Errorf("--limit %d: want a number of runs >= 0 (0: all)", o.Limit)}
			}
			if c.Flags().Changed("status") && runview.CheckStatus(o.Status) != nil {
				return usageError{fmt.Errorf("--status %q is no run status; valid: %s", o.Status, strings.Join(runview.Statuses, ", "))}
			}
			return runRuns(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the runs as a JSON array on stdout")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "list at most this many runs (0: all)")
	cmd.Flags().StringVar(&o.Status, "status", "", "list only the runs of this status: "+strings.Join(runview.Statuses, ", "))
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// RunLine is one run of `stratus runs --json` (runview.RunLine).
type RunLine = runview.RunLine

func runRuns(o *RunsOptions) error {
	ctx := awsContext()
	var (
		st     store.Store
		queued []taskpool.Listed
		qerr   error
	)
	if o.Target == TargetAWS {
		s, list, err := o.AWS.openPool(ctx, "")
		if err != nil {
			return usageOr(err)
		}
		st = s
		if !o.JSON && o.Status == "" {
			queued, qerr = queuedOf(ctx, list)
		}
	} else {
		s, err := openRuns(o.Dir)
		if !o.JSON && o.Status == "" {
			var runs taskpool.Runs
			if err == nil {
				runs = s
			}
			queued, qerr = queuedIn(ctx, o.Dir, runs)
		}
		if stratus.ErrorCode(err) == stratus.ENOTFOUND && len(queued) > 0 {
			// No run made yet, and tasks queued for the first.
			printQueued(o.IO.Out, queued)
			fmt.Fprintln(o.IO.Out, "no runs yet")
			return nil
		}
		if err != nil {
			return usageOr(err)
		}
		defer s.Close()
		st = s
	}
	if qerr != nil {
		fmt.Fprintf(o.IO.Err, "stratus: warning: the task pool could not be read, its queued tasks are not shown: %s\n", safetext.Line(qerr.Error()))
	}
	lines, err := runview.ListStatus(ctx, st, o.Limit, o.Status)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	printQueued(o.IO.Out, queued)
	if len(lines) == 0 && o.Status != "" {
		fmt.Fprintf(o.IO.Out, "no run is %s\n", o.Status)
		return nil
	} else if len(lines) == 0 {
		fmt.Fprintln(o.IO.Out, "no runs yet")
		return nil
	}
	w := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATUS\tTASK\tFLOW\tSTARTED\tDURATION\tTOKENS\tCOST")
	for _, l := range lines {
		// As status and the viewer say it: nothing priced is an unknown
		// cost, not $0 (lifecycle.Spend.CostText).
		cost := l.CostText()
		status, tokens := l.Status, fmt.Sprint(l.Tokens)
		if !l.PrunedAt.IsZero() { // its steps, and so its spend, are gone (docs/security.md § Retention)
			status, tokens, cost = l.Status+" (pruned)", "-", "-"
		}
		// One cell each: a tab or a newline would shift the table
		// (docs/security.md § Text an engine wrote).
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safetext.Line(l.RunID), safetext.Line(status), safetext.Line(l.TaskID), safetext.Line(l.Flow),
			l.CreatedAt.Local().Format("2006-01-02 15:04:05"), english.Duration(time.Duration(l.DurationMS)*time.Millisecond), tokens, cost)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// A run read interrupted that its store would not record says so
	// (docs/security.md § Output that did not persist).
	for _, l := range lines {
		if l.Note != "" {
			fmt.Fprintf(o.IO.Out, "note: run %s: %s\n", l.RunID, l.Note)
		}
	}
	return nil
}

// queuedOf is the tasks of the pool list lists that are queued
// (taskpool.Listed.Queued), in the order they would be taken.
func queuedOf(ctx context.Context, list poolLister) ([]taskpool.Listed, error) {
	all, err := list(ctx)
	if err != nil {
		return nil, err
	}
	return taskpool.QueuedOf(all), nil
}

// queuedIn is the queued tasks of work dir dir's pool for a watcher of
// orchestrator.queue (taskpool.Pool.Queued), their runs read from runs
// (nil: none made yet); none, without an error, when dir has no config
// or no pool.
func queuedIn(ctx context.Context, dir string, runs taskpool.Runs) ([]taskpool.Listed, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	cfg, pool, err := openPool(dir)
	if err != nil {
		return nil, err
	}
	return pool.Queued(ctx, cfg.Orchestrator.QueueName(), cfg.Orchestrator.MaxTasks(), runs)
}

// printQueued writes queued tasks l above the runs: each one's id, state,
// queue, priority, why it waits and its run once claimed; nothing for none.
func printQueued(w io.Writer, l []taskpool.Listed) {
	if len(l) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUED TASK\tSTATE\tQUEUE\tPRIORITY\tWAITS ON\tRUN")
	for _, t := range l {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safetext.Line(t.ID), t.State, safetext.Line(t.Queue), t.Priority, safetext.Line(cmp.Or(waitText(t), "-")), cmp.Or(t.RunID, "-"))
	}
	tw.Flush()
	fmt.Fprintln(w)
}
