package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/store"
)

// RunsOptions are the flags of `stratus runs`.
type RunsOptions struct {
	IO     IO
	Dir    string
	JSON   bool
	Limit  int
	Target string
	AWS    AWSOptions
}

func newRunsCmd(io IO) *cobra.Command {
	o := &RunsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "runs [--dir DIR | --target aws ...] [--limit N]",
		Short: "List runs, newest first: status, task, flow, when, cost",
		Long: `runs lists the runs made in DIR (or on a deployed stack with --target aws),
newest first: run id, status, task, flow, when it started, how long it ran (the
sum of its active spans: the idle time before a resume is not counted) and what
it cost. A run whose process is gone shows interrupted (and is recorded so);
one that waits for a human shows waiting; one pruned after retention_days shows
"(pruned)" beside its status, with no tokens or cost (they went with its steps).

Exit status: 0 listed, 2 no runs were ever made under DIR, or bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if o.Limit < 0 {
				return usageError{fmt.Errorf("--limit %d: want a number of runs >= 0 (0: all)", o.Limit)}
			}
			return runRuns(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the runs as a JSON array on stdout")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "list at most this many runs (0: all)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// RunLine is one run of `stratus runs --json` (runview.RunLine).
type RunLine = runview.RunLine

func runRuns(o *RunsOptions) error {
	ctx := awsContext()
	var st store.Store
	if o.Target == TargetAWS {
		s, _, err := o.AWS.openRecords(ctx)
		if err != nil {
			return usageOr(err)
		}
		st = s
	} else {
		s, err := openRuns(o.Dir)
		if err != nil {
			return usageOr(err)
		}
		defer s.Close()
		st = s
	}
	lines, err := runview.List(ctx, st, o.Limit)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(lines)
	}
	if len(lines) == 0 {
		fmt.Fprintln(o.IO.Out, "no runs yet")
		return nil
	}
	w := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATUS\tTASK\tFLOW\tSTARTED\tDURATION\tTOKENS\tCOST")
	for _, l := range lines {
		// As the viewer says it: nothing priced is an unknown cost, not $0.
		cost := fmt.Sprintf("$%.4f", l.CostUSD)
		switch {
		case !l.CostKnown():
			cost = fmt.Sprintf("unknown (%s reporting none)", english.Plural(l.Unpriced, "attempt"))
		case l.Unpriced > 0:
			cost += fmt.Sprintf(" + %d unpriced", l.Unpriced)
		}
		status, tokens := l.Status, fmt.Sprint(l.Tokens)
		if !l.PrunedAt.IsZero() { // its steps, and so its spend, are gone (docs/security.md § Retention)
			status, tokens, cost = l.Status+" (pruned)", "-", "-"
		}
		// One cell each: a tab or a newline would shift the table
		// (docs/security.md § Text an engine wrote).
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safetext.Line(l.RunID), safetext.Line(status), safetext.Line(l.TaskID), safetext.Line(l.Flow),
			l.CreatedAt.Local().Format("2006-01-02 15:04:05"), english.Duration(time.Duration(l.DurationMS)*time.Millisecond), tokens, cost)
	}
	return w.Flush()
}
