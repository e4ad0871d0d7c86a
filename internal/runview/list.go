package runview

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/store"
)

// StatusWaiting is the status a running run one of whose steps waits for
// a human is shown with.
const StatusWaiting = "waiting"

// RunLine is one run as `stratus runs` and the run viewer list it.
type RunLine struct {
	RunID      string    `json:"run_id"`
	Status     string    `json:"status"`
	TaskID     string    `json:"task_id"`
	Title      string    `json:"-"`
	Flow       string    `json:"flow"`
	CreatedAt  time.Time `json:"created_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	DurationMS int64     `json:"duration_ms"`
	Resumes    int       `json:"resumes,omitempty"`
	// PrunedAt is when retention removed the run's steps and files
	// (docs/security.md § Retention); its spend went with them.
	PrunedAt time.Time `json:"pruned_at,omitzero"`
	lifecycle.Spend
}

// MarshalJSON is the line as `stratus runs --json` prints it: cost_usd
// is null when the run's cost is unknown (lifecycle.Spend.Cost), never a 0
// that would read as free.
func (l RunLine) MarshalJSON() ([]byte, error) {
	type plain RunLine // without this method
	return json.Marshal(struct {
		plain
		CostUSD *float64 `json:"cost_usd"` // shallower: wins over Spend's
	}{plain(l), l.Spend.Cost()})
}

// Duration is how long the run ran (until now, for a running run).
func (l RunLine) Duration() time.Duration { return time.Duration(l.DurationMS) * time.Millisecond }

// List reads the newest limit runs (0: all) with their true status (a
// dead owner reconciled to interrupted; a running run waiting for a human
// shown waiting) and spend. Errors: the store's.
func List(ctx context.Context, st store.Store, limit int) ([]RunLine, error) {
	runs, err := st.ListRuns(ctx, limit)
	if err != nil {
		return nil, err
	}
	lines := []RunLine{}
	for _, r := range runs {
		if r, err = lifecycle.Reconcile(ctx, st, r); err != nil {
			return nil, err
		}
		l := RunLine{RunID: r.ID, Status: r.Status, TaskID: r.TaskID, Title: r.TaskTitle, Flow: r.Flow, CreatedAt: r.CreatedAt, EndedAt: r.EndedAt, Resumes: r.Resumes, PrunedAt: r.PrunedAt}
		l.DurationMS = r.Duration(time.Now()).Milliseconds()
		if r.Status == stratus.RunRunning {
			steps, err := st.ListSteps(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			if lifecycle.Waiting(steps) {
				l.Status = StatusWaiting
			}
		}
		if l.Spend, err = lifecycle.RunSpend(ctx, st, r.ID); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}
