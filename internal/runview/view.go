package runview

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
)

// View is one run as its store records show it.
type View struct {
	Run   stratus.Run
	Steps []StepView // creation order; supervisor turns included (Step.Kind == report.Kind)
	// Total is how many steps the run has; First the number (from 1, in
	// creation order) of Steps[0]. A view of the whole run (Load) has
	// First 1 and Total len(Steps); a page (LoadPage) the steps First to
	// First+len(Steps)-1 of Total.
	Total, First int
	// Heads are each node's latest step (store.Store.NodeLatest), in
	// creation order, whatever page Steps is: what says whether the run
	// waits (Waiting) and colours a flow graph.
	Heads []stratus.Step
	// NotRecorded, set by LoadReconciled, says the run was found
	// interrupted (its owner gone) but the store refused to record it: Run
	// and Steps show it interrupted all the same.
	NotRecorded error
}

// StepView is one step with what its records say of its end.
type StepView struct {
	Step stratus.Step
	// Attempt is the step's latest attempt; nil for a step no worker ran
	// (publish, hitl, a skipped node, a dispatch that failed first).
	Attempt *stratus.Attempt
	// Attempts are all the step's attempts, the first first (the latest
	// is Attempt): each failed one with its failure class
	// (internal/failclass). Empty when Attempt is nil.
	Attempts []stratus.Attempt
	// Outcome is the step's verdict (accept, rework, done, skipped, ...),
	// "failed" for a failed step, "" while it runs.
	Outcome string
	// Reason says why a step failed, was skipped or routed as it did
	// (the value's reason; a hitl step's answer).
	Reason string
	// Job and For name a supervisor turn's job and the step it is about.
	Job, For string
}

// Ended reports whether the step has ended (a canceled step too).
func (s StepView) Ended() bool {
	return s.Step.Status == stratus.StepCompleted || s.Step.Status == stratus.StepFailed || s.Step.Status == stratus.StepCanceled
}

// Span is when the step ran: the one definition of a step's duration
// that `stratus status`, the run viewer's step table and its timeline
// all show (the table once measured from the step's creation, before its
// worker was dispatched, to the step's end, and read twice the others'
// figure for a short step). For a step a worker ran it is its latest
// attempt's: the attempt's start (its dispatch) to its end, or to the
// step's end when the attempt has none (canceled, or its process gone);
// for a step no worker ran (publish, a hitl wait), the step's own span,
// created to ended. end is zero while the step runs.
func (s StepView) Span() (start, end time.Time) {
	start, end = s.Step.CreatedAt, s.Step.EndedAt
	if a := s.Attempt; a != nil && !a.StartedAt.IsZero() {
		start = a.StartedAt
		if !a.EndedAt.IsZero() {
			end = a.EndedAt
		}
	}
	return start, end
}

// Took is the length of Span, measured to now while the step runs;
// never negative.
func (s StepView) Took(now time.Time) time.Duration {
	start, end := s.Span()
	if end.IsZero() {
		end = now
	}
	return max(end.Sub(start), 0)
}

// PageSteps is how many steps a reader shows of a run unless asked for
// more: its newest (store.Store.RecentSteps), so that a reader of a
// 1,000-step run answers in the time of a short one (README.md §
// Performance). A run of at most PageSteps steps is shown whole.
const PageSteps = 20

// Page selects the steps a view reads: those numbered Upto-Limit+1 to
// Upto in creation order (Upto 0: to the newest), every step when Limit
// is 0.
type Page struct {
	Upto, Limit int
}

// All is the Page of every step.
var All = Page{}

// Newest is the Page of the run's newest PageSteps steps.
var Newest = Page{Limit: PageSteps}

// Earlier is how many of the run's steps come before the view's.
func (v *View) Earlier() int { return max(v.First-1, 0) }

// Later is how many of the run's steps come after the view's.
func (v *View) Later() int {
	if len(v.Steps) == 0 {
		return 0
	}
	return max(v.Total-(v.First+len(v.Steps)-1), 0)
}

// Waiting reports whether the run, recorded running, waits for a human
// or a provider (lifecycle.Waiting): one node's latest step waits.
func (v *View) Waiting() bool {
	return v.Run.Status == stratus.RunRunning && lifecycle.Waiting(v.Heads)
}

// Load reads run runID and all its steps, each with its attempts (a
// step's earlier attempts are read only when it has more than one).
// Errors: the store's (ENOTFOUND for an unknown run).
func Load(ctx context.Context, st store.Store, runID string) (*View, error) {
	return LoadPage(ctx, st, runID, All)
}

// LoadPage is Load of the steps p selects: with a Limit, the store reads
// that page (store.Store.RecentSteps) and each node's latest step
// (store.Store.NodeLatest), the attempts of the page's steps only — what
// it reads does not grow with the run (README.md § Performance). Errors:
// the store's (ENOTFOUND for an unknown run, EINVALID for a negative
// Upto or Limit).
func LoadPage(ctx context.Context, st store.Store, runID string, p Page) (*View, error) {
	if p.Limit < 0 {
		return nil, store.CheckPage(p.Upto, p.Limit)
	}
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	v := &View{Run: run}
	var steps []stratus.Step
	if p.Limit == 0 {
		if steps, err = st.ListSteps(ctx, runID); err != nil {
			return nil, err
		}
		v.Total, v.Heads = len(steps), store.Heads(steps)
		if len(steps) > 0 {
			v.First = 1
		}
	} else {
		if steps, v.Total, err = st.RecentSteps(ctx, runID, p.Upto, p.Limit); err != nil {
			return nil, err
		}
		if len(steps) > 0 {
			v.First, _ = store.PageRange(v.Total, p.Upto, p.Limit)
		}
		if v.Total <= len(steps) {
			v.Heads = store.Heads(steps) // the whole run: no read more
		} else if v.Heads, err = st.NodeLatest(ctx, runID); err != nil {
			return nil, err
		}
	}
	for _, s := range steps {
		var att *stratus.Attempt
		var all []stratus.Attempt
		if RunsWorker(s.Kind) {
			if att, err = latest(ctx, st, s.TID); err != nil {
				return nil, err
			}
			if all, err = attempts(ctx, st, att); err != nil {
				return nil, err
			}
		}
		sv := describe(s, att)
		sv.Attempts = all
		v.Steps = append(v.Steps, sv)
	}
	return v, nil
}

// LoadReconciled is LoadPage of run runID as it truly stands
// (lifecycle.Reconcile): a run whose owner is gone reads interrupted, its
// open steps canceled, and is recorded so. When the store refuses that
// record (a full disk), the view shows it reconciled all the same and
// NotRecorded says why; the records are left for the next reader to
// reconcile (docs/security.md § Output that did not persist). Errors: the
// store's reads (ENOTFOUND for an unknown run).
func LoadReconciled(ctx context.Context, st store.Store, runID string, p Page) (*View, error) {
	run, err := st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	run, rerr := lifecycle.Reconcile(ctx, st, run)
	v, err := LoadPage(ctx, st, runID, p)
	if err != nil {
		return nil, err
	}
	if rerr == nil {
		return v, nil
	}
	v.Run.Status, v.Run.EndedAt, v.NotRecorded = run.Status, run.EndedAt, rerr
	steps := make([]stratus.Step, len(v.Steps))
	atts := make([]*stratus.Attempt, len(v.Steps))
	for i, s := range v.Steps {
		steps[i], atts[i] = s.Step, s.Attempt
	}
	steps, atts = lifecycle.ReconciledSteps(steps, atts, run.EndedAt)
	for i := range v.Steps {
		v.Steps[i] = describe(steps[i], atts[i])
	}
	v.Heads, _ = lifecycle.ReconciledSteps(v.Heads, make([]*stratus.Attempt, len(v.Heads)), run.EndedAt)
	return v, nil
}

// NotRecordedNote is what a reader says of a run it shows reconciled that
// its store would not record (LoadReconciled's NotRecorded, List's).
func NotRecordedNote(err error) string {
	return fmt.Sprintf("%v; it reads interrupted all the same, and the next command that reads it records that once the store takes it (free space)", err)
}

// RunsWorker reports whether steps of kind launch a worker (and so have
// attempts): agent, evaluator, checks, tool and the supervisor's turns.
func RunsWorker(kind string) bool {
	switch kind {
	case flow.KindAgent, flow.KindEvaluator, flow.KindChecks, flow.KindTool, report.Kind:
		return true
	}
	return false
}

// latest is the step's latest attempt, nil when it has none.
func latest(ctx context.Context, st store.Store, tid string) (*stratus.Attempt, error) {
	a, err := st.LatestAttempt(ctx, tid)
	switch {
	case stratus.ErrorCode(err) == stratus.ENOTFOUND:
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &a, nil
}

// attempts are the attempts 1..latest.N of latest's task, nil for nil; an
// attempt number no record holds is left out.
func attempts(ctx context.Context, st store.Store, latest *stratus.Attempt) ([]stratus.Attempt, error) {
	if latest == nil {
		return nil, nil
	}
	var out []stratus.Attempt
	for n := 1; n < latest.N; n++ {
		a, err := st.GetAttempt(ctx, latest.TID, n)
		switch {
		case stratus.ErrorCode(err) == stratus.ENOTFOUND:
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, a)
	}
	return append(out, *latest), nil
}

func describe(s stratus.Step, att *stratus.Attempt) StepView {
	v := StepView{Step: s, Attempt: att, Outcome: s.Verdict}
	if s.Kind == report.Kind {
		var sv report.SupervisorValue
		json.Unmarshal(s.Value, &sv)
		v.Job, v.For, v.Reason = sv.Job, sv.ForRef, sv.Reason
		if v.Outcome == "" {
			v.Outcome = sv.Outcome
		}
	} else {
		var sv worker.StepValue
		json.Unmarshal(s.Value, &sv)
		v.Reason = sv.Reason
		if v.Outcome == "" && s.Status != stratus.StepRunning && s.Status != worker.StepWaiting && s.Status != stratus.StepParked {
			v.Outcome = sv.Outcome
		}
		if s.Kind == flow.KindHITL {
			var hv worker.HITLValue
			if json.Unmarshal(s.Value, &hv) == nil && hv.Answer != "" {
				v.Reason = hv.Answer
			}
		}
	}
	if v.Outcome == "" && s.Status == stratus.StepFailed {
		v.Outcome = "failed"
	}
	return v
}

// Describe is step s as a view shows it, with its latest attempt when
// it ran a worker (its earlier attempts are not read): what a reader
// shows of a step outside its page, such as a node's latest
// (View.Heads). Errors: the store's.
func Describe(ctx context.Context, st store.Store, s stratus.Step) (StepView, error) {
	var att *stratus.Attempt
	if RunsWorker(s.Kind) {
		var err error
		if att, err = latest(ctx, st, s.TID); err != nil {
			return StepView{}, err
		}
	}
	return describe(s, att), nil
}

// StepOf is step s as a view shows it without its attempts: its status,
// outcome and reason, from the step record alone.
func StepOf(s stratus.Step) StepView { return describe(s, nil) }
