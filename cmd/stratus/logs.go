package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
)

// LogsOptions are the flags of `stratus logs`.
type LogsOptions struct {
	IO    IO
	RunID string
	Node  string
	Dir   string
	Lines int
	JSON  bool
	// Target and AWS: --target aws reads a run on a deployed stack
	// (logs_target.go).
	Target string
	AWS    AWSOptions
}

func newLogsCmd(io IO) *cobra.Command {
	o := &LogsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "logs RUN [NODE] [--dir DIR | --target aws ...] [--lines N] [--json]",
		Short: "Print the tail of each step's runner log (with its engine's stderr)",
		Long: `logs prints, for each step of run RUN that ran a worker (or only NODE's
visits), a header naming the step, its attempt, terminal and reason, then the
last N lines of its runner log, where the runner writes what it did and the
engine's stderr goes. Embedded runs keep them under
DIR/.stratus/logs/<task>/stages/<node>/run-NNNNNN/runner.log; on AWS they are
in the runner's CloudWatch log group.

With --target aws, logs reads the run from the deployed stack's table and
bucket (the flags as status takes them): each step's attempt, terminal and
reason, and for a checks or tool step the report it left in the bucket (what
each command printed), since a worker's own runner log is in CloudWatch.

With --json, logs prints a JSON array, one object per step: step_ref, node,
kind, attempt, terminal, reason, log (the file), log_error when it could not
be read, lines_before (the lines before the tail) and lines, each {"text": the
line as written, "record": the line decoded, when it is a runner record}.

Exit status: 0 printed, 2 no such run or node, or bad flags.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
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
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the steps and their log tails as a JSON array on stdout")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// LogsStep is one step of `stratus logs --json` (an array of them, in
// the run's step order): the step, its latest attempt, and the tail of
// its runner log.
type LogsStep struct {
	StepRef string `json:"step_ref"`
	Node    string `json:"node"` // a supervisor turn: its job
	Kind    string `json:"kind"`
	// For is the step a supervisor turn is about.
	For      string `json:"for,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Terminal string `json:"terminal,omitempty"`
	// Reason is the attempt's reason, else the step's own (an evaluator's
	// verdict), whole.
	Reason string `json:"reason,omitempty"`
	// Log is the runner log's path under DIR; LogError says why it was
	// not read ("no runner log" when it does not exist), Lines is then
	// empty.
	Log      string `json:"log"`
	LogError string `json:"log_error,omitempty"`
	// LinesBefore counts the log's lines before the tail (--lines).
	LinesBefore int       `json:"lines_before,omitempty"`
	Lines       []LogLine `json:"lines"`
}

// LogLine is one line of a runner log: Text as written, and Record, the
// same line decoded, when it is one of the runner's JSON records
// (logging.IsRecord) rather than the engine's stderr.
type LogLine struct {
	Text   string          `json:"text"`
	Record json.RawMessage `json:"record,omitempty"`
}

func runLogs(ctx context.Context, o *LogsOptions) error {
	st, sk, closeRecords, err := o.records()
	if err != nil {
		return err
	}
	defer closeRecords()
	v, err := runview.Load(ctx, st, o.RunID)
	if err != nil {
		return err
	}
	if !v.Run.PrunedAt.IsZero() {
		return stratus.PrunedError(v.Run, "show its logs")
	}
	// The run's own logs: a later run of the task moved them into
	// attempt-N/ (report.RunDir).
	dir, err := report.RunDir(ctx, sk, v.Run.TaskID, v.Run.ID)
	if err != nil {
		return err
	}
	steps := []LogsStep{}
	for _, sv := range v.Steps {
		if !runview.RunsWorker(sv.Step.Kind) || (o.Node != "" && sv.Step.Node != o.Node) {
			continue
		}
		key := path.Join(dir, "stages", sv.Step.Node, fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
		if sv.Step.Kind == report.Kind {
			key = path.Join(dir, "supervisor", fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
		}
		ls := LogsStep{StepRef: sv.Step.StepRef, Node: sv.Step.Node, Kind: sv.Step.Kind, For: sv.For, Log: key, Lines: []LogLine{}}
		if sv.Job != "" {
			ls.Node = sv.Job
		}
		attReason := ""
		if a := sv.Attempt; a != nil {
			ls.Attempt, ls.Terminal, attReason = a.N, a.Terminal, a.Reason
		}
		if ls.Reason = attReason; ls.Reason == "" {
			ls.Reason = sv.Reason // the step's own (an evaluator's verdict)
		}
		key, b, err := readStepLog(ctx, sk, key, sv.Step.Kind)
		ls.Log = key
		switch {
		case stratus.ErrorCode(err) == stratus.ENOTFOUND:
			ls.LogError = "no runner log"
		case err != nil:
			ls.LogError = err.Error()
		}
		var lines []string
		if err == nil {
			lines = logging.Lines(string(b))
			if len(lines) > o.Lines {
				ls.LinesBefore = len(lines) - o.Lines
				lines = lines[len(lines)-o.Lines:]
			}
		}
		if o.JSON {
			for _, l := range lines {
				ll := LogLine{Text: l}
				if logging.IsRecord(l) {
					ll.Record = json.RawMessage(l)
				}
				ls.Lines = append(ls.Lines, ll)
			}
			steps = append(steps, ls)
			continue
		}
		steps = append(steps, ls) // counted: a NODE with no step is refused below

		head := "== " + sv.Step.StepRef
		if sv.Job != "" {
			head += " (" + sv.Job + " of " + sv.For + ")"
		}
		if ls.Attempt > 0 {
			head += fmt.Sprintf(" attempt %d", ls.Attempt)
			if ls.Terminal != "" {
				head += " " + ls.Terminal
			}
			if attReason != "" {
				head += ": " + oneLineText(attReason, 160)
			}
		}
		if attReason == "" && sv.Reason != "" {
			head += " — " + oneLineText(sv.Reason, 160)
		}
		fmt.Fprintln(o.IO.Out, safetext.Line(head))
		switch {
		case stratus.ErrorCode(err) == stratus.ENOTFOUND:
			fmt.Fprintf(o.IO.Out, "   (no runner log at %s)\n", key)
			continue
		case err != nil:
			fmt.Fprintf(o.IO.Out, "   (%s: %v)\n", key, err)
			continue
		}
		if ls.LinesBefore > 0 {
			fmt.Fprintf(o.IO.Out, "   … %s before (%s)\n", english.Plural(ls.LinesBefore, "line"), key)
		}
		for _, l := range lines {
			// The runner's JSON records as sentences; the engine's stderr as
			// written, except what would drive the terminal or disguise text
			// (docs/security.md § Text an engine wrote). A line of the log
			// holds no newline; its tabs stay.
			fmt.Fprintln(o.IO.Out, "   "+safetext.Block(logging.Render(l)))
		}
	}
	if len(steps) == 0 && o.Node != "" {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "node", "run %s has no step of node %q that ran a worker", o.RunID, o.Node)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(steps)
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
