package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/safetext"
)

// RunOptions are the flags of `stratus run`.
type RunOptions struct {
	IO   IO
	Task string
	Dir  string
	JSON bool
	Self string // the stratus binary workers run as ("" = this one)
	// Detach hands the run to the work dir's host and returns at once
	// (detach.go); RunID is the id that process gives the run (hidden).
	Detach bool
	RunID  string
	// Target and AWS: --target aws runs on a deployed stack (runaws.go).
	Target string
	AWS    AWSOptions
	// NoPull: a run whose repository travelled (--target aws, workspace:
	// worktree) does not pull its commits at its end.
	NoPull bool
}

func newRunCmd(io IO) *cobra.Command {
	o := &RunOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "run TASK.md [--dir DIR]",
		Short: "Run a task file through its flow (embedded, or --target aws)",
		Long: `run reads TASK.md (worc's task format), picks the flow by its task_type
(absent: implementation) from DIR/.stratus/flows/, validates and compiles it to
ASL, and executes it on the embedded executor. With --target aws it freezes
the run into a deployed stack's bucket, starts an execution of the stack's
state machine and follows it. Progress goes to stderr.

With --detach the run goes on in the work dir's host (stratus host: one
background process for every detached run of the work dir, started when none
serves it), apart from this terminal: run prints its id on stdout (--json: {"run_id": ...}) and returns once
the run is recorded. Its progress goes to DIR/.stratus/runs/<run_id>/run.log;
stratus status RUN --follow streams it, stratus cancel RUN stops the run,
stratus approve|reject|answer reach it. With --target aws, --detach starts
the execution and does not follow it.

Exit status: 0 done (with --detach: started), 1 failed, 3
manual_action_required, 130 interrupted, 2 bad input.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.Task = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if o.RunID != "" {
				if err := lifecycle.CheckRunID(o.RunID); err != nil {
					return usageError{err}
				}
			}
			if o.Target == TargetAWS {
				return runRunAWS(o)
			}
			if o.Detach {
				return runDetached(o)
			}
			return runRun(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON on stdout")
	cmd.Flags().BoolVar(&o.NoPull, "no-pull", false, "do not bring the commits of a run whose repository travels (--target aws, workspace: worktree) back as branch stratus/<task_id> at its end")
	cmd.Flags().BoolVar(&o.Detach, "detach", false, "start the run in the background, print its id and return at once")
	cmd.Flags().StringVar(&o.RunID, "run-id", "", "the id to give the new run (r-<yyyymmddThhmmss>-<6 hex>)")
	cmd.Flags().MarkHidden("run-id")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// RunResult is what `stratus run --json` prints.
type RunResult struct {
	RunID            string   `json:"run_id"`
	TaskID           string   `json:"task_id"`
	Flow             string   `json:"flow"`
	Status           string   `json:"status"`
	Error            string   `json:"error,omitempty"`
	Cause            string   `json:"cause,omitempty"`
	CtxDir           string   `json:"ctx_dir"`
	Summary          []string `json:"summary"`
	OverheadMedianMS *float64 `json:"overhead_median_ms,omitempty"`
	// Budgets is how many rounds of each budget the run spent, whatever
	// its terminal: per loop, inline budget, hitl rounds and the global
	// backstop, summed over a decomposition's subtasks.
	Budgets map[string]int `json:"budgets_spent,omitempty"`
	// SummaryError says the summary could not be written (a full disk)
	// and where it would have been; Summary is then empty. RecordError
	// says the run's end could not be recorded: until the store takes it,
	// the run reads interrupted (docs/security.md § Output that did not
	// persist).
	SummaryError string `json:"summary_error,omitempty"`
	RecordError  string `json:"record_error,omitempty"`
	// Publication is the pushed branch and pull request, when the run's
	// publish step pushed (docs/architecture.md § Publishing).
	Publication *stratus.Publication `json:"publication,omitempty"`
}

func runRun(o *RunOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// `stratus run … 2>&1 | head` closes the pipe early: a write to it must
	// fail (EPIPE), not kill the run half-way and leave it "running" with a
	// stale runs/<run>.json. Notify rather than Ignore: a caught signal is
	// reset to its default in the runners and engines this process starts,
	// an ignored one would be inherited by them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	d := newDisplay(o.IO, o.JSON)
	defer d.Close()
	res, err := orchestrator.Run(ctx, orchestrator.Options{Dir: o.Dir, TaskPath: o.Task, Self: o.Self, Progress: d, RunID: o.RunID, NoPull: o.NoPull})
	return endRun(o.IO, d, o.JSON, res, err)
}

// newDisplay is the progress display of a command that runs or follows a
// run (README.md § Live progress): its lines on stderr, with a ticking line
// per running step when stderr is a terminal (else a busy line per running
// step every $STRATUS_PROGRESS_INTERVAL, default 30 s), and with asJSON one
// JSON object per event on stdout, the run's end last (printRun).
func newDisplay(io IO, asJSON bool) *progress.Display {
	o := progress.Options{Out: io.Err, Live: progress.Terminal(io.Err)}
	if asJSON {
		o.JSON = io.Out
		// JSON lines on the same terminal would be erased by the redraw.
		o.Live = o.Live && !progress.Terminal(io.Out)
	}
	if v := os.Getenv(EnvProgressInterval); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			fmt.Fprintf(io.Err, "stratus: warning: %s=%q: want a duration from 1s to 24h (e.g. 10s, 2m); using %s\n", EnvProgressInterval, v, progress.DefaultEvery)
		} else {
			o.Every = d
		}
	}
	return progress.New(o)
}

// EnvProgressInterval sets how often a running step gets a busy line where
// stderr is not a terminal (a log, a pipe, a detached run's run.log).
const EnvProgressInterval = "STRATUS_PROGRESS_INTERVAL"

// endRun reports how an embedded run (or resume) ended and returns its exit
// status: an interrupted run says so on stderr (ExitInterrupted), bad input
// is ExitUsage, and a run that ended prints its result (printRun).
func endRun(io IO, d *progress.Display, asJSON bool, res *orchestrator.Result, err error) error {
	d.Close()
	if errors.Is(err, context.Canceled) && res != nil {
		if asJSON {
			d.RunEnded(runResult(res))
		}
		resume := "stratus resume " + res.Run.ID
		if f := orchestrator.DirFlag(res.Run.WorkDir); f != "" && res.Run.WorkDir != "" {
			resume += " " + f
		}
		fmt.Fprintf(io.Err, "stratus: interrupted: run %s stopped (workers stopped); `%s` goes on from where it stopped\n", res.Run.ID, resume)
		out := runResult(res)
		if out.Cause != "" {
			fmt.Fprintf(io.Err, "  why:      %s\n", safetext.Line(out.Cause))
		}
		printEnd(io.Err, out)
		return &exitError{code: ExitInterrupted}
	}
	if errors.Is(err, context.Canceled) {
		// Interrupted before its execution started (while the run was
		// being frozen or recorded): nothing ran; a run recorded by then
		// reads interrupted (lifecycle.Reconcile).
		fmt.Fprintf(io.Err, "stratus: interrupted before the run started (%v)\n", err)
		if asJSON {
			d.RunEnded(struct {
				Status string `json:"status"`
				Error  string `json:"error"`
				Cause  string `json:"cause"`
			}{stratus.RunInterrupted, "stratus.Cancelled", "interrupted before the run started"})
		}
		return &exitError{code: ExitInterrupted}
	}
	if err != nil {
		return usageOr(err)
	}
	return printRun(io, d, asJSON, res)
}

// printEnd prints the lines of a run's result after its why: its ctx dir,
// its summary (or why it was not written, and where it would have been),
// whether its end was recorded, and the budgets it spent.
func printEnd(w io.Writer, out RunResult) {
	if out.CtxDir != "" {
		fmt.Fprintf(w, "  ctx dir:  %s\n", safetext.Line(out.CtxDir))
	}
	for _, s := range out.Summary {
		fmt.Fprintf(w, "  summary:  %s\n", safetext.Line(s))
	}
	if out.SummaryError != "" {
		fmt.Fprintf(w, "  summary:  %s\n", safetext.Line(out.SummaryError))
	}
	if out.RecordError != "" {
		fmt.Fprintf(w, "  record:   %s\n", safetext.Line(out.RecordError))
	}
	if p := out.Publication; p != nil {
		fmt.Fprintf(w, "  branch:   %s pushed to %s (%s)\n", safetext.Line(p.Branch), safetext.Line(p.Remote), safetext.Line(p.URL))
		if pr := p.PullRequest; pr != nil {
			fmt.Fprintf(w, "  pull request: #%d %s (%s)\n", pr.Number, safetext.Line(pr.URL), safetext.Line(pr.State))
		}
		if p.Note != "" {
			fmt.Fprintf(w, "  publish:  %s\n", safetext.Line(p.Note))
		}
	}
	if b := budgetsLine(out.Budgets); b != "" {
		fmt.Fprintf(w, "  budgets spent: %s\n", b)
	}
}

// budgetsLine is "name n, name n" in name order; "" when there is none.
func budgetsLine(b map[string]int) string {
	var spent []string
	for _, k := range slices.Sorted(maps.Keys(b)) {
		spent = append(spent, fmt.Sprintf("%s %d", k, b[k]))
	}
	return strings.Join(spent, ", ")
}

func median(ds []time.Duration) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// runResult is what `stratus run --json` prints of res, last.
func runResult(res *orchestrator.Result) RunResult {
	out := RunResult{RunID: res.Run.ID, TaskID: res.Run.TaskID, Flow: res.Run.Flow, Status: res.Status,
		CtxDir: res.CtxDir, Summary: res.Summary, Budgets: res.Budgets, Publication: res.Run.Publication}
	if out.Summary == nil {
		out.Summary = []string{}
	}
	if res.Status != stratus.RunDone {
		out.Error, out.Cause = res.Error, res.Cause
	}
	if res.SummaryErr != nil {
		out.SummaryError = res.SummaryErr.Error()
	}
	if res.RecordErr != nil {
		out.RecordError = fmt.Sprintf("the run's end could not be recorded (%v); until the store takes it, the run reads interrupted, and the next `stratus status %s` records that", res.RecordErr, res.Run.ID)
	}
	if m, ok := median(res.Overhead); ok {
		ms := float64(m.Microseconds()) / 1000
		out.OverheadMedianMS = &ms
	}
	return out
}

// usageOr makes a bad-input error (EINVALID, ENOTFOUND, ETOOLARGE: a
// workspace over its cap) exit with
// ExitUsage, as `stratus run` does.
func usageOr(err error) error {
	if code := stratus.ErrorCode(err); code == stratus.EINVALID || code == stratus.ENOTFOUND || code == stratus.ETOOLARGE {
		return &exitError{code: ExitUsage, err: err}
	}
	return err
}

// printRun prints a run's result as `stratus run` does and returns its
// exit status (done 0, manual_action_required 3, failed 1).
func printRun(io IO, d *progress.Display, asJSON bool, res *orchestrator.Result) error {
	d.Close() // the ticking lines go before the result is printed
	out := runResult(res)
	if asJSON {
		d.RunEnded(out)
	} else {
		fmt.Fprintf(io.Out, "run %s: %s\n", out.RunID, out.Status)
		// The why in words; the error's name (stratus.Failed, …) is the
		// JSON's "error" for scripts, never prose for a reader.
		// It quotes what an engine wrote: one line, escaped
		// (docs/security.md § Text an engine wrote).
		switch {
		case out.Cause != "":
			fmt.Fprintf(io.Out, "  why:      %s\n", safetext.Line(out.Cause))
		case out.Error != "":
			fmt.Fprintf(io.Out, "  why:      %s\n", safetext.Line(out.Error))
		}
		printEnd(io.Out, out)
		if out.OverheadMedianMS != nil {
			fmt.Fprintf(io.Out, "  orchestration overhead per step (report -> next engine start): median %.1f ms over %d transitions\n", *out.OverheadMedianMS, len(res.Overhead))
		}
	}
	return runExit(res.Status)
}
