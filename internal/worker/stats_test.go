package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
)

// issue 11 § 6: a worker's stats are its heartbeat; when the state no longer
// waits for the step (its task timed out, its execution aborted or timed
// out), the answer is 409, on which the runner stops its engine. A
// heartbeat that fails for another reason (throttling) is not the worker's.
func TestRecordStats_AStateThatNoLongerWaitsIs409(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("ThrottlingException: rate exceeded"), ""},
		{executor.APIError(executor.ErrTaskTimedOut, "taskToken", "the execution is closed"), stratus.ECONFLICT},
		{executor.APIError(executor.ErrTaskDoesNotExist, "taskToken", "no such task"), stratus.ECONFLICT},
	} {
		r := newRig(t, rigOptions{flow: chainFlow})
		r.dispatch(t, "planning")
		r.tokens.HeartbeatErr = c.err
		sp := r.launcher.Launched()[0]
		n := int64(5)
		err := r.svc.RecordStats(context.Background(), "Bearer "+sp.Handle, Stats{PromptTokens: &n})
		if got := stratus.ErrorCode(err); (c.want == "" && err != nil) || (c.want != "" && (got != c.want || !strings.Contains(err.Error(), "no longer waits"))) {
			t.Errorf("heartbeat %v: RecordStats = %v; want %q", c.err, err, c.want)
		}
	}
}
