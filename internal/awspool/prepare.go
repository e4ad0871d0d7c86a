package awspool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/runcheck"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/taskpool"
	"github.com/stratusflow/stratus/internal/worker"
)

// EnvKey is the sink key of the pool's environment: the run the latest
// `stratus submit` prepared, whose config, flows, tools, engine files and
// workspace snapshot a task file written straight under tasks/pending/
// runs with.
const EnvKey = "pool/env.json"

// Machines is what the claim needs to prepare a run itself (a task file
// no `stratus submit` prepared): where the stack's state machines are and
// how runs are compiled for it. The zero value prepares nothing.
type Machines struct {
	RoleARN          string // the state machines' execution role (template.yaml StateMachineRole)
	Prefix           string // their name prefix ("<stack>-")
	Region           string
	HeartbeatSeconds int // the stack's HeartbeatSeconds (0 = the compiler's default)
	// Deploy creates or updates the state machine at an ARN with a
	// definition (sfn.Executor.Deploy).
	Deploy func(ctx context.Context, arn string, def []byte) error
}

func (m Machines) ok() bool { return m.RoleARN != "" && m.Prefix != "" && m.Deploy != nil }

// prepare prepares a run for pending task e, whose file (body) no `stratus
// submit` prepared, from the pool's environment (EnvKey): the same
// config, flows, tools and engine files (runenv.Derive), the same
// workspace snapshot (lifecycle.ReuseWorkspace), checked (runcheck.Task)
// and compiled as `stratus run --target aws` does, its state machine
// deployed. It returns why the task can never run as written ("" when
// prepared): the pool has no environment, the claim cannot create state
// machines, the task or its flow does not check; what it froze is then
// removed.
func (p *Pool) prepare(ctx context.Context, e taskpool.Entry, body []byte) (Prepared, string, error) {
	var ref Prepared
	raw, err := p.Sink.Get(ctx, EnvKey)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return ref, fmt.Sprintf("no run was prepared for task %s, and the pool has no environment to prepare one with: queue a task with `stratus submit TASK.md --target aws` once (it freezes the work dir, config and flows that task files written under %s/%s/ then run with)", e.ID(), TasksDir, taskpool.Pending), nil
	} else if err != nil {
		return ref, "", err
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return ref, "", fmt.Errorf("%s: %w", EnvKey, err)
	}
	if !p.Machines.ok() {
		return ref, fmt.Sprintf("no run was prepared for task %s, and this claim cannot create state machines: queue it with `stratus submit TASK.md --target aws`", e.ID()), nil
	}
	runID := lifecycle.NewRunID()
	pr, why, err := p.derive(ctx, ref, runID, e, body)
	if why != "" || err != nil {
		runenv.RemoveRun(context.WithoutCancel(ctx), p.Sink, runID)
	}
	return pr, why, err
}

// derive is prepare of run runID from ref, the pool's environment.
func (p *Pool) derive(ctx context.Context, ref Prepared, runID string, e taskpool.Entry, body []byte) (Prepared, string, error) {
	var pr Prepared
	if _, err := runenv.Derive(ctx, p.Sink, ref.Run.ID, runID, e.File, body); err != nil {
		why, err := invalid(err)
		return pr, why, err
	}
	b, err := runenv.Default.Load(ctx, p.Sink, runID)
	if err != nil {
		why, err := invalid(err)
		return pr, why, err
	}
	env := b.Env
	warnings := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := runcheck.Task(env.Flow, env.FlowDir, b.ToolsDir, env.Config, env.Task, warnings); err != nil {
		why, err := invalid(err)
		return pr, why, err
	}
	opts := lifecycle.CompileOptions(env.Config)
	opts.HeartbeatSeconds = p.Machines.HeartbeatSeconds
	def, err := compiler.Compile(env.Flow, opts)
	if err != nil {
		why, err := invalid(err)
		return pr, why, err
	}
	sm, err := sfn.MachineARN(p.Machines.RoleARN, p.Machines.Region, p.Machines.Prefix, env.Flow.TaskType, def)
	if err != nil {
		return pr, "", err
	}
	if err := p.Machines.Deploy(ctx, sm, def); err != nil {
		return pr, "", err
	}
	if err := lifecycle.PutDefinition(ctx, p.Sink, runID, def); err != nil {
		return pr, "", err
	}
	ws, err := lifecycle.ReuseWorkspace(ctx, p.Sink, ref.Run.Workspace, worker.WorkspaceKeys("", runID), worker.WorkspaceRoot(runID), env.Task.ID, env.Config.Projection.Placement)
	if err != nil {
		return pr, "", err
	}
	arn, err := executor.ExecutionARN(sm, runID)
	if err != nil {
		return pr, "", err
	}
	run := stratus.Run{ID: runID, TaskID: env.Task.ID, TaskTitle: env.Task.Title, Flow: env.Flow.TaskType, Status: stratus.RunRunning,
		WorkDir: ref.Run.WorkDir, TaskPath: e.Path, Workspace: ws, Execution: arn}
	run.MaxCostUSD, run.MaxTokens = lifecycle.Caps(env.Config, env.Task)
	pr = Prepared{Run: run, StateMachine: sm, Definition: def, File: e.File}
	p.log().Info(fmt.Sprintf("task %s: run %s prepared from the pool's environment (run %s's)", run.TaskID, runID, ref.Run.ID), "task_id", run.TaskID, "run_id", runID)
	return pr, "", nil
}

// invalid turns a check's error into why the task can never run as
// written (a 4xx of the task's), and passes any other error on.
func invalid(err error) (string, error) {
	switch stratus.ErrorCode(err) {
	case stratus.EINVALID, stratus.ENOTFOUND, stratus.ETOOLARGE:
		return strings.TrimSpace(stratus.ErrorMessage(err)), nil
	}
	return "", err
}
