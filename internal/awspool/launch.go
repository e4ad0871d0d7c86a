package awspool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Executions is the part of Step Functions a launch and a claim use.
type Executions interface {
	StartExecution(ctx context.Context, in executor.StartInput) (executor.Execution, error)
	DescribeExecution(ctx context.Context, arn string) (executor.Execution, error)
}

// Ports are what a launch writes to and starts on: the stack's store, its
// bucket (the sink under the stack's prefix) and Step Functions.
type Ports struct {
	Store *dynamodb.Store
	Sink  sink.Sink
	Exec  Executions
}

// Prepared is a run checked, compiled and frozen, ready to start: what
// `stratus submit` leaves for the claim (pool/prepared/<task_id>.json) and
// what `stratus run --target aws` starts at once.
type Prepared struct {
	// Run is the run as it will be recorded (its id, task, flow, work dir
	// and task path on the submitting machine, workspace, execution ARN,
	// caps); its status and creation time are set when it is launched.
	Run          stratus.Run `json:"run"`
	StateMachine string      `json:"state_machine"` // the ARN of the run's compiled flow's state machine
	// Definition is the run's compiled definition (not stored with the
	// record: lifecycle.PutDefinition keeps it with the run's bundle).
	Definition []byte `json:"-"`
	// File is the task file's name in tasks/pending/ and TaskSHA256 the
	// hex SHA-256 of its bytes as submitted ("" for a run started at
	// once).
	File        string    `json:"file,omitempty"`
	TaskSHA256  string    `json:"task_sha256,omitempty"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
}

// Launch records prepared run p running, holding its task's lock
// (dynamodb.Store.CreateRunLocked), marks its logs dir as the task's
// latest run's (report.MarkRun, in the run's own files and the task's) and
// starts its execution, named by the run id, with input {run_id, task_id}
// (docs/architecture.md § The run lifecycle). It returns the run as
// recorded: the zero Run when nothing was recorded.
//
// Errors: CreateRunLocked's, untouched (*dynamodb.TaskLockedError when a
// run of the task that has not ended holds the lock; ECONFLICT when the
// run is recorded already), with nothing written; after the record, any
// error leaves the run recorded failed and its lock released (FailStart).
func Launch(ctx context.Context, ps Ports, p Prepared) (stratus.Run, error) {
	run := p.Run
	run.Status, run.CreatedAt = stratus.RunRunning, time.Now().UTC()
	if err := ps.Store.CreateRunLocked(ctx, run); err != nil {
		return stratus.Run{}, err
	}
	if err := report.MarkRun(ctx, sink.ForRun(ps.Sink, run.ID), run.TaskID, run.ID); err != nil {
		return run, FailStart(ctx, ps.Store, &run, err)
	}
	if err := report.MarkRun(ctx, ps.Sink, run.TaskID, run.ID); err != nil {
		return run, FailStart(ctx, ps.Store, &run, err)
	}
	input, _ := json.Marshal(map[string]string{"run_id": run.ID, "task_id": run.TaskID})
	x, err := ps.Exec.StartExecution(ctx, executor.StartInput{StateMachine: p.StateMachine, Definition: p.Definition, Name: run.ID, Input: input})
	if err != nil {
		return run, FailStart(ctx, ps.Store, &run, fmt.Errorf("start an execution of %s: %w", p.StateMachine, err))
	}
	if err := Renamed(ctx, ps.Store, &run, x); err != nil {
		return run, err
	}
	return run, nil
}

// FailStart records *run failed and releases its task's lock when its
// start (or resume) fails after the run was recorded running, and returns
// err.
func FailStart(ctx context.Context, st *dynamodb.Store, run *stratus.Run, err error) error {
	ctx = context.WithoutCancel(ctx)
	run.Status, run.EndedAt = stratus.RunFailed, time.Now().UTC()
	if st.UpdateRun(ctx, *run) == nil {
		st.UnlockTask(ctx, run.TaskID, run.ID) // left held: its holder has ended, so the next run takes it over
	}
	return err
}

// Renamed records the ARN x really has when the executor named it
// otherwise than executor.ExecutionARN said (a stand-in): the run must
// name its execution for the execution's end to be applied.
func Renamed(ctx context.Context, st *dynamodb.Store, run *stratus.Run, x executor.Execution) error {
	if x.ARN == "" || x.ARN == run.Execution {
		return nil
	}
	run.Execution = x.ARN
	return st.UpdateRun(ctx, *run)
}
