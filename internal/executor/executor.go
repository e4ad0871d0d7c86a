package executor

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
)

// Executor runs compiled state machines. Two implementations satisfy it:
// AWS Step Functions and internal/executor/embedded. Errors callers branch
// on are *stratus.Error whose message starts with the Step Functions API
// error name (see APIErrorName).
type Executor interface {
	// StartExecution starts one execution of definition (ASL JSON after
	// DefinitionSubstitutions). Name must be unique per state machine
	// (ECONFLICT otherwise).
	StartExecution(ctx context.Context, in StartInput) (Execution, error)
	// DescribeExecution returns the execution's current state; ENOTFOUND
	// (ExecutionDoesNotExist) for an unknown ARN.
	DescribeExecution(ctx context.Context, arn string) (Execution, error)
	// WaitExecution blocks until the execution is no longer RUNNING or ctx
	// ends.
	WaitExecution(ctx context.Context, arn string) (Execution, error)
	// StopExecution aborts a running execution with an error name and a
	// cause; stopping a closed execution does nothing.
	StopExecution(ctx context.Context, arn, errName, cause string) error
	// GetExecutionHistory returns the execution's history, oldest first
	// (Step Functions GetExecutionHistory): what a run's end is read from
	// (the state a Fail was reached from, the budgets spent). ENOTFOUND
	// (ExecutionDoesNotExist) for an unknown ARN.
	GetExecutionHistory(ctx context.Context, arn string) ([]HistoryEvent, error)
	TaskTokens
}

// TaskTokens completes the callback tasks of .waitForTaskToken states.
type TaskTokens interface {
	// SendTaskSuccess completes the task of token with output (JSON).
	SendTaskSuccess(ctx context.Context, token string, output json.RawMessage) error
	// SendTaskFailure fails the task of token with an error name and cause.
	SendTaskFailure(ctx context.Context, token, errName, cause string) error
	// SendTaskHeartbeat resets the task's HeartbeatSeconds clock.
	SendTaskHeartbeat(ctx context.Context, token string) error
}

// StartInput starts one execution.
type StartInput struct {
	// StateMachine is the state machine's ARN
	// (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME) or, for the
	// embedded executor, a bare name.
	StateMachine string
	// Definition is the ASL JSON.
	Definition []byte
	// Name is the execution name, unique per state machine; empty lets the
	// executor pick one.
	Name string
	// Input is the execution input (JSON); empty means {}.
	Input json.RawMessage
}

// Execution statuses, as Step Functions names them.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	StatusTimedOut  = "TIMED_OUT"
	StatusAborted   = "ABORTED"
)

// Execution describes one execution.
type Execution struct {
	ARN          string
	StateMachine string // state machine ARN
	Name         string
	Status       string // RUNNING SUCCEEDED FAILED TIMED_OUT ABORTED
	Input        json.RawMessage
	Output       json.RawMessage // set when SUCCEEDED
	Error, Cause string          // set when FAILED or ABORTED; TIMED_OUT has neither, as on AWS
	StartDate    time.Time
	StopDate     time.Time // zero while RUNNING
}

// Done reports whether the execution is closed.
func (e Execution) Done() bool { return e.Status != "" && e.Status != StatusRunning }

// ExecutionARN returns the ARN Step Functions gives the execution named
// name of state machine stateMachine
// (arn:<partition>:states:<region>:<account>:stateMachine:<machine>):
// arn:<partition>:states:<region>:<account>:execution:<machine>:<name>, as
// the Step Functions API reference documents an execution's ARN. It is
// known before the execution starts, so that a run can name its execution
// in the same write that makes it running. Errors: *stratus.Error
// EINVALID (Field "StateMachine") for an ARN that is not a state
// machine's, (Field "Name") for an empty name.
func ExecutionARN(stateMachine, name string) (string, error) {
	p := strings.Split(stateMachine, ":")
	if len(p) != 7 || p[0] != "arn" || p[2] != "states" || p[5] != "stateMachine" || p[6] == "" {
		return "", stratus.FieldErrorf(stratus.EINVALID, "StateMachine", "%q is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)", stateMachine)
	}
	if name == "" {
		return "", stratus.FieldErrorf(stratus.EINVALID, "Name", "an execution ARN needs the execution's name; got \"\"")
	}
	p[5] = "execution"
	return strings.Join(p, ":") + ":" + name, nil
}
