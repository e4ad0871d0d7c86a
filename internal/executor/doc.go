// Package executor is the port through which Stratus runs its compiled state
// machines (docs/architecture.md § The compiled state machines): start,
// describe, wait for and stop executions, and complete the callback tasks of
// .waitForTaskToken states with their task tokens.
//
// It owns the interface (Executor, TaskTokens), the shapes that cross it
// (StartInput, Execution, HistoryEvent) and the Step Functions API error
// names every implementation reports (APIError, APIErrorName), mapped to
// stratus codes: TaskDoesNotExist → ENOTFOUND, TaskTimedOut → ECONFLICT,
// InvalidToken → EINVALID, ExecutionAlreadyExists → ECONFLICT, and so on.
//
// Implementations: internal/executor/embedded (in-process interpreter,
// the default) and, later, one over AWS Step Functions; the history types
// match GetExecutionHistory so the two can be compared event by event.
//
// It deliberately holds no implementation and no ASL semantics: the
// document model and its evaluation live in internal/asl.
package executor
