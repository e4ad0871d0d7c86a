package lifecycle

import (
	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
)

// ExecutionStatus is the run status an ended execution gives its run, on
// either runtime: SUCCEEDED is done, the manual_action_required terminal
// (compiler.ErrManualActionRequired) is manual_action_required, an aborted
// execution (StopExecution: ` + "`stratus cancel`" + `, Ctrl-C of an embedded run,
// the console) is interrupted, anything else (a Fail state, a timeout)
// failed.
func ExecutionStatus(x executor.Execution) string {
	switch {
	case x.Status == executor.StatusSucceeded:
		return stratus.RunDone
	case x.Error == compiler.ErrManualActionRequired:
		return stratus.RunManualActionRequired
	case x.Status == executor.StatusAborted:
		return stratus.RunInterrupted
	}
	return stratus.RunFailed
}
