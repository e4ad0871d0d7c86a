package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
)

// LogsOptions are the flags of `stratus logs`.
type LogsOptions struct {
	IO     IO
	RunID  string
	Node   string
	Dir    string
	Lines  int
	JSON   bool
	Follow bool
	// All shows every step's log; without it the newest
	// runview.PageSteps steps of the run (of NODE's visits) are read
	// (README.md § Performance).
	All bool
	// Target and AWS: --target aws reads a run on a deployed stack
	// (logs_target.go).
	Target string
	AWS    AWSOptions
}

func newLogsCmd(io IO) *cobra.Command {
	o := &LogsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "logs RUN [NODE] [--dir DIR | --target aws ...] [--lines N] [--json] [--follow]",
		Short: "Print the tail of each step's runner log (with its engine's stderr)",
		Long: `logs prints, for each step of run RUN that ran a worker (or only NODE's
visits), a header naming the step, its attempt, terminal and reason, then the
last N lines of its runner log, where the runner writes what it did and the
engine's stderr goes. Embedded runs keep them under
DIR/.stratus/logs/<task>/stages/<node>/run-NNNNNN/runner.log; on AWS they are
in the runner's CloudWatch log group.

Of a run of more than ` + pageText + ` steps, logs shows the newest ` + pageText + ` steps' (of NODE's
visits, the newest ` + pageText + `) and says how many came before; --all shows every one.

With --target aws, logs reads the run from the deployed stack's table and
bucket (the flags as status takes them): each step's attempt, terminal and
reason, and for a checks or tool step the report it left in the bucket (what
each command printed), since a worker's own runner log is in CloudWatch.

With --json, logs prints a JSON array, one object per step: step_ref, node,
kind, attempt, terminal, reason, log (the file), log_error when it could not
be read, lines_before (the lines before the tail) and lines, each {"text": the
line as written, "record": the line decoded, when it is a runner record}.

With --follow, logs streams the logs as the run's steps run, like tail -f:
each step's header and tail as it starts, then each new line as it is
written (under the step's header again when the lines switch step), and the
step's header once more, "(ended)", when it ends; it exits 0 once the run
ends (Ctrl-C stops following: 130, the run goes on). A run that has ended is
printed as without --follow. With --json too, each line is one JSON object
per line: step_ref, node, attempt, text and record.

` + runArgHelp + `
Exit status: 0 printed, 2 no such run or node, or bad flags.`,
		Args: positional(),
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
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the steps and their log tails as a JSON array on stdout (with --follow: a JSON object per line)")
	cmd.Flags().BoolVar(&o.All, "all", false, "show the logs of every step, not only of the run's (or NODE's) newest "+pageText)
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "stream the logs as the steps run until the run ends, like tail -f")
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
	LinesBefore int       `json:"lines_before"`
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
	run, err := runview.Resolve(ctx, st, o.RunID)
	if err != nil {
		return err
	}
	o.RunID = run.ID
	if !run.PrunedAt.IsZero() {
		return stratus.PrunedError(run, "show its logs")
	}
	src := &sinkLogs{sk: sk}
	if o.Follow {
		return followLogs(ctx, o, st, src)
	}
	return printLogs(ctx, o, st, src)
}

// logSource reads the runner logs of a run's steps from a sink: the work
// dir's .stratus files, or with --target aws the stack's bucket, where a
// checks or tool step's report stands in for the runner log kept in
// CloudWatch (readStepLog).
type logSource interface {
	// Log returns where step sv's runner log is (shown to the reader) and
	// what it holds so far: ENOTFOUND when it has none (yet).
	Log(ctx context.Context, run stratus.Run, sv runview.StepView) (where string, data []byte, err error)
}

// sinkLogs reads a run's runner logs from logs/<task>/ in its sink
// (or the attempt-N/ a later run of the task moved them into:
// report.RunDir).
type sinkLogs struct {
	sk  sink.Sink
	dir string // the run's logs directory, once found
}

func (e *sinkLogs) Log(ctx context.Context, run stratus.Run, sv runview.StepView) (string, []byte, error) {
	if e.dir == "" {
		dir, err := report.RunDir(ctx, e.sk, run.TaskID, run.ID)
		if err != nil {
			return "", nil, err
		}
		e.dir = dir
	}
	key := path.Join(e.dir, "stages", sv.Step.Node, fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
	if sv.Step.Kind == report.Kind {
		key = path.Join(e.dir, "supervisor", fmt.Sprintf("run-%06d", sv.Step.Visit), "runner.log")
	}
	return readStepLog(ctx, e.sk, key, sv.Step.Kind)
}

// logSteps are the steps of v whose logs `logs` shows: those that ran a
// worker, of node only when it is named.
func logSteps(v *runview.View, node string) []runview.StepView {
	var out []runview.StepView
	for _, sv := range v.Steps {
		if runview.RunsWorker(sv.Step.Kind) && (node == "" || sv.Step.Node == node) {
			out = append(out, sv)
		}
	}
	return out
}

// workerNodes says which nodes of a run (heads: each node's latest
// step) ran a worker, for an error naming a node that did not: "nodes
// with logs: a, b" or that none did yet.
func workerNodes(heads []stratus.Step) string {
	var names []string
	for _, st := range heads {
		if runview.RunsWorker(st.Kind) && !slices.Contains(names, st.Node) {
			names = append(names, st.Node)
		}
	}
	if len(names) == 0 {
		return "no step of it has run a worker yet"
	}
	return "nodes with logs: " + strings.Join(names, ", ")
}

// logsStep is step sv's LogsStep without its lines, and its latest
// attempt's reason.
func logsStep(sv runview.StepView, where string) (LogsStep, string) {
	ls := LogsStep{StepRef: sv.Step.StepRef, Node: sv.Step.Node, Kind: sv.Step.Kind, For: sv.For, Log: where, Lines: []LogLine{}}
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
	return ls, attReason
}

// logsHeader is the line that names a step above its log.
func logsHeader(sv runview.StepView, ls LogsStep, attReason string) string {
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
	return safetext.Line(head)
}

// printLogLine prints one line of a runner log: the runner's JSON records
// as sentences; the engine's stderr as written, except what would drive
// the terminal or disguise text (docs/security.md § Text an engine
// wrote). A line of the log holds no newline; its tabs stay.
func printLogLine(io IO, l string) {
	fmt.Fprintln(io.Out, "   "+safetext.Block(logging.Render(l)))
}

// logLine is l as --json gives it.
func logLine(l string) LogLine {
	ll := LogLine{Text: l}
	if logging.IsRecord(l) {
		ll.Record = json.RawMessage(l)
	}
	return ll
}

// logsView reads what `logs` shows of run o.RunID: every step with
// --all; else the run's newest runview.PageSteps steps, or with NODE its
// newest runview.PageSteps visits (store.Store.NodeSteps), each with its
// latest attempt, and each node's latest step (View.Heads) — not the
// run's other steps (README.md § Performance). earlier counts the steps
// (of NODE) before those read.
func logsView(ctx context.Context, o *LogsOptions, st store.Store) (v *runview.View, earlier int, err error) {
	switch {
	case o.All:
		v, err = runview.Load(ctx, st, o.RunID)
		return v, 0, err
	case o.Node == "":
		v, err = runview.LoadPage(ctx, st, o.RunID, runview.Newest)
		if err != nil {
			return nil, 0, err
		}
		return v, v.Earlier(), nil
	}
	v, err = runview.LoadPage(ctx, st, o.RunID, runview.Page{Limit: 1})
	if err != nil {
		return nil, 0, err
	}
	steps, err := st.NodeSteps(ctx, o.RunID, o.Node, runview.PageSteps)
	if err != nil {
		return nil, 0, err
	}
	v.Steps = nil
	for i := len(steps) - 1; i >= 0; i-- { // oldest first, as the run's order
		sv, err := runview.Describe(ctx, st, steps[i])
		if err != nil {
			return nil, 0, err
		}
		v.Steps = append(v.Steps, sv)
	}
	if len(steps) == runview.PageSteps {
		n, err := st.CountVisits(ctx, o.RunID, o.Node)
		if err != nil {
			return nil, 0, err
		}
		earlier = max(n-len(steps), 0)
	}
	return v, earlier, nil
}

// earlierNote says how many steps' logs logs left out, and how to see them.
func earlierNote(o *LogsOptions, earlier int) string {
	of := "run's"
	if o.Node != "" {
		of = "node's"
	}
	return fmt.Sprintf("… the %s %s not shown: --all shows every one", of, english.Plural(earlier, "earlier step"))
}

// printLogs prints the tail of each step's log once.
func printLogs(ctx context.Context, o *LogsOptions, st store.Store, src logSource) error {
	v, earlier, err := logsView(ctx, o, st)
	if err != nil {
		return err
	}
	if earlier > 0 && o.JSON {
		fmt.Fprintln(o.IO.Err, "stratus: "+earlierNote(o, earlier))
	} else if earlier > 0 {
		fmt.Fprintln(o.IO.Out, earlierNote(o, earlier))
	}
	steps := []LogsStep{}
	for _, sv := range logSteps(v, o.Node) {
		key, b, err := src.Log(ctx, v.Run, sv)
		ls, attReason := logsStep(sv, key)
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
		steps = append(steps, ls) // counted: a NODE with no step is refused below
		if o.JSON {
			for _, l := range lines {
				steps[len(steps)-1].Lines = append(steps[len(steps)-1].Lines, logLine(l))
			}
			continue
		}
		fmt.Fprintln(o.IO.Out, logsHeader(sv, ls, attReason))
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
			printLogLine(o.IO, l)
		}
	}
	if len(steps) == 0 && o.Node != "" {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "node", "run %s has no step of node %q that ran a worker; %s", o.RunID, o.Node, workerNodes(v.Heads))
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(steps)
	}
	return nil
}

// LogsFollowLine is one line of `stratus logs --follow --json`: a line of
// a step's runner log as it was written, as LogLine gives it, named by its
// step.
type LogsFollowLine struct {
	StepRef string `json:"step_ref"`
	Node    string `json:"node"`
	Attempt int    `json:"attempt,omitempty"`
	LogLine
}

// followed is how far `logs --follow` has printed one step's log.
type followed struct {
	offset int  // bytes of the log printed (whole lines)
	ended  bool // its end was said
}

// followLogs is `logs --follow`: each step's header and tail as it
// starts, then its log's new lines as they are written, like tail -f,
// with the step's header again whenever the lines switch step, until
// the run ends (its owner's death counts: lifecycle.Reconcile). A run
// that has ended is printed once, whole tails, and the command exits.
func followLogs(ctx context.Context, o *LogsOptions, st store.Store, src logSource) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	state := map[string]*followed{}
	last := "" // the step whose lines were printed last
	enc := json.NewEncoder(o.IO.Out)
	enc.SetEscapeHTML(false)
	emit := func(sv runview.StepView, ls LogsStep, attReason string, lines []string) {
		for _, l := range lines {
			if o.JSON {
				enc.Encode(LogsFollowLine{StepRef: ls.StepRef, Node: ls.Node, Attempt: ls.Attempt, LogLine: logLine(l)})
				continue
			}
			if last != sv.Step.TID {
				fmt.Fprintln(o.IO.Out, logsHeader(sv, ls, attReason))
				last = sv.Step.TID
			}
			printLogLine(o.IO, l)
		}
	}
	for {
		run, err := st.GetRun(ctx, o.RunID)
		if err == nil {
			if run, err = lifecycle.Reconcile(ctx, st, run); errors.Is(err, lifecycle.ErrNotRecorded) {
				err = nil // not recorded (a full disk): the run has ended all the same
			}
		}
		var v *runview.View
		if err == nil {
			v, _, err = logsView(ctx, o, st)
		}
		if err != nil {
			return followLogsStopped(o, err)
		}
		ended := stratus.RunTerminal(run.Status)
		if ended && len(state) == 0 {
			return printLogs(ctx, o, st, src) // it had ended: printed once, as without --follow
		}
		for _, sv := range logSteps(v, o.Node) {
			key, b, err := src.Log(ctx, v.Run, sv)
			if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
				// Said once (a log over the read cap, an unreadable one);
				// the other steps' logs go on.
				if state[sv.Step.TID] == nil {
					state[sv.Step.TID] = &followed{ended: true}
					if ls, attReason := logsStep(sv, key); !o.JSON {
						fmt.Fprintf(o.IO.Out, "%s\n   (%s: %v)\n", logsHeader(sv, ls, attReason), key, err)
						last = ""
					}
				}
				continue
			}
			if f := state[sv.Step.TID]; f != nil && len(b) < f.offset {
				f.offset = 0 // the log was written anew: from its start
			}
			// Whole lines only while the step runs: the rest comes with its
			// newline, or once the step or the run ended.
			upto := len(b)
			if !ended && !sv.Ended() {
				upto = bytes.LastIndexByte(b, '\n') + 1
			}
			var lines []string
			if upto > 0 {
				lines = logging.Lines(string(b[:upto]))
			}
			ls, attReason := logsStep(sv, key)
			f := state[sv.Step.TID]
			if f == nil { // a step seen for the first time: its header and tail
				f = &followed{ended: sv.Ended()} // an ended step's header says how it ended
				state[sv.Step.TID] = f
				if !o.JSON {
					fmt.Fprintln(o.IO.Out, logsHeader(sv, ls, attReason))
					last = sv.Step.TID
				}
				if len(lines) > o.Lines {
					if !o.JSON {
						fmt.Fprintf(o.IO.Out, "   … %s before (%s)\n", english.Plural(len(lines)-o.Lines, "line"), key)
					}
					lines = lines[len(lines)-o.Lines:]
				}
				emit(sv, ls, attReason, lines)
			} else if upto > f.offset {
				emit(sv, ls, attReason, logging.Lines(string(b[f.offset:upto])))
			}
			f.offset = max(f.offset, upto)
			if sv.Ended() && !f.ended {
				f.ended = true
				if !o.JSON {
					fmt.Fprintln(o.IO.Out, logsHeader(sv, ls, attReason)+" (ended)")
					last = ""
				}
			}
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return followLogsStopped(o, ctx.Err())
		case <-time.After(FollowPoll):
		}
	}
}

// followLogsStopped is the exit of a follow that ended before the run:
// Ctrl-C stops following (the run goes on), anything else is the error.
func followLogsStopped(o *LogsOptions, err error) error {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(o.IO.Err, "stratus: stopped following the logs of run %s; it goes on\n", o.RunID)
		return &exitError{code: ExitInterrupted}
	}
	return err
}

// oneLineText is s on one line, cut to n runes.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
