package attempt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/retry"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

const retryFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: impl, kind: agent, role_file: r/impl.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: impl, to: publish }
`

// claudeAndCodex makes claude the primary and codex its fallback, both
// real providers (the stand-in engines are never fallbacks), one retry on
// the same provider, two providers a stage.
func claudeAndCodex(c *config.Config) {
	c.Agents.Primary = "claude"
	c.Agents.Allowed = []string{"claude", "codex"}
	one, two := 1, 2
	c.Agents.Retry.MaxAttempts = &one
	c.Agents.MaxStageAttempts = &two
}

// failLatest posts a failed result of class for the latest launched
// attempt, as a runner does (POST /v1/worker/result, ok=false).
func failLatest(t *testing.T, r *workertest.Rig, class, retryAt string) {
	t.Helper()
	specs := r.Launcher.Launched()
	sp := specs[len(specs)-1]
	v, _ := json.Marshal(core.FailureValue{Terminal: "Failed", Reason: "API Error: 529 overloaded", Class: class, RetryAt: retryAt})
	ok := false
	if _, err := r.Svc.Result(context.Background(), "Bearer "+sp.Handle, core.ResultBody{TaskID: sp.TaskID, Value: v, OK: &ok}); err != nil {
		t.Fatalf("result: %v", err)
	}
}

// reenter delivers the node's dispatch message again, as the worker
// state's Retry (retryCount > 0) or its "<node>.wait" (0) sends it.
func reenter(t *testing.T, r *workertest.Rig, node string, retryCount int) {
	t.Helper()
	r.N++
	tok := "tok-" + string(rune('a'+r.N))
	if err := r.Svc.Dispatch(context.Background(), core.Message{RunID: r.Run.ID, Node: node, Kind: "agent", TaskToken: tok, RetryCount: retryCount}); err != nil {
		t.Fatal(err)
	}
}

func attemptOf(t *testing.T, r *workertest.Rig, tid string, n int) stratus.Attempt {
	t.Helper()
	a, err := r.Svc.Store.GetAttempt(context.Background(), tid, n)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// README § Transient failures (internal/retry,
// docs/contracts.md § Terminal classification): a transient failure keeps the
// step and its visit; the Task state fails with the policy's error name, its
// Retry enters the node again, and the step goes on with a new attempt — on
// the same provider first, then the fallback — until every provider failed:
// then the step parks (the run reads waiting) with the time it tries again,
// and the node entered after the wait goes on in the same step again. A
// quality failure is never retried.
func TestRetry_TransientFailuresStayOneStepAcrossRetriesHopsAndParks(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: retryFlow, Config: claudeAndCodex})
	st := r.Dispatch(t, "impl")

	failLatest(t, r, failclass.ProviderUnavailable, "")
	if got := r.Tokens.Failures()["tok-1"]; !strings.HasPrefix(got, compiler.ErrProviderUnavailable+":") {
		t.Fatalf("the Task state failed with %q; want %s for the Retry", got, compiler.ErrProviderUnavailable)
	}
	if s, _ := r.Svc.Store.GetStep(context.Background(), st.TID); s.Status != stratus.StepRunning {
		t.Errorf("step after a retried failure is %s; want running (the step goes on)", s.Status)
	}

	// The Retry enters the node again: attempt 2 of the same step, on the
	// same provider.
	reenter(t, r, "impl", 1)
	if a := attemptOf(t, r, st.TID, 2); a.Resolved.Provider != "claude" {
		t.Errorf("attempt 2 runs on %q; want claude (max_attempts 1: one retry on the same provider)", a.Resolved.Provider)
	}
	if n, _ := r.Svc.Store.CountVisits(context.Background(), r.Run.ID, "impl"); n != 1 {
		t.Errorf("visits of impl = %d; want 1: a retry is an attempt, not a visit", n)
	}
	// A redelivery of that entry launches nothing more.
	launched := len(r.Launcher.Launched())
	r.N--
	reenter(t, r, "impl", 1)
	if len(r.Launcher.Launched()) != launched {
		t.Errorf("a redelivered retry message launched another attempt")
	}

	failLatest(t, r, failclass.ProviderUnavailable, "")
	reenter(t, r, "impl", 2)
	if a := attemptOf(t, r, st.TID, 3); a.Resolved.Provider != "codex" {
		t.Errorf("attempt 3 runs on %q; want the fallback codex", a.Resolved.Provider)
	}
	// Codex is rate-limited: every provider has failed, the step parks.
	reset := time.Now().Add(90 * time.Second).UTC().Truncate(time.Second)
	failLatest(t, r, failclass.RateLimited, reset.Format(time.RFC3339))
	fails := r.Tokens.Failures()
	var blocked string
	for _, f := range fails {
		if strings.HasPrefix(f, compiler.ErrBlocked+":") {
			blocked = strings.TrimPrefix(f, compiler.ErrBlocked+": ")
		}
	}
	var cause retry.BlockedCause
	if err := json.Unmarshal([]byte(blocked), &cause); err != nil || cause.WaitS < 1 || cause.RetryAt == "" {
		t.Fatalf("no Blocked failure with a wait: failures %v", fails)
	}
	s, _ := r.Svc.Store.GetStep(context.Background(), st.TID)
	var sv core.StepValue
	json.Unmarshal(s.Value, &sv)
	if s.Status != stratus.StepParked || sv.RetryAt.IsZero() || !strings.Contains(sv.Reason, "tries again at") {
		t.Errorf("step after every provider failed: %s %+v; want parked, saying when it tries again", s.Status, sv)
	}
	steps, _ := r.Svc.Store.ListSteps(context.Background(), r.Run.ID)
	if !lifecycle.Waiting(steps) {
		t.Errorf("a run with a parked step does not read waiting")
	}

	// The wait ends: the node is entered again (RetryCount 0), and the
	// parked step goes on.
	reenter(t, r, "impl", 0)
	if n, _ := r.Svc.Store.CountVisits(context.Background(), r.Run.ID, "impl"); n != 1 {
		t.Errorf("visits of impl after the park = %d; want 1", n)
	}
	if a := attemptOf(t, r, st.TID, 4); a.Status != stratus.AttemptRunning {
		t.Errorf("attempt 4 after the park: %+v", a)
	}
	// A quality failure ends the step: no retry.
	failLatest(t, r, failclass.Quality, "")
	if s, _ := r.Svc.Store.GetStep(context.Background(), st.TID); s.Status != stratus.StepFailed {
		t.Errorf("step after a quality failure is %s; want failed", s.Status)
	}
}
