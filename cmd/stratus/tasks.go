package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
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

// PoolTask is one task of `stratus tasks --json`.
type PoolTask struct {
	ID       string `json:"id"`
	File     string `json:"file"`
	State    string `json:"state"` // preparing, pending, claimed, running, done, failed
	Queue    string `json:"queue"`
	Priority string `json:"priority"`
	// Waits says why a pending task is not taken: "depends_on X",
	// "queue other", "queue full"; Refused why it never will be (a
	// depends_on cycle, an unknown id); Invalid why its front matter does
	// not parse.
	Waits   string `json:"waits,omitempty"`
	Refused string `json:"refused,omitempty"`
	Invalid string `json:"invalid,omitempty"`
	RunID   string `json:"run_id,omitempty"`
}

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
	cfg, pool, err := openPool(dir)
	if err != nil {
		return usageOr(err)
	}
	entries, err := pool.All()
	if err != nil {
		return err
	}
	claims, err := pool.Claims()
	if err != nil {
		return err
	}
	byID := map[string]taskpool.Claim{}
	claimed := map[string]bool{}
	for _, c := range claims {
		byID[c.TaskID], claimed[c.TaskID] = c, true
	}
	queue := o.Queue
	if queue == "" {
		queue = cfg.Orchestrator.QueueName()
	}
	w := &watcher{dir: dir, pool: pool}
	plan := taskpool.Decide(taskpool.Input{Entries: entries, Claimed: claimed, Queue: queue,
		Free: cfg.Orchestrator.MaxTasks() - len(claims), Unmerged: w.unmerged})
	runStatus := runStatuses(dir)
	out := []PoolTask{}
	row := func(e taskpool.Entry, state string) PoolTask {
		return PoolTask{ID: e.ID(), File: e.File, State: state, Queue: e.Queue(), Priority: e.Priority()}
	}
	for _, e := range entries[taskpool.Preparing] {
		out = append(out, row(e, taskpool.Preparing))
	}
	for _, d := range plan.Pending {
		t := row(d.Entry, taskpool.Pending)
		t.Waits, t.Refused = d.Waits, d.Refuse
		if c, ok := byID[t.ID]; d.Claimed && ok {
			t.RunID, t.State = c.RunID, "claimed"
			if c.Held && runStatus(c.RunID) == stratus.RunRunning {
				t.State = "running"
			}
		}
		out = append(out, t)
	}
	for _, e := range plan.Invalid {
		t := row(e, taskpool.Pending)
		t.Invalid = e.Err.Error()
		out = append(out, t)
	}
	for _, s := range []string{taskpool.Done, taskpool.Failed} {
		for _, e := range entries[s] {
			t := row(e, s)
			if c, ok := pool.Ended(t.ID); ok {
				t.RunID = c.RunID
			}
			out = append(out, t)
		}
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

// runStatuses returns a reader of dir's run statuses, reconciled (a run
// whose owner is gone reads interrupted); "" for an unknown run.
func runStatuses(dir string) func(runID string) string {
	return func(runID string) string {
		st, err := openRuns(dir)
		if err != nil {
			return ""
		}
		defer st.Close()
		run, err := st.GetRun(context.Background(), runID)
		if err != nil {
			return ""
		}
		if lifecycle.OwnerGoneOf(run) {
			return stratus.RunInterrupted
		}
		return run.Status
	}
}
