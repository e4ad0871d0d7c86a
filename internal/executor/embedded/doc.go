// Package embedded is the in-process implementation of executor.Executor:
// the interpreter that runs Stratus's compiled state machines on a laptop
// with no AWS (docs/architecture.md § The compiled state machines).
//
// It owns executions (one goroutine each), their history (History, the
// OnEvent hook), Task invocation through in-process TaskHandlers keyed by
// resource ARN, the callback pattern (.waitForTaskToken: a fresh task
// token per attempt, single use, SendTaskSuccess/Failure/Heartbeat),
// TimeoutSeconds and HeartbeatSeconds, Retry with backoff, jitter and
// MaxDelaySeconds, Catch, Wait states (a Clock timer that closing the
// execution ends at once), the execution's TimeoutSeconds, StopExecution,
// and DefinitionSubstitutions (Options.Substitutions). Time goes through
// a Clock so tests drive timers without waiting.
//
// Semantics are AWS Step Functions' (see internal/asl for the rules and
// where AWS and the ASL specification differ); API errors carry the Step
// Functions names (ExecutionAlreadyExists, TaskTimedOut, ...), see
// internal/executor.
//
// What it deliberately does not do: persist anything (executions live as
// long as the process), run Map, Parallel or JSONata states (Parse
// rejects them), talk to AWS, or implement resources itself — every
// Resource is a TaskHandler the caller registers; one that has none fails
// its state with States.Runtime.
package embedded
