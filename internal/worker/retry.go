package worker

import (
	"context"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/retry"
)

// The retry policy (internal/retry) in the worker: which provider an
// attempt after the first runs on, and what a transiently failed attempt
// leads to. The compiled state machine does the waiting (the worker
// state's Retry, and "<node>.park"/"<node>.wait"); the decisions here and
// the compiled numbers come from the same retry.Policy, so they agree.

// retryProvider resolves attempt n (> 1) of step on the provider the
// retry policy names after the step's attempts before it: the same one
// after a retry, the next of the fallback order after a hop, the first
// not known to be rate-limited after a park.
func (s *Service) retryProvider(ctx context.Context, env *RunEnv, node *flow.Node, step stratus.Step, n int, res stratus.Resolved) (stratus.Resolved, error) {
	history, err := s.attemptHistory(ctx, step.TID, n-1)
	if err != nil {
		return res, err
	}
	p := retry.FromConfig(env.Config).Provider(Pinned(node, env.Task.Front), history, s.now())
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

var _ = time.Now
