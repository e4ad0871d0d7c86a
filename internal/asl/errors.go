package asl

import (
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
)

// Error names predefined by the language (ASL spec Appendix A; AWS Step
// Functions developer guide § Error names). The embedded executor raises
// the ones marked *; the others are accepted in ErrorEquals so that a
// definition written for AWS loads unchanged.
const (
	ErrAll                     = "States.ALL"                    // wildcard in ErrorEquals
	ErrTimeout                 = "States.Timeout"                // * TimeoutSeconds elapsed; execution TimeoutSeconds elapsed
	ErrHeartbeatTimeout        = "States.HeartbeatTimeout"       // * HeartbeatSeconds elapsed without a heartbeat
	ErrTaskFailed              = "States.TaskFailed"             // * a task failed without an error name
	ErrRuntime                 = "States.Runtime"                // * invalid path, unknown resource...: never retried nor caught
	ErrPermissions             = "States.Permissions"            //   insufficient privileges (AWS only)
	ErrResultPathMatchFailure  = "States.ResultPathMatchFailure" // * ResultPath cannot be applied to the input
	ErrParameterPathFailure    = "States.ParameterPathFailure"   //   listed by the spec; AWS reports States.Runtime instead
	ErrIntrinsicFailure        = "States.IntrinsicFailure"       // * an intrinsic function failed
	ErrNoChoiceMatched         = "States.NoChoiceMatched"        // * no Choice rule matched and no Default
	ErrBranchFailed            = "States.BranchFailed"           //   Parallel (not supported)
	ErrDataLimitExceeded       = "States.DataLimitExceeded"      //   payload over quota; never caught
	ErrExceedToleratedFailures = "States.ExceedToleratedFailureThreshold"
	ErrItemReaderFailed        = "States.ItemReaderFailed"
	ErrResultWriterFailed      = "States.ResultWriterFailed"
	ErrQueryEvaluationError    = "States.QueryEvaluationError"
)

var knownStatesErrors = []string{
	ErrAll, ErrTimeout, ErrHeartbeatTimeout, ErrTaskFailed, ErrRuntime, ErrPermissions,
	ErrResultPathMatchFailure, ErrParameterPathFailure, ErrIntrinsicFailure, ErrNoChoiceMatched,
	ErrBranchFailed, ErrDataLimitExceeded, ErrExceedToleratedFailures, ErrItemReaderFailed,
	ErrResultWriterFailed, ErrQueryEvaluationError,
}

// Failure is a state's error: the name Retry and Catch match against and
// a human cause. Its JSON form {"Error": ..., "Cause": ...} is the error
// output a Catcher hands on (ASL spec § Error Output).
type Failure struct {
	Error string
	Cause string
}

func (f *Failure) String() string { return f.Error + ": " + f.Cause }

// Output returns the error output object.
func (f *Failure) Output() Value {
	return NewObject(Member{"Error", f.Error}, Member{"Cause", f.Cause})
}

func failf(name, format string, args ...any) *Failure {
	return &Failure{Error: name, Cause: fmt.Sprintf(format, args...)}
}

// Uncatchable reports whether a failure ends the execution regardless of
// Retry and Catch: States.Runtime and States.DataLimitExceeded ("A retry
// or catch on States.ALL won't catch States.Runtime errors", AWS developer
// guide § Error names).
func Uncatchable(name string) bool {
	return name == ErrRuntime || name == ErrDataLimitExceeded
}

// MatchError reports whether a Retrier's or Catcher's ErrorEquals entry
// matches an error name (ASL spec § Retrying after error, § Fallback
// states; AWS developer guide § Error names):
//   - States.ALL matches every name;
//   - States.TaskFailed matches every name but the timeouts;
//   - States.Timeout matches States.Timeout and States.HeartbeatTimeout
//     (a heartbeat lapse is a kind of task timeout);
//   - any other entry matches itself only.
//
// Uncatchable names match nothing.
func MatchError(pattern, name string) bool {
	if Uncatchable(name) {
		return false
	}
	switch pattern {
	case ErrAll:
		return true
	case ErrTaskFailed:
		return name != ErrTimeout && name != ErrHeartbeatTimeout
	case ErrTimeout:
		return name == ErrTimeout || name == ErrHeartbeatTimeout
	}
	return pattern == name
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if MatchError(p, name) {
			return true
		}
	}
	return false
}

// Problem is one reason a definition is rejected: the state (empty for the
// top level), the field (a dotted path inside the state, e.g.
// "Retry[0].BackoffRate") and what would be valid.
type Problem struct {
	State   string
	Field   string
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.State == "" {
		b.WriteString("state machine: ")
	} else {
		fmt.Fprintf(&b, "state %q: ", p.State)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, "field %q: ", p.Field)
	}
	b.WriteString(p.Message)
	return b.String()
}

// DefinitionError lists every problem Parse found, in definition order.
// It unwraps to a *stratus.Error with code EINVALID.
type DefinitionError struct {
	Problems []Problem
}

func (e *DefinitionError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets stratus.ErrorCode and errors.As see EINVALID.
func (e *DefinitionError) Unwrap() error {
	return &stratus.Error{Code: stratus.EINVALID, Field: "definition", Message: e.Error()}
}
