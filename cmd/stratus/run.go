package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// RunOptions are the flags of `stratus run`.
type RunOptions struct {
	IO   IO
	Task string
	Dir  string
	JSON bool
	Self string // the stratus binary workers run as ("" = this one)
	// Target and AWS: --target aws runs on a deployed stack (runaws.go).
	Target string
	AWS    AWSOptions
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

Exit status: 0 done, 1 failed, 3 manual_action_required, 2 bad input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.Task = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			if o.Target == TargetAWS {
				return runRunAWS(o)
			}
			return runRun(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON on stdout")
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
	res, err := orchestrator.Run(ctx, orchestrator.Options{Dir: o.Dir, TaskPath: o.Task, Self: o.Self, Progress: o.IO.Err})
	if errors.Is(err, context.Canceled) && res != nil {
		fmt.Fprintf(o.IO.Err, "stratus: interrupted: run %s stopped (workers stopped)\n", res.Run.ID)
		if res.Cause != "" {
			fmt.Fprintf(o.IO.Err, "  why:      %s\n", res.Cause)
		}
		for _, s := range res.Summary {
			fmt.Fprintf(o.IO.Err, "  summary:  %s\n", s)
		}
		if b := budgetsLine(res.Budgets); b != "" {
			fmt.Fprintf(o.IO.Err, "  budgets spent: %s\n", b)
		}
		return &exitError{code: ExitInterrupted}
	}
	if err != nil {
		if stratus.ErrorCode(err) == stratus.EINVALID || stratus.ErrorCode(err) == stratus.ENOTFOUND {
			return &exitError{code: ExitUsage, err: err}
		}
		return err
	}
	out := RunResult{RunID: res.Run.ID, TaskID: res.Run.TaskID, Flow: res.Run.Flow, Status: res.Status,
		CtxDir: res.CtxDir, Summary: res.Summary, Budgets: res.Budgets}
	if res.Status != stratus.RunDone {
		out.Error, out.Cause = res.Error, res.Cause
	}
	if m, ok := median(res.Overhead); ok {
		ms := float64(m.Microseconds()) / 1000
		out.OverheadMedianMS = &ms
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		enc.Encode(out)
	} else {
		fmt.Fprintf(o.IO.Out, "run %s: %s\n", out.RunID, out.Status)
		if out.Error != "" {
			fmt.Fprintf(o.IO.Out, "  why:      %s: %s\n", out.Error, out.Cause)
		}
		fmt.Fprintf(o.IO.Out, "  ctx dir:  %s\n", out.CtxDir)
		for _, s := range out.Summary {
			fmt.Fprintf(o.IO.Out, "  summary:  %s\n", s)
		}
		if b := budgetsLine(out.Budgets); b != "" {
			fmt.Fprintf(o.IO.Out, "  budgets spent: %s\n", b)
		}
		if out.OverheadMedianMS != nil {
			fmt.Fprintf(o.IO.Out, "  orchestration overhead per step (report -> next engine start): median %.1f ms over %d transitions\n", *out.OverheadMedianMS, len(res.Overhead))
		}
	}
	switch res.Status {
	case stratus.RunDone:
		return nil
	case stratus.RunManualActionRequired:
		return &exitError{code: ExitManual}
	default:
		return &exitError{code: ExitFailed}
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
