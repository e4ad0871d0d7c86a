package stats

import (
	"context"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// check refuses counters no engine can report: integral non-negative
// token counts; a finite, non-negative cost of at most 1e9 US dollars
// (docs/contracts.md § Request and response bodies, § The event stream).
func check(st core.Stats) error {
	// In the body's order, so a body with several bad counters always
	// names the same one.
	for _, c := range []struct {
		field string
		v     *int64
	}{{"prompt_tokens", st.PromptTokens}, {"completion_tokens", st.CompletionTokens}} {
		if c.v != nil && *c.v < 0 {
			return stratus.FieldErrorf(stratus.EINVALID, c.field, "%d is negative; valid: a token count >= 0", *c.v)
		}
	}
	if st.Steps != nil && *st.Steps < 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "steps", "%d is negative; valid: a step count >= 0", *st.Steps)
	}
	if c := st.CostUSD; c != nil && !core.PlausibleCost(*c) {
		return stratus.FieldErrorf(stratus.EINVALID, "cost_usd", "%v is not a plausible cost; valid: US dollars from 0 to %g", *c, core.MaxCostUSD)
	}
	if e := st.EngineStartedAt; e != nil && *e < 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "engine_started_at_ms", "%d is negative; valid: unix milliseconds", *e)
	}
	return nil
}

// Invoke serves POST /v1/worker/stats: it updates the attempt's
// counters, reports them to OnEvent (EventStepProgress) and sends the state
// machine a heartbeat (docs/architecture.md § The path of one step, 6).
// An all-empty
// body is accepted and dropped.
func Invoke(ctx context.Context, s *core.Service, authorization string, st core.Stats) error {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return err
	}
	if st == (core.Stats{}) {
		return nil
	}
	if err := check(st); err != nil {
		return err
	}
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	// The stats are the worker's heartbeat: its handle's lease is renewed.
	s.RenewHandle(ctx, c)
	att := c.Attempt
	if st.Steps != nil && *st.Steps > att.Steps {
		att.Steps = *st.Steps
	}
	if st.PromptTokens != nil {
		att.PromptTokens = *st.PromptTokens
	}
	if st.CompletionTokens != nil {
		att.CompletionTokens = *st.CompletionTokens
	}
	if st.CostUSD != nil {
		att.CostUSD = st.CostUSD
	}
	if st.EngineStartedAt != nil {
		att.EngineStartedAt = time.UnixMilli(*st.EngineStartedAt).UTC()
	}
	if err := s.Store.UpdateAttempt(ctx, att); err != nil {
		return err
	}
	if s.OnEvent != nil && (st.Steps != nil || st.PromptTokens != nil || st.CompletionTokens != nil || st.CostUSD != nil) {
		now := s.NowUTC()
		node := c.Step.Node
		if c.Step.Kind == core.SupervisorKind {
			node = core.SupervisorValue(c.Step).Job // as its start and end events name it
		}
		s.OnEvent(core.Event{Type: core.EventStepProgress, At: now, RunID: c.Step.RunID, Node: node, StepRef: c.Step.StepRef, Attempt: att.N,
			Duration: now.Sub(att.StartedAt), Steps: att.Steps, PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD})
	}
	// A state that no longer waits for this step (its execution aborted or
	// timed out, its task timed out) tells the worker to stop: 409, on which
	// the runner stops its engine (docs/contracts.md § Routes; pinned by
	// TestRun_AStepGoneStopsTheEngine). Other heartbeat failures
	// (throttling, the network) are not the worker's.
	// An observation turn of the supervisor waits on no state (no token).
	if c.Step.TaskToken == "" {
		return nil
	}
	if err := s.Tokens.SendTaskHeartbeat(ctx, c.Step.TaskToken); err != nil {
		if name := executor.APIErrorName(err); name == executor.ErrTaskTimedOut || name == executor.ErrTaskDoesNotExist || name == executor.ErrInvalidToken {
			return stratus.Errorf(stratus.ECONFLICT, "step %s: its state no longer waits for it (%s); stop", c.Step.StepRef, name)
		}
	}
	return nil
}
