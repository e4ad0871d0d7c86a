package executor

import (
	"encoding/json"
	"strings"
	"time"
)

// HistoryEvent is one entry of an execution's history, with the same
// types and fields Step Functions' GetExecutionHistory reports, so that
// the parity test can compare an embedded run with one on AWS event by
// event.
type HistoryEvent struct {
	ID        int64     // 1, 2, ... per execution
	Timestamp time.Time //
	Type      string    // an Event* constant, e.g. "TaskStateEntered"
	State     string    // state name, for state and task events
	// Input: ExecutionStarted (execution input), *StateEntered (state
	// input), TaskScheduled (the evaluated Parameters).
	Input json.RawMessage
	// Output: *StateExited (state output), TaskSubmitted (what the
	// resource returned when called), TaskSucceeded (the task's result),
	// ExecutionSucceeded (execution output).
	Output json.RawMessage
	// Error, Cause: TaskFailed, TaskTimedOut, ExecutionFailed,
	// ExecutionTimedOut, ExecutionAborted.
	Error, Cause string
	// Resource is the Task's Resource as written, for task events.
	Resource string
}

// History event types (Step Functions HistoryEventType). State events
// are named after the state's type: PassStateEntered, TaskStateExited...
const (
	EventExecutionStarted   = "ExecutionStarted"
	EventExecutionSucceeded = "ExecutionSucceeded"
	EventExecutionFailed    = "ExecutionFailed"
	EventExecutionTimedOut  = "ExecutionTimedOut"
	EventExecutionAborted   = "ExecutionAborted"

	EventPassStateEntered    = "PassStateEntered"
	EventPassStateExited     = "PassStateExited"
	EventTaskStateEntered    = "TaskStateEntered"
	EventTaskStateExited     = "TaskStateExited"
	EventChoiceStateEntered  = "ChoiceStateEntered"
	EventChoiceStateExited   = "ChoiceStateExited"
	EventWaitStateEntered    = "WaitStateEntered"
	EventWaitStateExited     = "WaitStateExited"
	EventSucceedStateEntered = "SucceedStateEntered"
	EventSucceedStateExited  = "SucceedStateExited"
	EventFailStateEntered    = "FailStateEntered" // a Fail state has no exit event

	EventTaskScheduled = "TaskScheduled"
	EventTaskStarted   = "TaskStarted"
	EventTaskSubmitted = "TaskSubmitted" // a .waitForTaskToken call returned; the task waits for its token
	EventTaskSucceeded = "TaskSucceeded"
	EventTaskFailed    = "TaskFailed"
	EventTaskTimedOut  = "TaskTimedOut"
)

// StateEntered returns the entered-event type of a state type ("Task" →
// "TaskStateEntered").
func StateEntered(stateType string) string { return stateType + "StateEntered" }

// StateExited returns the exited-event type of a state type.
func StateExited(stateType string) string { return stateType + "StateExited" }

// IsStateEntered reports whether the event is a state's entry.
func (e HistoryEvent) IsStateEntered() bool { return strings.HasSuffix(e.Type, "StateEntered") }

// IsStateExited reports whether the event is a state's exit.
func (e HistoryEvent) IsStateExited() bool { return strings.HasSuffix(e.Type, "StateExited") }
