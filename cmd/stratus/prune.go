package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// PruneOptions are the flags of `stratus prune`.
type PruneOptions struct {
	IO     IO
	Dir    string
	DryRun bool
	JSON   bool
	// Now is the time runs are aged against; zero: now (tests set it).
	Now time.Time
}

func newPruneCmd(io IO) *cobra.Command {
	o := &PruneOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "prune [--dir DIR] [--dry-run] [--json]",
		Short: "Remove the files and step records of runs that ended more than retention_days ago",
		Long: `prune removes, for every embedded run of DIR that ended more than retention_days
ago (config.yaml; default 30, 0 keeps runs for ever), its run directory
(DIR/.stratus/runs/<run_id>/: the frozen bundle and definition, the workspace
bundles, a detached run's log), what is left of its uploads, the archives later
runs of its task made of its ctx dir and logs
(DIR/.stratus/logs/<task>/attempt-N/), and its steps, attempts and outputs in
the store. The run itself stays listed, marked pruned: status says so, and
resume, pull and logs refuse it. A run running, waiting or resumable is aged
by its end: one that has not ended is never pruned. The ctx dir and logs of a
task's latest run stay. A run's start prunes the same way, at most once an
hour; on AWS the stack's bucket does it (RetentionDays, docs/security.md §
Retention).

--dry-run lists what would go and removes nothing; --json prints the report
as JSON.

Exit status: 0 pruned (or nothing to prune), 2 bad flags or config.yaml.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return runPrune(context.Background(), o) },
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as JSON on stdout")
	return cmd
}

// PruneReport is what `stratus prune --json` prints.
type PruneReport = orchestrator.PruneReport

func runPrune(ctx context.Context, o *PruneOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	cfg, err := config.Load(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile))
	if err != nil {
		return usageOr(err)
	}
	rep, err := orchestrator.Prune(ctx, orchestrator.PruneOptions{Dir: dir, Days: cfg.Retention(), Now: o.Now, DryRun: o.DryRun})
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	out := o.IO.Out
	if rep.RetentionDays == 0 {
		fmt.Fprintf(out, "retention_days is 0 in %s: runs are kept for ever; nothing pruned\n", filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile))
		return nil
	}
	verb := "pruned"
	if rep.DryRun {
		verb = "would prune"
	}
	for _, r := range rep.Runs {
		what := fmt.Sprintf("run %s (task %s, %s, ended %s)", r.RunID, r.TaskID, r.Status, r.EndedAt.Local().Format("2006-01-02 15:04"))
		if r.Earlier {
			what = fmt.Sprintf("run %s (pruned before): its leftover files", r.RunID)
		}
		fmt.Fprintf(out, "%s %s: %d bytes\n", verb, what, r.Bytes)
		for _, p := range r.Paths {
			fmt.Fprintf(out, "  %s\n", p)
		}
	}
	for _, a := range rep.Archives {
		fmt.Fprintf(out, "%s %s (an archive no recorded run claims)\n", verb, a)
	}
	for _, t := range rep.Busy {
		fmt.Fprintf(out, "kept the runs of task %s for now: a run of it holds its lock\n", t)
	}
	fmt.Fprintf(out, "%s %d runs and %d archives that ended before %s (retention_days %d): %d bytes\n",
		verb, len(rep.Runs), len(rep.Archives), rep.Cutoff.Local().Format("2006-01-02 15:04"), rep.RetentionDays, rep.Bytes)
	return nil
}
