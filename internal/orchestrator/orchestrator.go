// Package orchestrator runs one task through its flow in embedded mode
// (docs/architecture.md § The two runtimes: the same compiled state machine
// runs on one machine with no AWS at all): it loads config, task and flow,
// validates and compiles the flow to ASL, and executes that ASL on the embedded
// executor, with the SQLite store, the file-system sink, local `stratus runner`
// processes for workers and the worker API served in process on 127.0.0.1.
//
// The Task states' sqs:sendMessage.waitForTaskToken resource maps to an
// in-process queue feeding worker.Service.Dispatch, the same dispatch code
// the AWS dispatch Lambda runs.
package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runcheck"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// Layout of DIR/.stratus/.
const (
	StateDir   = ".stratus"
	ConfigFile = "config.yaml"
	FlowsDir   = "flows"
	DBFile     = "stratus.db"
	KeyFile    = "hmac.key"
	ToolsDir   = "tools"
)

// Options configure one embedded run.
type Options struct {
	Dir      string // the work dir holding .stratus/ (absolute or relative)
	TaskPath string // the task file
	Self     string // the stratus binary workers run as; "" = os.Executable()
	// Progress gets the run's progress: a *progress.Display renders its
	// events its own way (ticking lines, JSON lines); any other writer
	// gets the lines (progress.Line); nil = discard.
	Progress io.Writer
	// RunID names the new run; "" = a fresh one (lifecycle.NewRunID). `stratus run
	// --detach` picks it before it starts the process that runs it.
	RunID string
	// NoPull: a run whose repository travelled (workspace: worktree) does
	// not bring its commits back as branch stratus/<task_id> at its end.
	NoPull bool
	// Shared, when set, is what the runs of one host process share: the work
	// dir's store and the engine slots. nil: the run has its own.
	Shared *Shared
	// Started, when set, is called once the run is recorded (its id in the
	// store), before its first step: a host answers its caller then.
	Started func(runID string)
}

// Shared is what the runs hosted by one process share (internal/host):
// one store for the work dir (one SQLite connection pool, not one per
// run), opened by the first run that gets under way, and one bound on the
// engines running at once.
type Shared struct {
	slots *launch.Slots
	db    string

	mu sync.Mutex
	st *sqlite.Store
}

// NewShared returns what the runs of work dir dir hosted by one process
// share, with engineSlots engine slots.
func NewShared(dir string, engineSlots int) *Shared {
	return &Shared{slots: launch.NewSlots(engineSlots), db: filepath.Join(dir, StateDir, DBFile)}
}

// store is the shared store, opened on first use: a work dir where no run
// got under way has none (`stratus runs` says so).
func (sh *Shared) store() (*sqlite.Store, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.st == nil {
		st, err := sqlite.Open(sh.db)
		if err != nil {
			return nil, err
		}
		sh.st = st
	}
	return sh.st, nil
}

// Close closes the shared store, once no hosted run uses it.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.st == nil {
		return nil
	}
	return sh.st.Close()
}

// Result is the outcome of a run: lifecycle.Result, its Summary and
// CtxDir as paths in the work dir.
type Result = lifecycle.Result

// Run executes one task file to a terminal. Errors are returned for what
// prevents the run from starting (missing config, bad task, invalid flow);
// a run that starts always ends in a Result. Interrupted (ctx cancelled),
// the run is recorded interrupted and the Result comes with ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, StateDir)
	cfg, err := config.Load(filepath.Join(state, ConfigFile))
	if err != nil {
		return nil, err
	}
	tk, err := task.Load(o.TaskPath)
	if err != nil {
		return nil, err
	}
	taskPath, _ := filepath.Abs(o.TaskPath)
	flowsDir := filepath.Join(state, FlowsDir)
	fl, err := flow.Load(flowsDir, tk.TaskType)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		// flow.Load's message names the flows there are.
		return nil, stratus.Errorf(stratus.ENOTFOUND, "task %s: %v", tk.ID, err)
	} else if err != nil {
		return nil, err
	}
	if err := runcheck.CheckRun(fl, flowsDir, filepath.Join(state, ToolsDir), cfg, tk, logging.Human(orDiscard(o.Progress), "stratus")); err != nil {
		return nil, err
	}
	if probs := append(runcheck.Preflight(fl, cfg, tk), LaunchPreflight(dir, fl, cfg, tk)...); len(probs) > 0 {
		var lines []string
		for _, p := range probs {
			lines = append(lines, p.String())
		}
		return nil, stratus.Errorf(stratus.EINVALID, "task %s cannot run through flow %s:\n  %s", tk.ID, fl.TaskType, strings.Join(lines, "\n  "))
	}
	runID := o.RunID
	if runID == "" {
		runID = lifecycle.NewRunID()
	} else if err := lifecycle.CheckRunID(runID); err != nil {
		return nil, err
	}
	s, err := open(dir, o)
	if err != nil {
		return nil, err
	}
	defer s.close()
	// A new run never takes an existing run's id: from here on the run
	// writes under its id (workspace, bundle, definition), and the ctx dir
	// of the task is archived, all before CreateRun would refuse the id.
	if _, err := s.st.GetRun(ctx, runID); err == nil {
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "run_id", "run %s already exists; a new run takes a fresh id", runID)
	} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return nil, err
	}
	// Before the task's lock is taken: the prune takes each task's lock in
	// turn (docs/security.md § Retention).
	autoPrune(ctx, dir, s.st, cfg.Retention(), s.log)
	// The repository travels as on AWS: engines work in checkouts of their
	// own, never in the operator's, and the ctx dir is in the state dir, out
	// of the repository's tree (README § Workspaces).
	mode, note := lifecycle.ResolveWorkspace(ctx, cfg, tk, dir)
	if note != "" {
		s.log.Info(note)
	}
	placement := cfg.Projection.Placement
	if mode == config.WorkspaceWorktree {
		placement = projection.StatePlacement
	}
	cd, err := projection.CtxDir(placement, tk.ID)
	if err != nil {
		return nil, err
	}
	if err := s.lock(tk.ID); err != nil {
		return nil, err
	}
	// Frozen first: a workspace refused (over its cap, a submodule) leaves
	// nothing behind.
	var ws *stratus.Workspace
	if mode == config.WorkspaceWorktree {
		fz, err := lifecycle.FreezeWorkspace(ctx, s.sk, worker.WorkspaceKeys(StateDir, runID), worker.WorkspaceRoot(runID), dir, cfg, tk.ID, placement)
		if err != nil {
			return nil, err
		}
		ws = fz.Workspace
		s.log.Info(fmt.Sprintf("workspace %s: %d files, %d bytes, bundle %d bytes, frozen in %d ms (base %s)",
			dir, fz.Files, fz.Bytes, fz.BundleBytes, fz.Took.Milliseconds(), fz.Workspace.Base[:12]))
	}
	if arch, err := prepareCtxDir(filepath.Join(dir, filepath.FromSlash(report.Dir(tk.ID))), s.sk.Path(cd), placement, tk.ID); err != nil {
		return nil, err
	} else if arch != "" {
		s.log.Info(fmt.Sprintf("the previous run's ctx dir and logs of task %s moved to %s", tk.ID, arch))
	}
	// From here on the run reads its flow, prompts, config and tools from a
	// snapshot taken now (worc WRI-010); the ctx dir and the work dir stay live.
	bundle, release, err := freezeRun(ctx, state, runID, dir, flowsDir, taskPath)
	if err != nil {
		return nil, err
	}
	s.defer_(release)
	s.env = bundle.Env
	// The run compiles its frozen copy once, and keeps the definition with
	// the bundle: a resume runs this machine, whatever the flow became.
	// CheckRun above already applied every rule the compiler enforces
	// (flow.StateNames mirrors its names).
	if s.def, err = compiler.Compile(s.env.Flow, lifecycle.CompileOptions(s.env.Config)); err != nil {
		return nil, err
	}
	if err := lifecycle.PutDefinition(ctx, fs.New(state).OwnerOnly(), runID, s.def); err != nil {
		return nil, err
	}
	s.run = stratus.Run{ID: runID, TaskID: tk.ID, TaskTitle: tk.Title, Flow: fl.TaskType, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, Owner: lifecycle.Owner(), CreatedAt: time.Now().UTC()}
	s.run.MaxCostUSD, s.run.MaxTokens = lifecycle.Caps(s.env.Config, s.env.Task)
	s.run.Workspace = ws
	if err := s.st.CreateRun(ctx, s.run); err != nil {
		return nil, err
	}
	// The task's logs dir is this run's from here on: marked, so that
	// readers of an earlier run find its own in attempt-N/ (report.RunDir).
	if err := report.MarkRun(ctx, s.sk, tk.ID, s.run.ID); err != nil {
		return s.stoppedEarly(ctx, err)
	}
	s.log.Info(fmt.Sprintf("run %s: task %s through flow %s", s.run.ID, tk.ID, fl.TaskType))
	if o.Started != nil {
		o.Started(s.run.ID)
	}
	input, _ := json.Marshal(map[string]string{"run_id": s.run.ID, "task_id": tk.ID})
	return s.execute(ctx, s.run.ID, input)
}

// ResumeOptions say which run to resume and how (README.md § Durable runs).
type ResumeOptions struct {
	Dir              string    // the work dir holding .stratus/
	RunID            string    // the run to resume
	Self             string    // the stratus binary workers run as; "" = os.Executable()
	Progress         io.Writer // as Options.Progress
	lifecycle.Resume           // where and with which caps (Owner is set here)
	Shared           *Shared   // as Options.Shared
	// Started, when set, is called once the resume is recorded, before
	// the run's next step: a host answers its caller then.
	Started func(runID string)
}

// Resume continues a run that ended failed, manual_action_required or
// interrupted (a run recorded running whose process is gone counts as
// interrupted: lifecycle.Reconcile) from the step that stopped it
// (lifecycle.PlanResume), in this process, on the definition and the
// frozen environment the run started with. Finished steps are not run
// again; their files, budget counters and costs stay, and the ctx dir is
// not archived. The new execution is named "<run_id>.resume-<n>".
//
// Errors: ENOTFOUND for an unknown run or one pruned (stratus.PrunedError,
// docs/security.md § Retention); EINVALID for a run that is done or
// still running, or whose task another run holds; PlanResume's
// (*lifecycle.BudgetSpentError included). A resume that starts always ends
// in a Result, as Run's.
func Resume(ctx context.Context, o ResumeOptions) (*Result, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, StateDir)
	if _, err := os.Stat(filepath.Join(state, DBFile)); err != nil {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "no runs in %s (no %s): resume a run under the --dir it ran in", dir, filepath.Join(state, DBFile))
	}
	s, err := open(dir, Options{Dir: o.Dir, Self: o.Self, Progress: o.Progress, Shared: o.Shared})
	if err != nil {
		return nil, err
	}
	defer s.close()
	run, err := s.st.GetRun(ctx, o.RunID)
	if err != nil {
		return nil, err
	}
	if err := s.lock(run.TaskID); err != nil {
		return nil, err
	}
	// Read again under the lock: a prune holds it while it removes a run.
	if run, err = s.st.GetRun(ctx, o.RunID); err != nil {
		return nil, err
	}
	if !run.PrunedAt.IsZero() {
		return nil, stratus.PrunedError(run, "resume it")
	}
	if run, err = lifecycle.Reconcile(ctx, s.st, run); err != nil {
		return nil, err
	}
	if !stratus.RunResumable(run.Status) {
		_, _, err := lifecycle.PrepareResume(ctx, s.st, run, nil, o.Resume)
		return nil, err // says why not, before the bundle is read
	}
	bundle, release, err := loadRun(ctx, state, run.ID)
	if err != nil {
		return nil, err
	}
	s.defer_(release)
	s.env = bundle.Env
	if s.def, err = lifecycle.GetDefinition(ctx, fs.New(state).OwnerOnly(), run.ID); err != nil {
		return nil, err
	}
	o.Owner = lifecycle.Owner()
	run, plan, err := lifecycle.PrepareResume(ctx, s.st, run, s.def, o.Resume)
	if err != nil {
		return nil, err
	}
	s.run = run // recorded running again: a full disk from here on ends it (stoppedEarly)
	// The task's logs and ctx dir are this run's again, not a later run's.
	placement := projection.RunPlacement(s.env.Config.Projection.Placement, run)
	cd, err := projection.CtxDir(placement, run.TaskID)
	if err != nil {
		return nil, err
	}
	moved, err := reclaimLogs(ctx, s.sk, filepath.Join(dir, filepath.FromSlash(report.Dir(run.TaskID))), s.sk.Path(cd), placement, run.TaskID, run.ID)
	if err != nil {
		return s.stoppedEarly(ctx, err)
	}
	if moved != "" {
		s.log.Info(moved)
	}
	if err := report.MarkRun(ctx, s.sk, run.TaskID, run.ID); err != nil {
		return s.stoppedEarly(ctx, err)
	}
	s.log.Info(fmt.Sprintf("resume run %s: %s", run.ID, plan.Describe()))
	if o.Started != nil {
		o.Started(run.ID)
	}
	return s.execute(ctx, lifecycle.ExecutionName(run.ID, run.Resumes), plan.Input)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
