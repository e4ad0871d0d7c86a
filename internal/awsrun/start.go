package awsrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
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
}

// Start starts one run of a task on the stack (issue 6 § Build 8). The task
// is checked as an embedded run checks it before anything is written
// (config, task and flow parsed; orchestrator.CheckRun and Preflight);
// then its environment is frozen to the bucket (runenv.Freeze: config,
// task, flows and tools, which the functions read), the run is recorded
// in the store (work dir and task path are this machine's: where its
// ctx files are addressed from) and an execution of the flow's state
// machine is started, named by the run id, with input {run_id, task_id}.
//
// Errors: the checks' (EINVALID, ENOTFOUND), StateMachineFor's, and the
// AWS errors of each write; a failed start leaves the run recorded
// failed.
func (t *Target) Start(ctx context.Context, o StartOptions) (*Started, error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, orchestrator.StateDir)
	cfg, err := config.Load(filepath.Join(state, orchestrator.ConfigFile))
	if err != nil {
		return nil, err
	}
	tk, err := task.Load(o.TaskPath)
	if err != nil {
		return nil, err
	}
	taskPath, _ := filepath.Abs(o.TaskPath)
	flowsDir := filepath.Join(state, orchestrator.FlowsDir)
	fl, err := flow.Load(flowsDir, tk.TaskType)
	if err != nil {
		return nil, err
	}
	if err := orchestrator.CheckRun(fl, flowsDir, filepath.Join(state, orchestrator.ToolsDir), cfg, tk, progress); err != nil {
		return nil, err
	}
	if probs := orchestrator.Preflight(fl, cfg, tk); len(probs) > 0 {
		var lines []string
		for _, p := range probs {
			lines = append(lines, p.String())
		}
		return nil, stratus.Errorf(stratus.EINVALID, "task %s cannot run through flow %s:\n  %s", tk.ID, fl.TaskType, strings.Join(lines, "\n  "))
	}
	sm, err := t.StateMachineFor(fl.TaskType)
	if err != nil {
		return nil, err
	}
	runID := o.RunID
	if runID == "" {
		runID = lifecycle.NewRunID()
	}
	if _, err := runenv.Freeze(ctx, t.Sink, runID, dir, flowsDir, taskPath, nil); err != nil {
		return nil, fmt.Errorf("freeze the run's environment to %s: %w", t.URL(runenv.BundlePrefix(runID)), err)
	}
	run := stratus.Run{ID: runID, TaskID: tk.ID, TaskTitle: tk.Title, Flow: fl.TaskType, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, CreatedAt: time.Now().UTC()}
	run.MaxCostUSD, run.MaxTokens = lifecycle.Caps(cfg, tk)
	if err := t.Store.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	input, _ := json.Marshal(map[string]string{"run_id": run.ID, "task_id": tk.ID})
	x, err := t.Exec.StartExecution(ctx, executor.StartInput{StateMachine: sm, Name: run.ID, Input: input})
	if err != nil {
		run.Status, run.EndedAt = stratus.RunFailed, time.Now().UTC()
		t.Store.UpdateRun(context.WithoutCancel(ctx), run)
		return nil, fmt.Errorf("start an execution of %s: %w", sm, err)
	}
	run.Execution = x.ARN
	if err := t.Store.UpdateRun(ctx, run); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "stratus: run %s: task %s through flow %s\n", run.ID, tk.ID, fl.TaskType)
	fmt.Fprintf(progress, "stratus: execution %s\n", x.ARN)
	env := &worker.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	if w := supervisor.NarrowingWarning(cfg.Supervisor, fl); w != "" {
		fmt.Fprintf(progress, "stratus: warning: %s\n", w)
	}
	return &Started{Run: run, Env: env}, nil
}
