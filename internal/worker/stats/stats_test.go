package stats_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/stats"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/contracts.md § Routes (stats are best-effort and cumulative): a
// worker's stats are its heartbeat; when the state no longer waits for the
// step (its task timed out, its execution aborted or timed out), the answer
// is 409, on which the runner stops its engine. A heartbeat that fails for
// another reason (throttling) is not the worker's.
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
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow})
		r.Dispatch(t, "planning")
		r.Tokens.HeartbeatErr = c.err
		sp := r.Launcher.Launched()[0]
		n := int64(5)
		err := stats.Invoke(context.Background(), r.Svc.Service, "Bearer "+sp.Handle, core.Stats{PromptTokens: &n})
		if got := stratus.ErrorCode(err); (c.want == "" && err != nil) || (c.want != "" && (got != c.want || !strings.Contains(err.Error(), "no longer waits"))) {
			t.Errorf("heartbeat %v: RecordStats = %v; want %q", c.err, err, c.want)
		}
	}
}

// docs/contracts.md § Routes: a worker's stats are the step's live progress: each post
// is reported as a step_progress event with the attempt's counters so far
// and the time since it started.
func TestRecordStats_ReportsProgress(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow})
	var events []core.Event
	r.Svc.OnEvent = func(e core.Event) { events = append(events, e) }
	r.Dispatch(t, "planning")
	sp := r.Launcher.Launched()[0]
	steps, in, out, cost := 3, int64(1200), int64(34), 0.02
	if err := stats.Invoke(context.Background(), r.Svc.Service, "Bearer "+sp.Handle, core.Stats{Steps: &steps, PromptTokens: &in, CompletionTokens: &out, CostUSD: &cost}); err != nil {
		t.Fatal(err)
	}
	var got []core.Event
	for _, e := range events {
		if e.Type == core.EventStepProgress {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("progress events %+v; want one", got)
	}
	e := got[0]
	if e.StepRef != "planning#1" || e.Node != "planning" || e.Attempt != 1 || e.Steps != 3 || e.PromptTokens != 1200 || e.CompletionTokens != 34 ||
		e.CostUSD == nil || *e.CostUSD != 0.02 || e.Duration < 0 || e.RunID == "" {
		t.Errorf("progress event %+v", e)
	}
}
