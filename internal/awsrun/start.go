package awsrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awspool"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runcheck"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// StartOptions say what to run.
type StartOptions struct {
	Dir      string    // the work dir holding .stratus/ (config, flows, tools)
	TaskPath string    // the task file
	Progress io.Writer // warnings and the run line; nil = discard
	// RunID names the run and its execution; "" = a new one
	// (r-<UTC time>-<6 hex>, as an embedded run's).
	RunID string
}

// Started is a run whose execution was started.
type Started struct {
	Run stratus.Run
	Env *worker.RunEnv // the run's environment as read here (what was frozen)
	// Before lists the tids of the steps a resumed run had before its new
	// execution started (FollowOptions.Skip).
	Before []string
}

// Start starts one run of a task on the stack. The task is checked as an
// embedded run checks it before anything is written (config, task and flow
// parsed; runcheck.CheckRun and Preflight), and so is the task's lock (a
// run of the task that has not ended refuses this one); then its environment
// is frozen to the bucket (runenv.Freeze: config, task, flows and tools,
// which the functions read), the run is recorded in the store holding the
// task's lock (work dir and task path are this machine's: where its ctx files
// are addressed from; its execution is named already) and an execution of the
// flow's state machine is started, named by the run id, with input {run_id,
// task_id}. The run's work-dir files — ctx dir, logs, summary — are its own,
// under runs/<run_id>/ in the bucket (sink.ForRun); the task's logs dir in
// the bucket names its latest run (report.MarkRun).
//
// Errors: the checks' (EINVALID, ENOTFOUND), StateMachineFor's, EINVALID
// when another run of the task holds its lock (lockedError), and the AWS
// errors of each write; a failed start leaves the run recorded failed,
// its lock released.
func (t *Target) Start(ctx context.Context, o StartOptions) (*Started, error) {
	log := logging.Human(progressOf(o.Progress), "stratus")
	pr, env, err := t.prepare(ctx, o, log)
	if err != nil {
		return nil, err
	}
	var run stratus.Run
	err = t.withLock(ctx, func() error {
		if testBeforeCreateRun != nil {
			testBeforeCreateRun(ctx, pr.Run)
		}
		run, err = awspool.Launch(ctx, t.ports(), *pr)
		return err
	})
	if err != nil && run.ID == "" {
		// A start that lost the lock to another begun at the same moment
		// (checkLock let both through) leaves nothing of its own behind:
		// it was never recorded, so its frozen files are removed.
		runenv.RemoveRun(context.WithoutCancel(ctx), t.Sink, pr.Run.ID)
		return nil, err
	} else if err != nil {
		return nil, err
	}
	log.Info(fmt.Sprintf("run %s: task %s through flow %s", run.ID, run.TaskID, run.Flow))
	log.Info("execution " + run.Execution)
	if w := supervisor.NarrowingWarning(env.Config.Supervisor, env.Flow); w != "" {
		log.Warn(w)
	}
	return &Started{Run: run, Env: env}, nil
}

// Submit queues tasks in the stack's task pool (README.md § Task pool):
// each run is prepared as Start prepares it (checked, compiled, its
// environment, definition and workspace frozen, and its state machine
// created here, with the operator's rights) — all of them before any is
// queued: one that does not check queues none — then recorded as prepared
// and its file written under tasks/pending/ in the bucket
// (awspool.Pool.Submit), and the claim is woken once (a message to the
// stack's claim queue). Nothing runs on this machine: the claim function
// starts each run when the pool's rules let it. It returns the prepared
// runs, in the order of tasks; on an error, those queued before it.
// Errors: EINVALID when the stack has no task pool (no ClaimQueueUrl
// output), Start's checks', awspool.Pool.Submit's (a task queued
// already), the AWS errors.
func (t *Target) Submit(ctx context.Context, dir string, tasks []string, progress io.Writer) ([]*awspool.Prepared, error) {
	if t.ClaimQueueURL == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "stack", "the stack has no task pool (no %s output): update it with this version's template.yaml", OutputClaimQueueURL)
	}
	log := logging.Human(progressOf(progress), "stratus")
	pool := t.Pool()
	if err := pool.CheckSubmit(ctx, tasks); err != nil {
		return nil, err
	}
	var prepared []*awspool.Prepared
	var bodies [][]byte
	drop := func(from int) {
		for _, pr := range prepared[from:] {
			runenv.RemoveRun(context.WithoutCancel(ctx), t.Sink, pr.Run.ID)
		}
	}
	for _, path := range tasks {
		pr, _, err := t.prepare(ctx, StartOptions{Dir: dir, TaskPath: path}, log)
		if err == nil && t.OwnMachines() {
			if err = t.Exec.Deploy(ctx, pr.StateMachine, pr.Definition); err != nil {
				runenv.RemoveRun(context.WithoutCancel(ctx), t.Sink, pr.Run.ID)
			}
		}
		var body []byte
		if err == nil {
			if body, err = os.ReadFile(path); err != nil {
				runenv.RemoveRun(context.WithoutCancel(ctx), t.Sink, pr.Run.ID)
			}
		}
		if err != nil {
			drop(0)
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pr.File = filepath.Base(path)
		prepared, bodies = append(prepared, pr), append(bodies, body)
	}
	for i, pr := range prepared {
		if err := pool.Submit(ctx, *pr, bodies[i]); err != nil {
			drop(i)
			return prepared[:i], fmt.Errorf("%s: %w", tasks[i], err)
		}
	}
	if err := t.Wake(ctx, fmt.Sprintf("%d task(s) submitted", len(prepared))); err != nil {
		log.Warn(fmt.Sprintf("the claim was not woken (%v): the tasks wait for its schedule, at most 5 minutes", err))
	}
	return prepared, nil
}

// prepare is Start up to the run's record: the task checked as an
// embedded run checks it, compiled, the task's lock checked, and its
// environment, definition and workspace frozen to the bucket under the
// run's id.
func (t *Target) prepare(ctx context.Context, o StartOptions, log *slog.Logger) (*awspool.Prepared, *worker.RunEnv, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, nil, err
	}
	state := filepath.Join(dir, orchestrator.StateDir)
	cfg, err := config.Load(filepath.Join(state, orchestrator.ConfigFile))
	if err != nil {
		return nil, nil, err
	}
	tk, err := task.Load(o.TaskPath)
	if err != nil {
		return nil, nil, err
	}
	taskPath, _ := filepath.Abs(o.TaskPath)
	flowsDir := filepath.Join(state, orchestrator.FlowsDir)
	fl, err := flow.Load(flowsDir, tk.TaskType)
	if err != nil {
		return nil, nil, err
	}
	if err := runcheck.Task(fl, flowsDir, filepath.Join(state, orchestrator.ToolsDir), cfg, tk, log); err != nil {
		return nil, nil, err
	}
	// The run is compiled once, with the config, here: what runs is what
	// was validated (docs/architecture.md § The run lifecycle).
	def, err := compiler.Compile(fl, t.compileOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	sm, err := t.RunStateMachine(fl.TaskType, def)
	if err != nil {
		return nil, nil, err
	}
	if !t.OwnMachines() {
		log.Warn(fmt.Sprintf("%s runs the deployed state machine %s, not this run's compiled flow: the stack predates per-run state machines (outputs %s, %s, %s), or --state-machine was given",
			fl.TaskType, sm, OutputQueueURL, OutputStateMachineRole, OutputStateMachinePrefix))
	}
	runID := o.RunID
	if runID == "" {
		runID = lifecycle.NewRunID()
	}
	// Before anything is frozen: a refused run leaves nothing behind. The
	// lock is taken with the run's record, by Launch.
	if err := t.withLock(ctx, func() error { return t.checkLock(ctx, tk.ID, runID) }); err != nil {
		return nil, nil, err
	}
	arn, err := executor.ExecutionARN(sm, runID)
	if err != nil {
		return nil, nil, err
	}
	if _, err := runenv.Freeze(ctx, t.Sink, runID, dir, flowsDir, taskPath, nil); err != nil {
		return nil, nil, fmt.Errorf("freeze the run's environment to %s: %w", t.URL(runenv.BundlePrefix(runID)), err)
	}
	if err := lifecycle.PutDefinition(ctx, t.Sink, runID, def); err != nil {
		return nil, nil, err
	}
	// A worker on AWS has no disk of the operator's: the work dir travels
	// with the run as its base snapshot.
	fz, err := lifecycle.FreezeWorkspace(ctx, t.Sink, worker.WorkspaceKeys("", runID), worker.WorkspaceRoot(runID), dir, cfg, tk.ID, cfg.Projection.Placement)
	if err != nil {
		return nil, nil, err
	}
	log.Info(fmt.Sprintf("workspace %s: %d files, %d bytes, bundle %d bytes, frozen in %d ms (base %s)",
		dir, fz.Files, fz.Bytes, fz.BundleBytes, fz.Took.Milliseconds(), fz.Workspace.Base[:12]))
	run := stratus.Run{ID: runID, TaskID: tk.ID, TaskTitle: tk.Title, Flow: fl.TaskType, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, Workspace: fz.Workspace, Execution: arn}
	run.MaxCostUSD, run.MaxTokens = lifecycle.Caps(cfg, tk)
	env := &worker.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	return &awspool.Prepared{Run: run, StateMachine: sm, Definition: def}, env, nil
}

// progressOf is w, or io.Discard for nil.
func progressOf(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ResumeOptions say which run to resume and how.
type ResumeOptions struct {
	RunID    string
	Progress io.Writer // the resume line and warnings; nil = discard
	lifecycle.Resume
}

// Resume continues a run of the stack that ended failed,
// manual_action_required or interrupted from the step that stopped it
// (lifecycle.PrepareResume, as an embedded resume does): a new execution
// named "<run_id>.resume-<n>" of the run's own compiled definition (kept
// with its bundle; the same state machine as its first execution when the
// stack creates them per run) enters that step's state through the resume
// entry with the input recorded for it. The one write that makes the run
// running again names that execution (its ARN is known before it starts)
// and takes the task's lock, before the execution starts: the end of the
// run's previous execution, delivered late to the events function, is
// then not the resumed run's, and a run of the task that took the lock
// meanwhile refuses the resume. A run still recorded running whose
// execution has ended is finished first (Finish), as the events function
// would have. Follow it as a started run.
//
// Errors: ENOTFOUND for an unknown run; PrepareResume's; EINVALID when
// another run of the task holds its lock (the run is left as it was); the
// AWS errors.
func (t *Target) Resume(ctx context.Context, o ResumeOptions) (*Started, error) {
	log := logging.Human(progressOf(o.Progress), "stratus")
	run, err := t.Store.GetRun(ctx, o.RunID)
	if err != nil {
		return nil, err
	}
	if !stratus.RunTerminal(run.Status) && run.Execution != "" {
		x, err := t.Exec.DescribeExecution(ctx, run.Execution)
		if err != nil {
			return nil, err
		}
		if x.Done() {
			res, err := t.Finish(ctx, run, nil, x)
			if err != nil {
				return nil, err
			}
			run = res.Run
		}
	}
	if !stratus.RunResumable(run.Status) {
		_, _, err := lifecycle.PrepareResume(ctx, t.Store, run, nil, o.Resume)
		return nil, err
	}
	env, err := runenv.Load(ctx, t.Sink, run.ID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		// The bucket's retention rule removed the run's files
		// (docs/security.md § Retention).
		return nil, lifecycle.FilesGone(run, runenv.BundlePrefix(run.ID)+runenv.ManifestFile, "resume it")
	} else if err != nil {
		return nil, err
	}
	def, err := lifecycle.GetDefinition(ctx, t.Sink, run.ID)
	if err != nil {
		return nil, err
	}
	sm, err := t.RunStateMachine(run.Flow, def)
	if err != nil {
		return nil, err
	}
	steps, err := t.Store.ListSteps(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	var before []string
	for _, s := range steps {
		before = append(before, s.TID)
	}
	if err := t.withLock(ctx, func() error { return t.checkLock(ctx, run.TaskID, run.ID) }); err != nil {
		return nil, err
	}
	name := lifecycle.ExecutionName(run.ID, run.Resumes+1) // PrepareResume counts this resume
	o.Owner = ""
	if o.Execution, err = executor.ExecutionARN(sm, name); err != nil {
		return nil, err
	}
	prev := run
	var plan *lifecycle.ResumePoint
	err = t.withLock(ctx, func() error {
		var err error
		run, plan, err = lifecycle.PrepareResume(ctx, lockingStore{t.Store}, prev, def, o.Resume)
		return err
	})
	if err != nil {
		return nil, err
	}
	log.Info(fmt.Sprintf("resume run %s: %s", run.ID, plan.Describe()))
	x, err := t.Exec.StartExecution(ctx, executor.StartInput{StateMachine: sm, Definition: def, Name: name, Input: plan.Input})
	if err != nil {
		return nil, awspool.FailStart(ctx, t.Store, &run, fmt.Errorf("start an execution of %s: %w", sm, err))
	}
	if err := awspool.Renamed(ctx, t.Store, &run, x); err != nil {
		return nil, err
	}
	log.Info("execution " + x.ARN)
	return &Started{Run: run, Env: env, Before: before}, nil
}

// compileOptions are the options a run on the stack is compiled with:
// config.yaml's (lifecycle.CompileOptions) and the stack's heartbeat
// window (its HeartbeatSeconds output; 0: the compiler's default).
func (t *Target) compileOptions(cfg *config.Config) compiler.Options {
	opts := lifecycle.CompileOptions(cfg)
	opts.HeartbeatSeconds = t.HeartbeatSeconds
	return opts
}

// testBeforeCreateRun, set by tests only, runs just before a start records
// its run: where another start can take the task's lock first.
var testBeforeCreateRun func(ctx context.Context, run stratus.Run)
