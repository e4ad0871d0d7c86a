package lifecycle

import (
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
)

// An execution's end maps to one run status on both runtimes; an aborted
// one (cancel) is interrupted, hence resumable.
func TestExecutionStatus_MapsTheExecutionsEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		x    executor.Execution
		want string
	}{
		{executor.Execution{Status: executor.StatusSucceeded}, stratus.RunDone},
		{executor.Execution{Status: executor.StatusFailed, Error: compiler.ErrManualActionRequired}, stratus.RunManualActionRequired},
		{executor.Execution{Status: executor.StatusFailed, Error: compiler.ErrFailed}, stratus.RunFailed},
		{executor.Execution{Status: executor.StatusTimedOut}, stratus.RunFailed},
		{executor.Execution{Status: executor.StatusAborted, Error: "stratus.Cancelled"}, stratus.RunInterrupted},
	} {
		if got := ExecutionStatus(c.x); got != c.want {
			t.Errorf("ExecutionStatus(%+v) = %s; want %s", c.x, got, c.want)
		}
	}
}
