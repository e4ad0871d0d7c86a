package taskpool

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
)

// States a listed task is in besides its lifecycle directory: a pending
// task a watcher claimed, and one whose run is under way.
const (
	Claimed = "claimed"
	Running = "running"
)

// Listed is one task of the pool's listing (`stratus tasks --json`, the
// viewer's runs page).
type Listed struct {
	ID       string `json:"id"`
	Title    string `json:"title,omitempty"`
	File     string `json:"file"`
	State    string `json:"state"` // preparing, pending, claimed, running, done, failed
	Queue    string `json:"queue"`
	Priority string `json:"priority"`
	// Waits says why a pending task is not taken: "depends_on X",
	// "queue other", "queue full"; Refused why it never will be (a
	// depends_on cycle, an unknown id); Invalid why its front matter does
	// not parse.
	Waits   string `json:"waits,omitempty"`
	Refused string `json:"refused,omitempty"`
	Invalid string `json:"invalid,omitempty"`
	RunID   string `json:"run_id,omitempty"`
}

// Queued reports whether l is still to run or running: pending, claimed
// or running.
func (l Listed) Queued() bool {
	return l.State == Pending || l.State == Claimed || l.State == Running
}

// Runs reads the runs that run the pool's tasks (the work dir's store).
type Runs interface {
	GetRun(ctx context.Context, id string) (stratus.Run, error)
}

// Unmerged says why done task id does not count yet for a task that
// depends on it: the run that ran it opened a pull request that is not
// merged ("" when it counts, or when runs, nil, or the pool do not know
// its run).
func (p *Pool) Unmerged(ctx context.Context, runs Runs, id string) string {
	c, ok := p.Ended(id)
	if !ok || c.RunID == "" || runs == nil {
		return ""
	}
	run, err := runs.GetRun(ctx, c.RunID)
	if err != nil {
		return ""
	}
	return UnmergedRun(run)
}

// UnmergedRun says why run, which ran a task that is done, does not count
// yet for a task that depends on it: it opened a pull request that is not
// merged ("" when it counts).
func UnmergedRun(run stratus.Run) string {
	if run.Publication == nil || run.Publication.PullRequest == nil {
		return ""
	}
	if pr := run.Publication.PullRequest; pr.State != "merged" {
		return fmt.Sprintf("pull request #%d is %s, not merged", pr.Number, pr.State)
	}
	return ""
}

// Listing lists the pool in the order a watcher serving queue, with
// maxTasks slots (orchestrator.max_concurrent_tasks), would take it
// (Decide): preparing, then the valid pending tasks with why each waits
// (a claimed one reads claimed, or running while its watcher lives and
// its run, read from runs, is running), the pending files that do not
// parse, done, failed (with the run that ran each, when the pool knows
// it). runs may be nil (no run made yet). Errors: the pool's directories
// or claims not readable.
func (p *Pool) Listing(ctx context.Context, queue string, maxTasks int, runs Runs) ([]Listed, error) {
	entries, err := p.All()
	if err != nil {
		return nil, err
	}
	claims, err := p.Claims()
	if err != nil {
		return nil, err
	}
	byID := map[string]Claim{}
	claimed := map[string]bool{}
	for _, c := range claims {
		byID[c.TaskID], claimed[c.TaskID] = c, true
	}
	plan := Decide(Input{Entries: entries, Claimed: claimed, Queue: queue, Free: maxTasks - len(claims),
		Unmerged: func(id string) string { return p.Unmerged(ctx, runs, id) }})
	return Rows(entries, plan, func(id string) (string, string, bool) {
		c, ok := byID[id]
		if !ok {
			return "", "", false
		}
		if c.Held && runStatus(ctx, runs, c.RunID) == stratus.RunRunning {
			return c.RunID, Running, true
		}
		return c.RunID, Claimed, true
	}, func(e Entry) string {
		if c, ok := p.Ended(e.ID()); ok && c.File == e.File {
			return c.RunID
		}
		return ""
	}), nil
}

// Rows lays a pool's listing out from its entries (by state) and Decide's
// plan: preparing, then the valid pending tasks with why each waits (a
// claimed one reads what claim says of it: its run and claimed or
// running), the pending files that do not parse, done, failed (with the
// run ended says ran each file, "" when none did). One layout for a work
// dir's pool and a stack's.
func Rows(entries map[string][]Entry, plan Plan, claim func(id string) (runID, state string, ok bool), ended func(e Entry) string) []Listed {
	out := []Listed{}
	row := func(e Entry, state string) Listed {
		l := Listed{ID: e.ID(), File: e.File, State: state, Queue: e.Queue(), Priority: e.Priority()}
		if e.Task != nil {
			l.Title = e.Task.Title
		}
		return l
	}
	for _, e := range entries[Preparing] {
		out = append(out, row(e, Preparing))
	}
	for _, d := range plan.Pending {
		l := row(d.Entry, Pending)
		l.Waits, l.Refused = d.Waits, d.Refuse
		if runID, state, ok := claim(l.ID); d.Claimed && ok {
			l.RunID, l.State = runID, state
		}
		out = append(out, l)
	}
	for _, e := range plan.Invalid {
		l := row(e, Pending)
		l.Invalid = e.Err.Error()
		out = append(out, l)
	}
	for _, s := range []string{Done, Failed} {
		for _, e := range entries[s] {
			l := row(e, s)
			l.RunID = ended(e)
			out = append(out, l)
		}
	}
	return out
}

// runStatus is run runID's status, reconciled (a run whose owner is gone
// reads interrupted); "" for an unknown run.
func runStatus(ctx context.Context, runs Runs, runID string) string {
	if runs == nil {
		return ""
	}
	run, err := runs.GetRun(ctx, runID)
	if err != nil {
		return ""
	}
	if lifecycle.OwnerGoneOf(run) {
		return stratus.RunInterrupted
	}
	return run.Status
}

// Queued is Listing's tasks still to run or running (Listed.Queued), in
// the order a watcher would take them; nil, without an error, when the
// pool has no pending/ directory (no pool in this work dir).
func (p *Pool) Queued(ctx context.Context, queue string, maxTasks int, runs Runs) ([]Listed, error) {
	if _, err := os.Stat(p.Dir(Pending)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	all, err := p.Listing(ctx, queue, maxTasks, runs)
	if err != nil {
		return nil, err
	}
	return QueuedOf(all), nil
}

// QueuedOf is the tasks of listing l still to run or running
// (Listed.Queued), in l's order: a work dir's pool's or a stack's.
func QueuedOf(l []Listed) []Listed {
	out := []Listed{}
	for _, t := range l {
		if t.Queued() {
			out = append(out, t)
		}
	}
	return out
}
