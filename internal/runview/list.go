package runview

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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
	// Note says the run reads interrupted (its owner gone) though the
	// store refused to record it (NotRecordedNote).
	Note string `json:"note,omitempty"`
	// PullRequest is the URL of the run's pull request, once its publish
	// step opened one (docs/architecture.md § Publishing).
	PullRequest string `json:"pull_request,omitempty"`
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
// shown waiting) and spend. A run whose reconcile the store refused (a
// full disk) is listed interrupted all the same, with a Note saying so.
// Errors: the store's reads.
func List(ctx context.Context, st store.Store, limit int) ([]RunLine, error) {
	return ListStatus(ctx, st, limit, "")
}

// Statuses are the statuses a run is listed with (`runs --status`, the
// viewer's ?status=): a running run one of whose steps waits reads
// waiting.
var Statuses = []string{stratus.RunRunning, StatusWaiting, stratus.RunDone, stratus.RunFailed, stratus.RunManualActionRequired, stratus.RunInterrupted}

// CheckStatus refuses a status no run is listed with: EINVALID (field
// "status") naming it and the valid ones.
func CheckStatus(status string) error {
	if !slices.Contains(Statuses, status) {
		return stratus.FieldErrorf(stratus.EINVALID, "status", "status %q is no run status; valid: %s", status, strings.Join(Statuses, ", "))
	}
	return nil
}

// ListStatus is List of the runs listed with status (List's status: a
// dead owner's run interrupted, a waiting one waiting), the newest limit of
// them (0: all); status "" lists every run. Errors: EINVALID for a status
// CheckStatus refuses, the store's reads.
func ListStatus(ctx context.Context, st store.Store, limit int, status string) ([]RunLine, error) {
	if status != "" {
		if err := CheckStatus(status); err != nil {
			return nil, err
		}
	}
	read := limit
	if status != "" {
		read = 0 // the newest limit runs of that status may be anywhere in the list
	}
	runs, err := st.ListRuns(ctx, read)
	if err != nil {
		return nil, err
	}
	lines := []RunLine{}
	for _, r := range runs {
		if limit > 0 && len(lines) == limit {
			break
		}
		r, rerr := lifecycle.Reconcile(ctx, st, r)
		l := RunLine{RunID: r.ID, Status: r.Status, TaskID: r.TaskID, Title: r.TaskTitle, Flow: r.Flow, CreatedAt: r.CreatedAt, EndedAt: r.EndedAt, Resumes: r.Resumes, PrunedAt: r.PrunedAt}
		if p := r.Publication; p != nil && p.PullRequest != nil {
			l.PullRequest = p.PullRequest.URL
		}
		if rerr != nil {
			l.Note = NotRecordedNote(rerr)
		}
		l.DurationMS = r.Duration(time.Now()).Milliseconds()
		if r.Status == stratus.RunRunning {
			// Each node's latest step, not the run's steps: a step that
			// waits is its node's latest (README.md § Performance).
			heads, err := st.NodeLatest(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			if lifecycle.Waiting(heads) {
				l.Status = StatusWaiting
			}
		}
		if status != "" && l.Status != status {
			continue
		}
		if l.Spend, err = lifecycle.RunSpend(ctx, st, r.ID); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}
