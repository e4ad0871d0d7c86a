package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/taskpool"
	"github.com/stratusflow/stratus/internal/worker"
)

// StatusOptions are the flags of `stratus status`.
type StatusOptions struct {
	IO     IO
	RunID  string
	Dir    string
	JSON   bool
	Follow bool
	// All shows every step; without it a run of more than
	// runview.PageSteps steps shows its newest (README.md § Performance).
	All    bool
	Target string
	AWS    AWSOptions
}

// page is the steps status reads: the newest runview.PageSteps, every one
// with --all.
func (o *StatusOptions) page() runview.Page {
	if o.All {
		return runview.All
	}
	return runview.Newest
}

func newStatusCmd(io IO) *cobra.Command {
	o := &StatusOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "status RUN [--dir DIR | --target aws ...]",
		Short: "Show a run: its status, each step with its verdict, where its summary is",
		Long: `status shows run RUN as its records hold it: the run's status, each step
(and supervisor turn) with its verdict, attempt, duration and tokens — a failed
attempt with its failure class and the reset its failure named, a step's earlier
attempts under it — and where the run's summary is. An embedded run is read from DIR/.stratus/stratus.db; with
--target aws, from the deployed stack's table, and the execution's own status is
shown beside the run's (a run nobody followed to its end still reads running).
A run pruned after retention_days says so: its steps went with its files.
A run of more than ` + pageText + ` steps shows its newest ` + pageText + ` and says how many came
before; --all shows every step.
RUN naming a task of the task pool that is queued and not yet a run (README.md
§ Task pool) shows that task: its state and why it waits (depends_on X, queue
other, queue full); --json gives it as "queued", with run_id empty. A task
the pool refused before it ever ran shows failed, and where its summary is.

With --follow, status first streams the run's progress lines (those it already
made, then each as it happens) to stderr until the run ends, then prints its
status, and exits as run does: 0 done, 1 failed, 3 manual_action_required,
130 interrupted.

` + runArgHelp + `
Exit status: 0 shown, 2 no such run or bad flags.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.RunID = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			return runStatus(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the status as JSON on stdout")
	cmd.Flags().BoolVar(&o.All, "all", false, "show every step of the run, not only its newest "+pageText)
	cmd.Flags().BoolVar(&o.Follow, "follow", false, "stream the run's progress lines to stderr until it ends, then print its status; exit as run does")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// pageText is how many steps status and logs show of a long run unless
// --all (runview.PageSteps).
var pageText = strconv.Itoa(runview.PageSteps)

// StatusWaiting is the status `stratus status` shows for a running run
// one of whose steps waits for a human.
const StatusWaiting = runview.StatusWaiting

// StatusResult is what `stratus status --json` prints.
type StatusResult struct {
	RunID     string           `json:"run_id"`
	TaskID    string           `json:"task_id"`
	Title     string           `json:"task_title"`
	Flow      string           `json:"flow"`
	Status    string           `json:"status"`
	Target    string           `json:"target"`
	Execution *ExecutionStatus `json:"execution,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	EndedAt   time.Time        `json:"ended_at,omitzero"`
	// DurationMS is how long the run has run, in ms: the sum of its
	// active spans (its start and each resume, to its stop; to now while
	// it runs), the idle time before a resume left out.
	DurationMS int64 `json:"duration_ms"`
	Resumes    int   `json:"resumes,omitempty"`
	// CostUSD is what the run's attempts cost, as `runs --json` gives it:
	// null when unknown (no attempt reported a cost and some used a
	// provider: lifecycle.Spend.CostKnown), never a 0 that reads as free;
	// with UnpricedAttempts > 0 beside a figure, a lower bound. Tokens is
	// prompt + completion over every attempt.
	CostUSD          *float64 `json:"cost_usd"`
	Tokens           int64    `json:"tokens"`
	UnpricedAttempts int      `json:"unpriced_attempts,omitempty"`
	// PrunedAt is when retention removed the run's steps and files
	// (docs/security.md § Retention): Steps is then empty.
	PrunedAt time.Time `json:"pruned_at,omitzero"`
	// Publication is the run's pushed branch and pull request, once its
	// publish step pushed (docs/architecture.md § Publishing).
	Publication *stratus.Publication `json:"publication,omitempty"`
	Steps       []StepStatus         `json:"steps"`
	// StepsEarlier counts the run's steps before Steps, which are its
	// newest (runview.PageSteps) unless --all: 0 when Steps are all.
	StepsEarlier int `json:"steps_earlier,omitempty"`
	// Summary lists the run's summary files (paths, or s3:// URLs);
	// empty until it has one.
	Summary []string `json:"summary"`
	// Queued is the pool's task that RUN named when that task is queued
	// and no run yet (README.md § Task pool): RunID and Steps are then
	// empty, Status is its state (pending, claimed, running) and
	// Queued.Waits why it waits.
	Queued *taskpool.Listed `json:"queued,omitempty"`
	// Note says the run reads interrupted (its owner is gone) though that
	// could not be recorded (a full disk): the next status records it
	// (docs/security.md § Output that did not persist).
	Note string `json:"note,omitempty"`
}

// ExecutionStatus is a run's execution as Step Functions reports it.
type ExecutionStatus struct {
	ARN    string `json:"arn"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Cause  string `json:"cause,omitempty"`
}

// StepStatus is one step of StatusResult.
type StepStatus struct {
	StepRef    string `json:"step_ref"`
	Node       string `json:"node"` // a supervisor turn: its job
	Kind       string `json:"kind"`
	Status     string `json:"status"`
	Verdict    string `json:"verdict,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	// ElapsedMS is a running attempt's time so far, in ms (its
	// DurationMS is known once it ends).
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
	// StartMS is the attempt's dispatch to its engine's start, in ms: on
	// AWS a cold Fargate task's start-up, or a pooled runner's pickup
	// (README.md § Warm runners (pool mode)); 0 until the engine started (and
	// for steps no engine runs).
	StartMS          int64 `json:"start_ms,omitempty"`
	PromptTokens     int64 `json:"prompt_tokens,omitempty"`
	CompletionTokens int64 `json:"completion_tokens,omitempty"`
	// CostUSD is the cost the attempt reported (0 included); absent when
	// it reported none, which is unknown, not free (the run's
	// unpriced_attempts counts it when it used tokens).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Class and RetryAt are the latest attempt's failure class and the
	// reset its failure named (internal/failclass), when it failed.
	Class   string    `json:"class,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Attempts are the step's attempts, the first first, each with how it
	// ended; absent for a step no worker ran.
	Attempts []AttemptStatus `json:"attempts,omitempty"`
}

// AttemptStatus is one attempt of a StepStatus.
type AttemptStatus struct {
	Attempt  int    `json:"attempt"`
	Status   string `json:"status"`             // running, submitted, failed
	Terminal string `json:"terminal,omitempty"` // docs/contracts.md § Terminal classification, as the runner reported it
	// Class is a failed attempt's failure class (internal/failclass:
	// provider_unavailable, rate_limited, network_unavailable, timeout,
	// quality, infrastructure); RetryAt the reset its failure named.
	Class    string    `json:"class,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	Provider string    `json:"provider,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// DurationMS is the attempt's dispatch to its end, in ms (0 while it
	// runs).
	DurationMS int64 `json:"duration_ms,omitempty"`
}

func runStatus(o *StatusOptions) error {
	ctx := awsContext()
	id, err := resolveRunArg(ctx, o.Target, o.Dir, &o.AWS, o.RunID)
	// No such run (a ref resolved through no store is taken as typed): a
	// task of the pool still queued is shown as such.
	if stratus.ErrorCode(err) == stratus.ENOTFOUND || err == nil && lifecycle.CheckRunID(id) != nil {
		if l, ok := queuedTask(ctx, o); ok {
			return printQueuedStatus(o, l)
		}
	}
	if err != nil {
		return usageOr(err)
	}
	o.RunID = id
	var d *progress.Display
	if o.Follow {
		d = newDisplay(o.IO, o.JSON)
		err := followRun(ctx, o, d)
		d.Close()
		if err != nil {
			return err
		}
	}
	var (
		v   *runview.View
		res StatusResult
	)
	if o.Target == TargetAWS {
		v, res, err = awsStatus(ctx, o)
	} else {
		v, res, err = embeddedStatus(ctx, o)
	}
	if err != nil {
		return usageOr(err)
	}
	res.RunID, res.TaskID, res.Title, res.Flow, res.Status = v.Run.ID, v.Run.TaskID, v.Run.TaskTitle, v.Run.Flow, v.Run.Status
	res.CreatedAt, res.EndedAt, res.PrunedAt, res.Steps = v.Run.CreatedAt, v.Run.EndedAt, v.Run.PrunedAt, []StepStatus{}
	now := time.Now()
	res.DurationMS, res.Resumes = v.Run.Duration(now).Milliseconds(), v.Run.Resumes
	res.Publication = v.Run.Publication
	if res.Status == stratus.RunRunning && v.Waiting() {
		res.Status = StatusWaiting
	}
	res.StepsEarlier = v.Earlier()
	if res.Summary == nil {
		res.Summary = []string{}
	}
	for _, s := range v.Steps {
		res.Steps = append(res.Steps, stepStatus(s, now))
	}
	switch {
	case o.JSON && o.Follow: // the last of the JSON lines
		d.RunEnded(res)
		return runExit(res.Status)
	case o.JSON:
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printStatus(o.IO, res)
	if o.Follow {
		return runExit(res.Status)
	}
	return nil
}

// queuedTask is the task of id o.RunID in the pool of o's work dir, or
// with --target aws of the stack, that is queued (taskpool.Listed.Queued)
// or was refused before it ever ran (failed, without a run); false when
// there is none, or the pool cannot be read (status then says there is no
// such run).
func queuedTask(ctx context.Context, o *StatusOptions) (taskpool.Listed, bool) {
	var (
		l   []taskpool.Listed
		err error
	)
	if o.Target == TargetAWS {
		var list poolLister
		if _, list, err = o.AWS.openPool(ctx, ""); err == nil {
			l, err = list(ctx)
		}
	} else {
		var runs taskpool.Runs
		if st, oerr := openRuns(o.Dir); oerr == nil {
			defer st.Close()
			runs = st
		}
		if dir, aerr := filepath.Abs(o.Dir); aerr != nil {
			err = aerr
		} else if _, serr := os.Stat(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile)); serr != nil {
			err = serr
		} else {
			l, err = listPool(ctx, dir, "", runs)
		}
	}
	if err != nil {
		return taskpool.Listed{}, false
	}
	for _, t := range l {
		if t.ID == o.RunID && (t.Queued() || t.State == taskpool.Failed && t.RunID == "") {
			return t, true
		}
	}
	return taskpool.Listed{}, false
}

// printQueuedStatus is status of queued task l: its state and why it
// waits, as JSON (StatusResult with Queued) or for a reader. --follow
// follows runs: a task not yet a run is refused (exit 2).
func printQueuedStatus(o *StatusOptions, l taskpool.Listed) error {
	if o.Follow && l.Queued() {
		return usageError{fmt.Errorf("%s is a task of the pool, %s, not a run yet: status --follow follows a run; try again once it runs (stratus runs lists it then)", safetext.Line(l.ID), l.State)}
	} else if o.Follow {
		return usageError{fmt.Errorf("%s is a task the pool refused (%s), never a run: nothing to follow", safetext.Line(l.ID), l.State)}
	}
	target := TargetEmbedded
	if o.Target == TargetAWS {
		target = TargetAWS
	}
	res := StatusResult{TaskID: l.ID, Title: l.Title, Status: l.State, Target: target, Queued: &l, Steps: []StepStatus{}, Summary: []string{}}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	s := safetext.Line
	if !l.Queued() {
		fmt.Fprintf(o.IO.Out, "task %s: %s, refused by the task pool before it ran; why: %s beside %s in %s/\n", s(l.ID), l.State,
			taskpool.RefusedSummary(l.File), s(l.File), taskpool.Failed)
		return nil
	}
	fmt.Fprintf(o.IO.Out, "task %s: %s, queued, not a run yet\n", s(l.ID), l.State)
	if l.Title != "" {
		fmt.Fprintf(o.IO.Out, "  title:    %s\n", s(l.Title))
	}
	fmt.Fprintf(o.IO.Out, "  queue:    %s, priority %s\n", s(l.Queue), l.Priority)
	if w := waitText(l); w != "" {
		fmt.Fprintf(o.IO.Out, "  waits on: %s\n", s(w))
	}
	if l.RunID != "" {
		fmt.Fprintf(o.IO.Out, "  run:      %s\n", s(l.RunID))
	}
	fmt.Fprintf(o.IO.Out, "  file:     %s\n", s(l.File))
	return nil
}

// classText is " class=C" and " retry_at=T" (RFC 3339) for a failed
// attempt's class and reset, "" for none.
func classText(class string, retryAt time.Time) string {
	t := ""
	if class != "" {
		t += " class=" + class
	}
	if !retryAt.IsZero() {
		t += " retry_at=" + retryAt.UTC().Format(time.RFC3339)
	}
	return t
}

// runExit is the exit status `run` gives a run that ended with status.
func runExit(status string) error {
	switch status {
	case stratus.RunDone:
		return nil
	case stratus.RunManualActionRequired:
		return &exitError{code: ExitManual}
	case stratus.RunInterrupted:
		return &exitError{code: ExitInterrupted}
	default:
		return &exitError{code: ExitFailed}
	}
}

// FollowPoll is how often `status --follow` reads an embedded run's records.
var FollowPoll = 300 * time.Millisecond

// followRun streams the run's progress lines to stderr until it ends: an
// embedded run from its records (its owner's death counts as its end:
// lifecycle.Reconcile), a run on AWS as `run --target aws` follows it.
func followRun(ctx context.Context, o *StatusOptions, d *progress.Display) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.Target == TargetAWS {
		return followAWS(ctx, o, d)
	}
	st, err := openRuns(o.Dir)
	if err != nil {
		return usageOr(err)
	}
	defer st.Close()
	if _, err := st.GetRun(ctx, o.RunID); err != nil {
		return usageOr(err)
	}
	tr := runview.NewTracker(st, o.RunID)
	tr.ReplyFlags = orchestrator.DirFlag(o.Dir)
	for {
		run, err := st.GetRun(ctx, o.RunID)
		if err == nil {
			// Not recorded (a full disk): the run has ended all the same.
			if run, err = lifecycle.Reconcile(ctx, st, run); errors.Is(err, lifecycle.ErrNotRecorded) {
				err = nil
			}
		}
		if err != nil {
			return followStopped(o, d, err)
		}
		evs, err := tr.Poll(ctx)
		if err != nil {
			return followStopped(o, d, err)
		}
		for _, e := range evs {
			d.Event(e)
		}
		if stratus.RunTerminal(run.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return followStopped(o, d, ctx.Err())
		case <-time.After(FollowPoll):
		}
	}
}

// followStopped is the exit of a follow that ended before the run: Ctrl-C
// stops following (the run goes on), anything else is the error.
func followStopped(o *StatusOptions, d *progress.Display, err error) error {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(d, "stratus: stopped following run %s; it goes on\n", o.RunID)
		return &exitError{code: ExitInterrupted}
	}
	return err
}

func embeddedStatus(ctx context.Context, o *StatusOptions) (*runview.View, StatusResult, error) {
	res := StatusResult{Target: TargetEmbedded}
	st, err := openRuns(o.Dir)
	if err != nil {
		return nil, res, err
	}
	defer st.Close()
	// A run recorded running whose process is gone was interrupted: say
	// so, and record it (internal/lifecycle,
	// docs/architecture.md § The run lifecycle) — said even when the disk is
	// too full to record it (docs/security.md § Output that did not persist).
	v, err := runview.LoadReconciled(ctx, st, o.RunID, o.page())
	if err != nil {
		return nil, res, err
	}
	if err := res.readSpend(ctx, st, o.RunID); err != nil {
		return nil, res, err
	}
	if v.NotRecorded != nil {
		res.Note = runview.NotRecordedNote(v.NotRecorded)
	}
	// The run's own summary: a later run of the task moved it into
	// .stratus/logs/<task>/attempt-N/ (report.RunDir).
	sk := fs.New(v.Run.WorkDir).Private(orchestrator.StateDir)
	if dir, err := report.RunDir(ctx, sk, v.Run.TaskID, v.Run.ID); err == nil {
		for _, name := range []string{"summary.json", "summary.md"} {
			p := filepath.Join(v.Run.WorkDir, filepath.FromSlash(dir), name)
			if _, err := os.Stat(p); err == nil {
				res.Summary = append(res.Summary, p)
			}
		}
	}
	return v, res, nil
}

// readSpend sets r's cost and tokens from every attempt of run runID
// (lifecycle.RunSpend), as `runs` reads them.
func (r *StatusResult) readSpend(ctx context.Context, st store.Store, runID string) error {
	sp, err := lifecycle.RunSpend(ctx, st, runID)
	if err != nil {
		return err
	}
	r.CostUSD, r.Tokens, r.UnpricedAttempts = sp.Cost(), sp.Tokens, sp.Unpriced
	return nil
}

// openRuns opens the store of the embedded runs made in work dir dir.
// Errors: ENOTFOUND (field "dir") when no run was ever made there.
func openRuns(dir string) (*sqlite.Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	db := filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile)
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "dir", "no run was made in %s (no %s); give the work dir with --dir, or --target aws for a run on a stack", dir, db)
	}
	return sqlite.Open(db)
}

// stepStatus is step s as status shows it at now.
func stepStatus(s runview.StepView, now time.Time) StepStatus {
	st := StepStatus{StepRef: s.Step.StepRef, Node: s.Step.Node, Kind: s.Step.Kind, Status: s.Step.Status, Verdict: s.Outcome, Reason: s.Reason}
	if s.Job != "" {
		st.Node = s.Job
	}
	// A gate that waits says what it asks.
	var hv worker.HITLValue
	if s.Step.Status == worker.StepWaiting && st.Reason == "" && json.Unmarshal(s.Step.Value, &hv) == nil && hv.Request != "" {
		st.Reason = hv.Signal + ": " + oneLineText(hv.Request, 300)
	}
	// The step's duration as the viewer's step table and timeline show it
	// (runview.StepView.Span: its latest attempt's, else its own span).
	// A step not ended (running, or waiting for a human or its retry)
	// has its time so far, never a duration of 0.
	start, end := s.Span()
	switch {
	case !end.IsZero():
		st.DurationMS = max(end.Sub(start), 0).Milliseconds()
	case !start.IsZero() && !s.Ended():
		st.ElapsedMS = max(now.Sub(start).Milliseconds(), 1)
	}
	if a := s.Attempt; a != nil {
		st.Attempt, st.PromptTokens, st.CompletionTokens = a.N, a.PromptTokens, a.CompletionTokens
		if !a.EngineStartedAt.IsZero() && !a.StartedAt.IsZero() {
			st.StartMS = max(a.EngineStartedAt.Sub(a.StartedAt).Milliseconds(), 1)
		}
		st.CostUSD = a.CostUSD
		st.Class, st.RetryAt = a.Class, a.RetryAt
	}
	for _, a := range s.Attempts {
		as := AttemptStatus{Attempt: a.N, Status: a.Status, Terminal: a.Terminal, Class: a.Class, RetryAt: a.RetryAt,
			Provider: a.Resolved.Provider, Reason: oneLineText(a.Reason, 300)}
		if !a.EndedAt.IsZero() && !a.StartedAt.IsZero() {
			as.DurationMS = max(a.EndedAt.Sub(a.StartedAt).Milliseconds(), 0)
		}
		st.Attempts = append(st.Attempts, as)
	}
	return st
}

// printStatus writes r for a reader. Every text field passes through
// safetext: a step's reason and verdict, an execution's cause, even the
// task's title may hold what an engine wrote (docs/security.md § Text an
// engine wrote).
func printStatus(io IO, r StatusResult) {
	l := safetext.Line
	fmt.Fprintf(io.Out, "run %s: %s\n", l(r.RunID), l(r.Status))
	if r.Note != "" {
		fmt.Fprintf(io.Out, "  note:     %s\n", l(r.Note))
	}
	if !r.PrunedAt.IsZero() {
		fmt.Fprintf(io.Out, "  pruned:   %s: its steps and files were removed after retention_days (docs/security.md § Retention)\n", r.PrunedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(io.Out, "  task:     %s (%s) through flow %s\n", l(r.TaskID), l(r.Title), l(r.Flow))
	if x := r.Execution; x != nil {
		fmt.Fprintf(io.Out, "  execution: %s %s", l(x.ARN), l(x.Status))
		if x.Error != "" {
			fmt.Fprintf(io.Out, " (%s: %s)", l(x.Error), l(x.Cause))
		}
		fmt.Fprintln(io.Out)
	}
	fmt.Fprintf(io.Out, "  started:  %s", r.CreatedAt.Format(time.RFC3339))
	ran := english.Duration(time.Duration(r.DurationMS) * time.Millisecond)
	switch {
	case !r.EndedAt.IsZero():
		fmt.Fprintf(io.Out, ", ended %s (ran %s)", r.EndedAt.Format(time.RFC3339), ran)
	default:
		fmt.Fprintf(io.Out, " (running %s)", ran)
	}
	fmt.Fprintln(io.Out)
	if r.PrunedAt.IsZero() { // a pruned run's spend went with its steps
		sp := lifecycle.Spend{Tokens: r.Tokens, Unpriced: r.UnpricedAttempts}
		if r.CostUSD != nil {
			sp.CostUSD = *r.CostUSD
		}
		fmt.Fprintf(io.Out, "  cost:     %s, %s\n", sp.CostText(), english.Plural(int(r.Tokens), "token"))
	}
	if p := r.Publication; p != nil {
		fmt.Fprintf(io.Out, "  branch:   %s pushed to %s (%s)\n", l(p.Branch), l(p.Remote), l(p.URL))
		if pr := p.PullRequest; pr != nil {
			fmt.Fprintf(io.Out, "  pull request: #%d %s (%s)\n", pr.Number, l(pr.URL), l(pr.State))
		}
		if p.Note != "" {
			fmt.Fprintf(io.Out, "  publish:  %s\n", l(p.Note))
		}
	}
	if r.Resumes > 0 {
		fmt.Fprintf(io.Out, "  resumed:  %s; its time is the sum of its active spans (start and each resume to its stop), the idle time before a resume not counted\n", english.Plural(r.Resumes, "time"))
	}
	fmt.Fprintf(io.Out, "  steps:\n")
	if len(r.Steps) == 0 && r.PrunedAt.IsZero() {
		fmt.Fprintf(io.Out, "    (none yet)\n")
	} else if len(r.Steps) == 0 {
		fmt.Fprintf(io.Out, "    (pruned)\n")
	}
	if r.StepsEarlier > 0 {
		fmt.Fprintf(io.Out, "    … %s not shown (--all shows every step)\n", english.Plural(r.StepsEarlier, "earlier step"))
	}
	for _, s := range r.Steps {
		verdict := s.Verdict
		if verdict == "" {
			verdict = s.Status
		}
		line := fmt.Sprintf("    %-16s %-14s %-10s", l(s.StepRef), l(s.Node), l(verdict))
		took := "duration=" + english.Duration(time.Duration(s.DurationMS)*time.Millisecond)
		if s.ElapsedMS > 0 {
			took = "for " + english.Duration(time.Duration(s.ElapsedMS)*time.Millisecond) // waiting
			if s.Status == stratus.StepRunning {
				took = "running " + english.Duration(time.Duration(s.ElapsedMS)*time.Millisecond)
			}
		}
		switch {
		case s.Attempt > 0:
			line += fmt.Sprintf(" attempt=%d %s tokens=%d/%d", s.Attempt, took, s.PromptTokens, s.CompletionTokens)
		case s.DurationMS > 0 || s.ElapsedMS > 0: // a step no worker ran (a hitl wait, a publish)
			line += " " + took
		}
		line += classText(s.Class, s.RetryAt)
		if s.Reason != "" && verdict != "done" && verdict != "accept" {
			line += " reason=" + safetext.Quote(s.Reason)
		}
		fmt.Fprintln(io.Out, line)
		if len(s.Attempts) > 1 {
			// Every attempt but the latest (the line above): how each
			// ended, and why.
			for _, a := range s.Attempts[:len(s.Attempts)-1] {
				al := fmt.Sprintf("      attempt %d: %s", a.Attempt, a.Status)
				if a.Provider != "" {
					al += " provider=" + a.Provider
				}
				al += classText(a.Class, a.RetryAt)
				if a.Reason != "" {
					al += fmt.Sprintf(" reason=%q", a.Reason)
				}
				fmt.Fprintln(io.Out, al)
			}
		}
	}
	if len(r.Summary) == 0 {
		fmt.Fprintf(io.Out, "  summary:  none yet\n")
	}
	for _, s := range r.Summary {
		fmt.Fprintf(io.Out, "  summary:  %s\n", l(s))
	}
}
