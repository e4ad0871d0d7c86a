package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// TasksOptions are the flags of `stratus tasks`.
type TasksOptions struct {
	IO     IO
	Dir    string
	JSON   bool
	Queue  string
	Target string
	AWS    AWSOptions
}

// PoolTask is one task of `stratus tasks --json` (taskpool.Listing).
type PoolTask = taskpool.Listed

func newTasksCmd(io IO) *cobra.Command {
	o := &TasksOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "tasks [--json] [--dir DIR | --target aws ...]",
		Short: "List the task pool: each task's state, queue, priority, what it waits on and its run",
		Long: `tasks lists the work dir's task pool (README.md § Task pool) in the order
stratus watch would take it: each task's state (preparing, pending, claimed: a
watcher has it and its run is not under way, running, done, failed), queue,
priority, what a pending task waits on (depends_on X, queue other, queue full)
and the run that runs or ran it. --queue is the queue a watcher would serve
(default: orchestrator.queue).

With --target aws, the deployed stack's pool (stratus submit --target aws
queues into it), in the order its claim function takes it; --queue is then
the queue a claim would serve (default: the stack's TaskQueue).

Exit status: 0, 2 bad input (no config, a bad paths.tasks_dir).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if c.Flags().Changed("queue") && strings.TrimSpace(o.Queue) == "" {
				return usageError{fmt.Errorf("--queue %q: want a queue name", o.Queue)}
			}
			return runTasks(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ and the task pool")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the pool as JSON")
	cmd.Flags().StringVar(&o.Queue, "queue", "", "the queue a watcher serves (default: orchestrator.queue; --target aws: the stack's TaskQueue)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runTasks(o *TasksOptions) error {
	var (
		out []taskpool.Listed
		err error
	)
	if o.Target == TargetAWS {
		ctx := awsContext()
		var list poolLister
		if _, list, err = o.AWS.openPool(ctx, o.Queue); err != nil {
			return usageOr(err)
		}
		if out, err = list(ctx); err != nil {
			return err
		}
	} else {
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return err
		}
		var runs taskpool.Runs
		if st, err := openRuns(dir); err == nil {
			defer st.Close()
			runs = st
		}
		if out, err = listPool(context.Background(), dir, o.Queue, runs); err != nil {
			return usageOr(err)
		}
	}
	if o.JSON {
		return printJSON(o.IO.Out, out)
	}
	return printTasks(o.IO.Out, out)
}

// poolLister lists a task pool (taskpool.Pool.Listing, awspool.Pool.Listing).
type poolLister func(ctx context.Context) ([]taskpool.Listed, error)

// printTasks writes pool listing l as `stratus tasks` shows it: one row a
// task, its state, queue, priority, why it waits (or is refused, or does
// not parse) and its run. Every text cell passes through safetext (a task
// file is anyone's text: docs/security.md § Text an engine wrote).
func printTasks(w io.Writer, l []taskpool.Listed) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tQUEUE\tPRIORITY\tWAITS ON\tRUN")
	for _, t := range l {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safetext.Line(t.ID), t.State, safetext.Line(t.Queue), t.Priority, safetext.Line(cmp.Or(waitText(t), "-")), cmp.Or(t.RunID, "-"))
	}
	return tw.Flush()
}

// waitText is what keeps task t from being taken: the pending reason it waits
// for (depends_on X, queue other, queue full), why it is refused, or why
// its file does not parse; "" for none.
func waitText(t taskpool.Listed) string {
	switch {
	case t.Refused != "":
		return "refused: " + t.Refused
	case t.Invalid != "":
		return "invalid: " + t.Invalid
	}
	return t.Waits
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
