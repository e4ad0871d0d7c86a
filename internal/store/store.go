// Package store defines where Stratus keeps runs, steps, attempts, output
// tails and worker handles. Two implementations satisfy it: sqlite (the
// embedded default, one file under DIR/.stratus/) and, later, DynamoDB.
// storetest holds the one conformance suite both must pass.
package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
)

// Store is the persistence port. Every method returns *stratus.Error with
// ENOTFOUND for a missing record and ECONFLICT for a violated condition;
// other failures are wrapped I/O errors.
type Store interface {
	// CreateRun inserts a run; ECONFLICT if the id exists.
	CreateRun(ctx context.Context, r stratus.Run) error
	GetRun(ctx context.Context, id string) (stratus.Run, error)
	// UpdateRun replaces the mutable fields (Status, Execution, Owner,
	// Resumes, MaxCostUSD, MaxTokens, EndedAt); PrunedAt only PruneRun sets.
	UpdateRun(ctx context.Context, r stratus.Run) error
	// AdvanceWorkspace moves run runID's workspace head from `from` to `to`
	// and appends bundle (the sink key of the bundle carrying from..to) to
	// its bundles, if and only if the head is still `from`: the fence that
	// keeps a rekicked or late attempt from writing over another's commit.
	// Errors: ECONFLICT when the head is no longer from; ENOTFOUND when there
	// is no such run or it has no workspace.
	AdvanceWorkspace(ctx context.Context, runID, from, to, bundle string) error
	// SetPublication records what run runID's publish step left on its git
	// host (Run.Publication), replacing what an earlier publish of the run
	// recorded. Errors: ENOTFOUND for no such run.
	SetPublication(ctx context.Context, runID string, p stratus.Publication) error
	// PruneRun removes what run runID recorded besides the run itself —
	// its steps, attempts, output tails and degradations — and marks the
	// run pruned at `at` (Run.PrunedAt; a run pruned before keeps its
	// first mark), for retention (docs/security.md § Retention). The run
	// record stays, so the run is still listed and says it was pruned.
	// Errors: ENOTFOUND for no such run; ECONFLICT, removing nothing,
	// when the run's status is not terminal (it runs, or was resumed
	// since the caller read it).
	PruneRun(ctx context.Context, runID string, at time.Time) error
	// ListRuns returns the runs newest first (CreatedAt descending, then
	// id descending), at most limit of them (0: all).
	ListRuns(ctx context.Context, limit int) ([]stratus.Run, error)
	// FindRuns returns the runs q selects, newest first as ListRuns: what
	// a run named on the command line by a prefix of its id or by its
	// task resolves against (README § Naming a run).
	FindRuns(ctx context.Context, q RunQuery) ([]stratus.Run, error)

	// CreateStep inserts a step unless one with the same DedupKey exists, in
	// which case it returns that one and created=false (a redelivered
	// dispatch message must not create two steps).
	CreateStep(ctx context.Context, s stratus.Step) (got stratus.Step, created bool, err error)
	// CreateNextStep creates the next visit of node in run runID, numbered
	// by the store: visit v is one more than the node's highest visit
	// (CountVisits), and the step number(v) returns is created in the same
	// atomic write that advances the node's count, conditioned on the
	// count it read, so callers anywhere — other goroutines, other
	// processes, other Lambda instances on one table — get distinct visits
	// 1, 2, 3, … without a gap, and none fails for another's number.
	//
	// number must return a step with RunID runID, Node node, Visit v and
	// DedupKey dedupKey (EINVALID naming the field otherwise); it is
	// called again with the next number when another caller took v first,
	// so it must not write to the store (it may read it: every step with
	// a lower visit of node exists when it is called with v). Its error is
	// returned as is.
	//
	// A step with dedupKey (not "") that exists already is returned with
	// created=false, the count untouched, as CreateStep does: a
	// redelivered dispatch message gets the step its first delivery made.
	// Errors: ECONFLICT when a step with number(v)'s TID exists already
	// (a TID that does not name its visit).
	CreateNextStep(ctx context.Context, runID, node, dedupKey string, number func(visit int) (stratus.Step, error)) (got stratus.Step, created bool, err error)
	GetStep(ctx context.Context, tid string) (stratus.Step, error)
	// ListSteps returns a run's steps in creation order.
	ListSteps(ctx context.Context, runID string) ([]stratus.Step, error)
	// LatestSteps returns, for each node of a run, its latest step (the
	// last created) among those q selects, in creation order: what a prompt
	// reads of the steps before it, without reading the whole run
	// (README.md § Performance).
	LatestSteps(ctx context.Context, runID string, q LatestQuery) ([]stratus.Step, error)
	// NodeSteps returns the steps of node in run runID newest first, at
	// most limit of them (0: all): newest is last created, the creation
	// order ListSteps and LatestSteps (Latest) order steps by, not the
	// highest Visit. None (and no error) for a node without steps or an
	// unknown run; EINVALID for a negative limit. It reads what it
	// returns, not the run's other steps (README.md § Performance).
	NodeSteps(ctx context.Context, runID, node string, limit int) ([]stratus.Step, error)
	// RecentSteps returns a page of run runID's steps: numbering the run's
	// steps 1 to total in creation order, those numbered upto-limit+1 to
	// upto (from 1), in creation order, and total. upto 0, or above
	// total, is total: the newest page. It reads the page and O(1) more
	// items, however long the run, so a reader of a long run shows its
	// newest steps in the time of a short one (README.md § Performance).
	// None and total 0 (no error) for a run without steps or an unknown
	// run. Errors: EINVALID for a limit below 1 or a negative upto
	// (CheckPage).
	RecentSteps(ctx context.Context, runID string, upto, limit int) (steps []stratus.Step, total int, err error)
	// NodeLatest returns each node's latest step (the last created of
	// the node: its highest visit, CreateNextStep numbering a node's
	// visits in creation order) in run runID, in creation order: one step
	// a node, however
	// long the run (README.md § Performance). A step that waits for a
	// human or is parked is its node's latest (a node is visited again
	// only after its visit ends), so these say whether a run waits
	// (lifecycle.Waiting). None (and no error) for an unknown run.
	NodeLatest(ctx context.Context, runID string) ([]stratus.Step, error)
	// NodesSteps is NodeSteps over several nodes: the steps of any of
	// nodes in run runID, newest (last created) first across them, at
	// most limit (0: all) — how a node's visits and another's interleave,
	// without reading the run's other steps (README.md § Performance).
	// None for no nodes; EINVALID for a negative limit.
	NodesSteps(ctx context.Context, runID string, nodes []string, limit int) ([]stratus.Step, error)
	// CountVisits returns how many steps of node the run already has: the
	// highest Visit among them (a node's steps are its visits 1 to n,
	// CreateNextStep), which a store keeps where one read finds it,
	// however long the run.
	CountVisits(ctx context.Context, runID, node string) (int, error)
	// UpdateStep replaces the mutable fields (Status, Verdict, Value, EndedAt).
	UpdateStep(ctx context.Context, s stratus.Step) error
	// UpdateStepFrom is UpdateStep on condition that the stored step's
	// Status is still from, in one conditional write: of two writers that
	// read the same status (two replies to one human gate on two Lambda
	// instances, a reply and its deadline), one moves the step on and the
	// other is refused, whatever process each runs in. Errors: ENOTFOUND for
	// an unknown TID; ECONFLICT naming the status the step has when it is
	// not from (nothing written).
	UpdateStepFrom(ctx context.Context, s stratus.Step, from string) error
	// ReenterStep makes step tid running again for a new entry of its Task
	// state (its own Retry, or the node entered again after a park):
	// TaskToken becomes token, Status running, EndedAt zero, and entry is
	// recorded, unless the step's latest entry already is entry — a
	// redelivered message — in which case nothing changes and reentered is
	// false. The step as it now is comes back either way. Errors:
	// ENOTFOUND for an unknown tid.
	ReenterStep(ctx context.Context, tid, token, entry string) (st stratus.Step, reentered bool, err error)

	// CreateAttempt inserts attempt (TID, N); ECONFLICT if it exists.
	CreateAttempt(ctx context.Context, a stratus.Attempt) error
	GetAttempt(ctx context.Context, tid string, n int) (stratus.Attempt, error)
	// LatestAttempt returns the attempt of tid with the highest N.
	LatestAttempt(ctx context.Context, tid string) (stratus.Attempt, error)
	// UpdateAttempt replaces every field but TID and N.
	UpdateAttempt(ctx context.Context, a stratus.Attempt) error
	// RunTotals returns run runID's spend summed over every attempt
	// numbered 1 or more of every one of its steps (AttemptUsage), kept
	// by the writes that change an attempt's usage (CreateAttempt,
	// UpdateAttempt, CompleteAttempt, PruneRun) in the same atomic write,
	// so one read answers however long the run. kept is false, with zero
	// Totals, for a run created before its store kept totals: the caller
	// sums its attempts instead (lifecycle.RunSpend). An attempt counts
	// towards its step's run only when the step exists when the attempt
	// is written, as every attempt is created for a step that exists.
	// Errors: ENOTFOUND for no such run.
	RunTotals(ctx context.Context, runID string) (t Totals, kept bool, err error)

	// AppendOutput appends e to the tail of (e.TID, e.Attempt) and returns
	// its sequence number (1, 2, ...). Appending a second OutputFinal to one
	// attempt fails with ECONFLICT and appends nothing.
	AppendOutput(ctx context.Context, e stratus.OutputEvent) (seq int, err error)
	// CompleteAttempt appends final (an OutputFinal) to its attempt's tail and
	// replaces the attempt and step records, atomically: all three or none.
	// Errors as AppendOutput, UpdateAttempt and UpdateStep.
	CompleteAttempt(ctx context.Context, final stratus.OutputEvent, a stratus.Attempt, s stratus.Step) (seq int, err error)
	// ListOutput returns the tail of one attempt in append order.
	ListOutput(ctx context.Context, tid string, attempt int) ([]stratus.OutputEvent, error)
	// ListPartNames returns the distinct names of the staged parts
	// (OutputArtifact events) in the tail of one attempt, in the order each
	// was first staged, without reading any body: what a staging compares
	// its name with (docs/security.md § Part names). None, and no error,
	// for an empty tail or an unknown attempt.
	ListPartNames(ctx context.Context, tid string, attempt int) ([]string, error)

	// PutHandle stores a handle; ECONFLICT if the handle string exists.
	PutHandle(ctx context.Context, h stratus.Handle) error
	// GetHandle returns a handle; ENOTFOUND when absent (expiry is the
	// caller's check, so a 401 can say "expired" rather than "unknown").
	GetHandle(ctx context.Context, handle string) (stratus.Handle, error)
	// TakeHandle returns a handle and makes it unusable, atomically and
	// once: a second TakeHandle, or a GetHandle after, is ENOTFOUND, as is
	// an absent handle. A worker's one-time bootstrap value is such a
	// handle (docs/security.md § Handles).
	TakeHandle(ctx context.Context, handle string) (stratus.Handle, error)
	// RenewHandle sets a handle's expiry to expiresAt (the runner's
	// heartbeat renews its lease, docs/security.md § Handles). ENOTFOUND when
	// the handle is absent or taken.
	RenewHandle(ctx context.Context, handle string, expiresAt time.Time) error

	// AppendDegradation appends d to its run's degradation record.
	AppendDegradation(ctx context.Context, d stratus.Degradation) error
	// ListDegradations returns a run's degradations in append order.
	ListDegradations(ctx context.Context, runID string) ([]stratus.Degradation, error)

	// PutRenderSize records the latest system-prompt size of an agent
	// (last write wins).
	PutRenderSize(ctx context.Context, r stratus.RenderSize) error
	// GetRenderSize returns it; ENOTFOUND when the agent was never rendered.
	GetRenderSize(ctx context.Context, agent string) (stratus.RenderSize, error)

	Close() error
}

// Totals is what a run's attempts spent (Store.RunTotals), summed as
// lifecycle.Spend sums it: CostUSD over the attempts that reported a
// cost, Tokens prompt + completion, Unpriced the attempts that reported
// tokens and no cost.
type Totals struct {
	CostUSD  float64
	Tokens   int64
	Unpriced int64
}

// AttemptUsage is what attempt a adds to its run's Totals; zero for an
// attempt numbered below 1, which the sum over attempts 1 to the latest
// never reads.
func AttemptUsage(a stratus.Attempt) Totals {
	if a.N < 1 {
		return Totals{}
	}
	t := Totals{Tokens: a.PromptTokens + a.CompletionTokens}
	switch {
	case a.CostUSD != nil:
		t.CostUSD = *a.CostUSD
	case a.PromptTokens > 0 || a.CompletionTokens > 0:
		t.Unpriced = 1
	}
	return t
}

// Minus returns t - o: the delta a write that replaces usage o by t
// applies to its run's Totals.
func (t Totals) Minus(o Totals) Totals {
	return Totals{CostUSD: t.CostUSD - o.CostUSD, Tokens: t.Tokens - o.Tokens, Unpriced: t.Unpriced - o.Unpriced}
}

// IsZero reports whether t changes nothing when added.
func (t Totals) IsZero() bool { return t == Totals{} }

// RunQuery selects runs: those whose id starts with IDPrefix (when not
// empty) and whose TaskID is TaskID (when not empty), at most Limit of
// them (0: all). The empty query selects every run.
type RunQuery struct {
	IDPrefix string
	TaskID   string
	Limit    int
}

// Selects reports whether q selects r (Limit aside).
func (q RunQuery) Selects(r stratus.Run) bool {
	return strings.HasPrefix(r.ID, q.IDPrefix) && (q.TaskID == "" || r.TaskID == q.TaskID)
}

// LatestQuery selects the steps LatestSteps picks the latest of: those
// with Status, none with a verdict in SkipVerdicts or a kind in SkipKinds,
// and not the step ExceptTID.
type LatestQuery struct {
	Status       string
	ExceptTID    string
	SkipVerdicts []string
	SkipKinds    []string
}

// Selects reports whether q selects st.
func (q LatestQuery) Selects(st stratus.Step) bool {
	return st.Status == q.Status && st.TID != q.ExceptTID && !slices.Contains(q.SkipVerdicts, st.Verdict) && !slices.Contains(q.SkipKinds, st.Kind)
}

// Latest is LatestSteps over steps already read (in creation order): a
// store that keeps no index of its own answers with it.
func Latest(steps []stratus.Step, q LatestQuery) []stratus.Step {
	last := map[string]int{}
	for i, st := range steps {
		if q.Selects(st) {
			last[st.Node] = i
		}
	}
	var out []stratus.Step
	for i, st := range steps {
		if j, ok := last[st.Node]; ok && j == i {
			out = append(out, st)
		}
	}
	return out
}

// CheckNumbered checks that st, the step a CreateNextStep's number
// returned for visit, is that visit of node in run runID with dedupKey:
// EINVALID naming the first field that differs.
func CheckNumbered(st stratus.Step, runID, node, dedupKey string, visit int) error {
	for _, f := range []struct {
		field, got, want string
	}{
		{"run_id", st.RunID, runID}, {"node", st.Node, node}, {"dedup_key", st.DedupKey, dedupKey},
		{"visit", strconv.Itoa(st.Visit), strconv.Itoa(visit)},
	} {
		if f.got != f.want {
			return stratus.FieldErrorf(stratus.EINVALID, f.field, "step %q numbered as visit %d of node %q in run %q has %s %q; want %q",
				st.TID, visit, node, runID, f.field, f.got, f.want)
		}
	}
	return nil
}

// CheckLimit checks the limit of a NodeSteps or NodesSteps call:
// EINVALID below 0.
func CheckLimit(limit int) error {
	if limit < 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "limit", "limit %d is negative; valid: 0 (all) or more", limit)
	}
	return nil
}

// CheckPage checks the upto and limit of a RecentSteps call: EINVALID
// naming the field for a limit below 1 or a negative upto.
func CheckPage(upto, limit int) error {
	if limit < 1 {
		return stratus.FieldErrorf(stratus.EINVALID, "limit", "limit %d is below 1; valid: 1 or more steps a page", limit)
	}
	if upto < 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "upto", "upto %d is negative; valid: 0 (the newest page) or a step number 1 or more", upto)
	}
	return nil
}

// PageRange is the range of step numbers lo..hi (1-based, creation
// order) of the RecentSteps page (upto, limit) of a run of total steps;
// hi < lo when the run has none.
func PageRange(total, upto, limit int) (lo, hi int) {
	hi = total
	if upto > 0 && upto < total {
		hi = upto
	}
	return max(hi-limit+1, 1), hi
}

// Heads is NodeLatest over steps already read (in creation order): a
// store that cannot answer from an index of its own answers with it.
func Heads(steps []stratus.Step) []stratus.Step {
	last := map[string]int{}
	for i, st := range steps {
		last[st.Node] = i
	}
	var out []stratus.Step
	for i, st := range steps {
		if last[st.Node] == i {
			out = append(out, st)
		}
	}
	return out
}

// NewestWhere returns the newest step of node in run runID that ok
// accepts (NodeSteps' order: last created first) and found=true; found=
// false when ok accepts none of the node's steps. It reads the node's
// newest few steps (few > 0) first, and all of them only when ok accepts
// none of those: a caller whose step is typically among the last few
// reads those few, however long the run. Errors are NodeSteps'.
func NewestWhere(ctx context.Context, s Store, runID, node string, few int, ok func(stratus.Step) bool) (st stratus.Step, found bool, err error) {
	for limit := few; ; limit = 0 {
		steps, err := s.NodeSteps(ctx, runID, node, limit)
		if err != nil {
			return stratus.Step{}, false, err
		}
		for _, st := range steps {
			if ok(st) {
				return st, true, nil
			}
		}
		if limit == 0 || len(steps) < limit {
			return stratus.Step{}, false, nil
		}
	}
}

// Before returns steps of nodes in run runID newest first: step tid and
// those created before it (every step of nodes when tid is none of
// theirs), up to and including the first step other than tid that stop
// accepts (all of them when it accepts none). It reads the newest few
// (few > 0) first (NodesSteps), and all the nodes' steps only when those
// do not reach tid and a stop: a caller whose stop is typically among the
// last few steps reads those, however long the run. Errors are
// NodesSteps'.
func Before(ctx context.Context, s Store, runID string, nodes []string, tid string, few int, stop func(stratus.Step) bool) ([]stratus.Step, error) {
	for limit := few; ; limit = 0 {
		steps, err := s.NodesSteps(ctx, runID, nodes, limit)
		if err != nil {
			return nil, err
		}
		whole := limit == 0 || len(steps) < limit
		i := slices.IndexFunc(steps, func(st stratus.Step) bool { return st.TID == tid })
		if i < 0 {
			if !whole {
				continue // tid may be older than these
			}
			i = 0
		}
		for j := i; j < len(steps); j++ {
			if steps[j].TID != tid && stop(steps[j]) {
				return steps[i : j+1], nil
			}
		}
		if whole {
			return steps[i:], nil
		}
	}
}
