package main

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink/fs"
)

// LogsOptions are the flags of `stratus logs`.
type LogsOptions struct {
	IO    IO
	RunID string
	Node  string
	Dir   string
	Lines int
}

func newLogsCmd(io IO) *cobra.Command {
	o := &LogsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "logs RUN [NODE] [--dir DIR] [--lines N]",
		Short: "Print the tail of each step's runner log (with its engine's stderr)",
		Long: `logs prints, for each step of run RUN that ran a worker (or only NODE's
visits), a header naming the step, its attempt, terminal and reason, then the
last N lines of its runner log, where the runner writes what it did and the
engine's stderr goes. Embedded runs keep them under
DIR/.stratus/logs/<task>/stages/<node>/run-NNNNNN/runner.log; on AWS they are
in the runner's CloudWatch log group.

Exit status: 0 printed, 2 no such run or node, or bad flags.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(_ *cobra.Command, args []string) error {
			o.RunID = args[0]
			if len(args) == 2 {
				o.Node = args[1]
			}
			if o.Lines < 1 {
				return usageError{fmt.Errorf("--lines %d: want 1 or more", o.Lines)}
			}
			return runLogs(context.Background(), o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().IntVar(&o.Lines, "lines", 40, "lines of each log to print (its tail)")
	return cmd
}

func runLogs(ctx context.Context, o *LogsOptions) error {
	st, err := openRuns(o.Dir)
	if err != nil {
		return err
	}
	defer st.Close()
	v, err := runview.Load(ctx, st, o.RunID)
	if err != nil {
		return err
	}
	if !v.Run.PrunedAt.IsZero() {
		return stratus.PrunedError(v.Run, "show its logs")
	}
	sk := fs.New(o.Dir).Private(orchestrator.StateDir)
	// The run's own logs: a later run of the task moved them into
	// attempt-N/ (report.RunDir).
	dir, err := report.RunDir(ctx, sk, v.Run.TaskID, v.Run.ID)
	if err != nil {
		return err
	}
	shown := 0
	for _, sv := range v.Steps {
		if !runview.RunsWorker(sv.Step.Kind) || (o.Node != "" && sv.Step.Node != o.Node) {
			continue
		}
		shown++
		key := path.Join(dir, "stages", sv.Step.Node, fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
		if sv.Step.Kind == report.Kind {
			key = path.Join(dir, "supervisor", fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
		}
		head := "== " + sv.Step.StepRef
		if sv.Job != "" {
			head += " (" + sv.Job + " of " + sv.For + ")"
		}
		if a := sv.Attempt; a != nil {
			head += fmt.Sprintf(" attempt %d", a.N)
			if a.Terminal != "" {
				head += " " + a.Terminal
			}
			if a.Reason != "" {
				head += ": " + oneLineText(a.Reason, 160)
			}
		}
		if (sv.Attempt == nil || sv.Attempt.Reason == "") && sv.Reason != "" {
			head += " — " + oneLineText(sv.Reason, 160) // the step's own (an evaluator's verdict)
		}
		fmt.Fprintln(o.IO.Out, safetext.Line(head))
		b, err := sk.GetMax(ctx, key, 16<<20)
		switch {
		case stratus.ErrorCode(err) == stratus.ENOTFOUND:
			fmt.Fprintf(o.IO.Out, "   (no runner log at %s)\n", key)
			continue
		case err != nil:
			fmt.Fprintf(o.IO.Out, "   (%s: %v)\n", key, err)
			continue
		}
		lines := logging.Lines(string(b))
		if len(lines) > o.Lines {
			fmt.Fprintf(o.IO.Out, "   … %s before (%s)\n", english.Plural(len(lines)-o.Lines, "line"), key)
			lines = lines[len(lines)-o.Lines:]
		}
		for _, l := range lines {
			// The runner's JSON records as sentences; the engine's stderr as
			// written, except what would drive the terminal or disguise text
			// (docs/security.md § Text an engine wrote). A line of the log
			// holds no newline; its tabs stay.
			fmt.Fprintln(o.IO.Out, "   "+safetext.Block(logging.Render(l)))
		}
	}
	if shown == 0 && o.Node != "" {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "node", "run %s has no step of node %q that ran a worker", o.RunID, o.Node)
	}
	return nil
}

// oneLineText is s on one line, cut to n runes.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
