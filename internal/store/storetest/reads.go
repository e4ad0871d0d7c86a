package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

// Reads is a store.Store that counts the records its readers read
// through it: each run, step and attempt a read returns (an output event
// too), and one for each count or total read (CountVisits, RunTotals).
// A reader whose count does not grow with the run reads O(page), not
// O(run) (README.md § Performance). Writes pass through uncounted.
type Reads struct {
	store.Store
	n atomic.Int64
}

// Take returns the records read since the last Take and starts again
// from 0.
func (r *Reads) Take() int64 { return r.n.Swap(0) }

func (r *Reads) add(n int) { r.n.Add(int64(n)) }

func (r *Reads) GetRun(ctx context.Context, id string) (stratus.Run, error) {
	r.add(1)
	return r.Store.GetRun(ctx, id)
}

func (r *Reads) ListRuns(ctx context.Context, limit int) ([]stratus.Run, error) {
	got, err := r.Store.ListRuns(ctx, limit)
	r.add(len(got))
	return got, err
}

func (r *Reads) FindRuns(ctx context.Context, q store.RunQuery) ([]stratus.Run, error) {
	got, err := r.Store.FindRuns(ctx, q)
	r.add(len(got))
	return got, err
}

func (r *Reads) GetStep(ctx context.Context, tid string) (stratus.Step, error) {
	r.add(1)
	return r.Store.GetStep(ctx, tid)
}

func (r *Reads) ListSteps(ctx context.Context, runID string) ([]stratus.Step, error) {
	got, err := r.Store.ListSteps(ctx, runID)
	r.add(len(got))
	return got, err
}

func (r *Reads) RecentSteps(ctx context.Context, runID string, upto, limit int) ([]stratus.Step, int, error) {
	got, total, err := r.Store.RecentSteps(ctx, runID, upto, limit)
	r.add(len(got) + 1)
	return got, total, err
}

func (r *Reads) NodeLatest(ctx context.Context, runID string) ([]stratus.Step, error) {
	got, err := r.Store.NodeLatest(ctx, runID)
	r.add(len(got))
	return got, err
}

func (r *Reads) LatestSteps(ctx context.Context, runID string, q store.LatestQuery) ([]stratus.Step, error) {
	got, err := r.Store.LatestSteps(ctx, runID, q)
	r.add(len(got))
	return got, err
}

func (r *Reads) NodeSteps(ctx context.Context, runID, node string, limit int) ([]stratus.Step, error) {
	got, err := r.Store.NodeSteps(ctx, runID, node, limit)
	r.add(len(got))
	return got, err
}

func (r *Reads) CountVisits(ctx context.Context, runID, node string) (int, error) {
	r.add(1)
	return r.Store.CountVisits(ctx, runID, node)
}

func (r *Reads) GetAttempt(ctx context.Context, tid string, n int) (stratus.Attempt, error) {
	r.add(1)
	return r.Store.GetAttempt(ctx, tid, n)
}

func (r *Reads) LatestAttempt(ctx context.Context, tid string) (stratus.Attempt, error) {
	r.add(1)
	return r.Store.LatestAttempt(ctx, tid)
}

func (r *Reads) RunTotals(ctx context.Context, runID string) (store.Totals, bool, error) {
	r.add(1)
	return r.Store.RunTotals(ctx, runID)
}

func (r *Reads) ListOutput(ctx context.Context, tid string, attempt int) ([]stratus.OutputEvent, error) {
	got, err := r.Store.ListOutput(ctx, tid, attempt)
	r.add(len(got))
	return got, err
}

// FillRun writes n steps of run runID through st's port, as fast as
// the port takes them (no engine runs): visits of nodes in turn, each
// completed with verdict "done" and one submitted attempt (1,000 tokens,
// $0.01), a minute apart from start. It returns the steps written.
func FillRun(ctx context.Context, st store.Store, runID, kind string, nodes []string, n int, start time.Time) ([]stratus.Step, error) {
	visits := map[string]int{}
	var out []stratus.Step
	for i := range n {
		node := nodes[i%len(nodes)]
		visits[node]++
		tid := fmt.Sprintf("%s.%s.%d", runID, node, visits[node])
		at := start.Add(time.Duration(i) * time.Minute)
		s := stratus.Step{TID: tid, RunID: runID, Node: node, Kind: kind, Visit: visits[node], StepRef: fmt.Sprintf("%s#%d", node, visits[node]),
			DedupKey: tid, Status: stratus.StepCompleted, Verdict: "done", CreatedAt: at, EndedAt: at.Add(time.Minute)}
		if _, _, err := st.CreateStep(ctx, s); err != nil {
			return nil, err
		}
		cost := 0.01
		if err := st.CreateAttempt(ctx, stratus.Attempt{TID: tid, N: 1, Agent: node, Status: stratus.AttemptSubmitted, Terminal: "Captured",
			PromptTokens: 900, CompletionTokens: 100, CostUSD: &cost, StartedAt: at, EndedAt: s.EndedAt}); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
