package awspool

import (
	"context"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// Listing lists the stack's pool in the order the claim takes it
// (taskpool.Rows of taskpool.Decide, as a work dir's pool is listed): each
// task's state — pending with why it waits (depends_on X, queue other,
// queue full), claimed, running while its run is, done, failed — and its
// run. Nothing is written. Errors: the sink's and the store's.
func (p *Pool) Listing(ctx context.Context) ([]taskpool.Listed, error) {
	entries, err := p.Entries(ctx)
	if err != nil {
		return nil, err
	}
	claims, err := p.Store.PoolClaims(ctx)
	if err != nil {
		return nil, err
	}
	claimed, runOf := map[string]bool{}, map[string]string{}
	for _, c := range claims {
		claimed[c.TaskID], runOf[c.TaskID] = true, c.RunID
	}
	plan := taskpool.Decide(taskpool.Input{Entries: entries, Claimed: claimed, Queue: p.queue(), Free: p.max() - len(claims),
		Unmerged: func(id string) string { return p.unmerged(ctx, id) }})
	return taskpool.Rows(entries, plan, func(id string) (string, string, bool) {
		runID, ok := runOf[id]
		if !ok {
			return "", "", false
		}
		if run, err := p.Store.GetRun(ctx, runID); err == nil && run.Status == stratus.RunRunning {
			return runID, taskpool.Running, true
		}
		return runID, taskpool.Claimed, true
	}, func(e taskpool.Entry) string {
		// The run prepared for this very file, once it ran.
		if pr, err := p.prepared(ctx, e.ID()); err == nil && pr.File == e.File {
			if _, err := p.Store.GetRun(ctx, pr.Run.ID); err == nil {
				return pr.Run.ID
			}
		}
		return ""
	}), nil
}

// Queued is Listing's tasks still to run or running (taskpool.Listed.Queued).
func (p *Pool) Queued(ctx context.Context) ([]taskpool.Listed, error) {
	all, err := p.Listing(ctx)
	if err != nil {
		return nil, err
	}
	return taskpool.QueuedOf(all), nil
}
