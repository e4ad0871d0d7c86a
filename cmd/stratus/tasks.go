package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// TasksOptions are the flags of `stratus tasks`.
type TasksOptions struct {
	IO    IO
	Dir   string
	JSON  bool
	Queue string
}

// PoolTask is one task of `stratus tasks --json` (taskpool.Listing).
type PoolTask = taskpool.Listed

func newTasksCmd(io IO) *cobra.Command {
	o := &TasksOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "tasks [--json] [--dir DIR]",
		Short: "List the task pool: each task's state, queue, priority, what it waits on and its run",
		Long: `tasks lists the work dir's task pool (README.md § Task pool) in the order
stratus watch would take it: each task's state (preparing, pending, claimed: a
watcher has it and its run is not under way, running, done, failed), queue,
priority, what a pending task waits on (depends_on X, queue other, queue full)
and the run that runs or ran it. --queue is the queue a watcher would serve
(default: orchestrator.queue).

Exit status: 0, 2 bad input (no config, a bad paths.tasks_dir).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runTasks(o) },
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ and the task pool")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the pool as JSON")
	cmd.Flags().StringVar(&o.Queue, "queue", "", "the queue a watcher serves (default: orchestrator.queue)")
	return cmd
}

func runTasks(o *TasksOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	var runs taskpool.Runs
	if st, err := openRuns(dir); err == nil {
		defer st.Close()
		runs = st
	}
	out, err := listPool(context.Background(), dir, o.Queue, runs)
	if err != nil {
		return usageOr(err)
	}
	if o.JSON {
		return printJSON(o.IO.Out, out)
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tQUEUE\tPRIORITY\tWAITS ON\tRUN")
	for _, t := range out {
		why := t.Waits
		switch {
		case t.Refused != "":
			why = "refused: " + t.Refused
		case t.Invalid != "":
			why = "invalid: " + t.Invalid
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safetext.Line(t.ID), t.State, safetext.Line(t.Queue), t.Priority, safetext.Line(cmp.Or(why, "-")), cmp.Or(t.RunID, "-"))
	}
	return tw.Flush()
}

// listPool is taskpool.Listing of work dir dir's pool (its config's
// paths.tasks_dir, orchestrator.max_concurrent_tasks) for a watcher of
// queue (default: orchestrator.queue), its runs read from runs (nil: no
// run made yet). Errors: the config does not load (EINVALID, ENOTFOUND),
// the pool is not readable.
func listPool(ctx context.Context, dir, queue string, runs taskpool.Runs) ([]taskpool.Listed, error) {
	cfg, pool, err := openPool(dir)
	if err != nil {
		return nil, err
	}
	if queue == "" {
		queue = cfg.Orchestrator.QueueName()
	}
	return pool.Listing(ctx, queue, cfg.Orchestrator.MaxTasks(), runs)
}
