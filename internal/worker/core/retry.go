package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/retry"
)

// The retry policy (internal/retry) in the worker: which provider an
// attempt after the first runs on, and what a transiently failed attempt
// leads to. The compiled state machine does the waiting (the worker
// state's Retry, and "<node>.park"/"<node>.wait"); the decisions here and
// the compiled numbers come from the same retry.Policy, so they agree.

// Progress events of the retry policy.
const (
	// EventStepRetrying: an attempt failed transiently and the step goes
	// on with another attempt (Reason says on which provider, and when).
	EventStepRetrying = "step_retrying"
	// EventStepParked: every provider the step may run on is unavailable
	// or rate-limited; the step waits (Reason says why and until when).
	EventStepParked = "step_parked"
)

// policy is the run's retry policy, its fallbacks cut to the providers
// that can start here (CanLaunch): a step never hops to an engine that
// cannot launch, which would fail it for want of a command rather than of
// a provider.
func (s *Service) policy(env *RunEnv) retry.Policy {
	p := retry.FromConfig(env.Config)
	if s.CanLaunch != nil {
		p.Fallbacks = slices.DeleteFunc(p.Fallbacks, func(name string) bool { return !s.CanLaunch(env.Config, name) })
	}
	return p
}

// RetryProvider resolves attempt n (> 1) of step on the provider the
// retry policy names after the step's attempts before it: the same one
// after a retry, the next of the fallback order after a hop, the first
// not known to be rate-limited after a park.
func (s *Service) RetryProvider(ctx context.Context, env *RunEnv, node *flow.Node, step stratus.Step, n int, res stratus.Resolved) (stratus.Resolved, error) {
	history, err := s.attemptHistory(ctx, step.TID, n-1)
	if err != nil {
		return res, err
	}
	p := s.policy(env).Provider(Pinned(node, env.Task.Front), history, s.NowUTC())
	if p == "" || p == res.Provider {
		return res, nil
	}
	res, _, err = ResolveOn(env.Config, env.Flow, node, env.Task.Front, p)
	return res, err
}

// attemptHistory is what the retry policy reads of attempts 1..n of a
// step, oldest first.
func (s *Service) attemptHistory(ctx context.Context, tid string, n int) ([]retry.Attempt, error) {
	out := make([]retry.Attempt, 0, n)
	for i := 1; i <= n; i++ {
		a, err := s.Store.GetAttempt(ctx, tid, i)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue // a number a racing launch never wrote
		} else if err != nil {
			return nil, err
		}
		out = append(out, historyOf(a))
	}
	return out, nil
}

func historyOf(a stratus.Attempt) retry.Attempt {
	return retry.Attempt{Provider: a.Resolved.Provider, Class: retry.Class(a.Class), RetryAt: a.RetryAt, Started: a.StartedAt, Ended: a.EndedAt}
}

// RetryFailure applies the retry policy to att, an attempt of an agent or
// evaluator step just recorded failed with a transient class: the step
// stays running and its Task state fails with the policy's error name,
// which the state's Retry retries after the policy's delay (on the same
// or the next provider: reenter, retryProvider); or the step parks until
// the time the policy names (stratus.Blocked: "<node>.park" and
// "<node>.wait" wait it out and enter the node again); or, parked
// max_blocked_s in all, it fails with stratus.BlockedTimeout (the run ends
// manual_action_required, resumable). handled is false for a failure the
// policy does not take (not transient, or another kind of step).
func (s *Service) RetryFailure(ctx context.Context, c *Caller, att stratus.Attempt, reason string) (sv *StepValue, handled bool, err error) {
	node := c.Env.Flow.Node(c.Step.Node)
	if node == nil || (node.Kind != "agent" && node.Kind != "evaluator") || !retry.Class(att.Class).Transient() {
		return nil, false, nil
	}
	history, err := s.attemptHistory(ctx, c.Step.TID, att.N-1)
	if err != nil {
		return nil, true, err
	}
	history = append(history, historyOf(att))
	now := s.NowUTC()
	d := s.policy(c.Env).Decide(Pinned(node, c.Env.Task.Front), history, now)
	name, cause, ok := compiler.TaskFailure(d)
	if !ok {
		return nil, false, nil
	}
	sv = &StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Reason: reason}
	status, event := stratus.StepRunning, EventStepRetrying
	switch d.Action {
	case retry.Retry, retry.Hop:
		sv.Outcome = "retrying"
		sv.Reason = fmt.Sprintf("attempt %d on %s failed (%s): attempt %d runs on %s in %s; %s",
			att.N, att.Resolved.Provider, att.Class, att.N+1, d.Provider, d.Delay.Round(time.Second), reason)
	case retry.Park:
		status, event, sv.Outcome, sv.RetryAt = stratus.StepParked, EventStepParked, "parked", d.Until.UTC()
		sv.Reason = fmt.Sprintf("%s; parked %s in all so far", d.Reason, d.Blocked.Round(time.Second))
	case retry.GiveUp:
		status, event, sv.Outcome = stratus.StepFailed, EventStepEnded, "failed"
		sv.Reason = d.Reason + "; " + reason
	}
	sv.Reason = ClipReason(sv.Reason, MaxReasonBytes, " [cut]")
	raw, _ := json.Marshal(sv)
	if status == stratus.StepFailed {
		err = s.FinishStep(ctx, c.Step, status, "failed", raw)
	} else {
		st := c.Step
		st.Status, st.Value = status, raw // open: no EndedAt
		err = s.Store.UpdateStep(ctx, st)
	}
	if err != nil {
		return nil, true, err
	}
	if event == EventStepEnded {
		s.EmitEnded(c, att, "failed", sv.Reason)
	} else {
		s.Emit(Event{Type: event, RunID: c.Run.ID, Node: c.Step.Node, StepRef: c.Step.StepRef, TID: c.Step.TID, Attempt: att.N,
			Terminal: att.Terminal, Outcome: sv.Outcome, Reason: sv.Reason, Duration: att.EndedAt.Sub(att.StartedAt),
			PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD})
	}
	if err := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, name, cause); err != nil {
		return nil, true, stratus.Errorf(stratus.ECONFLICT, "failure of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, true, nil
}
