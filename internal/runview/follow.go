package runview

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
)

// Tracker turns successive reads of a run's records into the progress
// events its worker service emitted (worker.Service.OnEvent): a start per
// attempt of a worker step (a publish step's start when it is not
// skipped), a wait when a hitl step waits, an end when a step ends, and
// the supervisor's turns. Each event is returned once. A Tracker is not
// safe for concurrent use.
type Tracker struct {
	// ReplyFlags are what the reply commands of a wait event need to reach
	// the run from the operator's shell ("--dir DIR", "--target aws …");
	// "" none (worker.Service.ReplyFlags words them the same way).
	ReplyFlags string
	store      store.Store
	runID      string
	seen       map[string]*seen // by step tid
}

type seen struct {
	attempts int // attempts whose start was returned
	started  bool
	waiting  bool
	parked   string // the value of the park last returned (internal/retry)
	retried  int    // the attempt whose retry was last returned (internal/retry)
	ended    bool
	counters counters // of the latest attempt, as last returned
}

// counters are what a running attempt's progress event reports.
type counters struct {
	attempt, steps     int
	prompt, completion int64
	cost               float64
	costKnown          bool
}

// NewTracker returns a tracker of run runID's records in st. Set
// ReplyFlags for the flags its wait events' reply commands need.
func NewTracker(st store.Store, runID string) *Tracker {
	return &Tracker{store: st, runID: runID, seen: map[string]*seen{}}
}

// Skip makes Poll pass over the steps tids (say, those a resumed run had
// before its new execution began): their events are not reported.
func (t *Tracker) Skip(tids ...string) {
	for _, id := range tids {
		t.seen[id] = &seen{ended: true}
	}
}

// Poll reads the run's steps (and the latest attempt of each worker step
// not yet seen ending) and returns the events that happened since the
// previous Poll, in step creation order. Errors: the store's.
func (t *Tracker) Poll(ctx context.Context) ([]worker.Event, error) {
	steps, err := t.store.ListSteps(ctx, t.runID)
	if err != nil {
		return nil, err
	}
	var out []worker.Event
	for _, s := range steps {
		sn := t.seen[s.TID]
		if sn == nil {
			sn = &seen{}
			t.seen[s.TID] = sn
		}
		if sn.ended {
			continue
		}
		var att *stratus.Attempt
		if RunsWorker(s.Kind) {
			if att, err = latest(ctx, t.store, s.TID); err != nil {
				return nil, err
			}
		}
		v := describe(s, att)
		var r *worker.Event
		if att != nil {
			if r, err = t.retried(ctx, sn, s, *att); err != nil {
				return nil, err
			}
		}
		out = append(out, t.step(sn, v, r)...)
	}
	return out, nil
}

// retried is the retry event of step s (worker.EventStepRetrying, as the
// worker service emits it) when its value records an attempt retried
// since the last one returned (internal/retry: the step stays running,
// its value's outcome "retrying"), nil otherwise. latest is the step's
// latest attempt. Errors: the store's.
func (t *Tracker) retried(ctx context.Context, sn *seen, s stratus.Step, latest stratus.Attempt) (*worker.Event, error) {
	var sv worker.StepValue
	if s.Status != stratus.StepRunning || json.Unmarshal(s.Value, &sv) != nil || sv.Outcome != "retrying" || sv.Attempt <= sn.retried || sv.Attempt > latest.N {
		return nil, nil
	}
	att := latest
	if sv.Attempt != latest.N {
		a, err := t.store.GetAttempt(ctx, s.TID, sv.Attempt)
		if err != nil {
			return nil, err
		}
		att = a
	}
	sn.retried = sv.Attempt
	return &worker.Event{Type: worker.EventStepRetrying, RunID: s.RunID, Node: s.Node, StepRef: s.StepRef, TID: s.TID,
		Attempt: att.N, Terminal: att.Terminal, Outcome: sv.Outcome, Reason: sv.Reason, At: att.EndedAt, Duration: att.EndedAt.Sub(att.StartedAt),
		PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD}, nil
}

// step returns the new events of one step; retry, when not nil, is the
// retry of one of its attempts, returned after that attempt's start and
// before the next one's.
func (t *Tracker) step(sn *seen, v StepView, retry *worker.Event) []worker.Event {
	s, att := v.Step, v.Attempt
	base := worker.Event{RunID: s.RunID, Node: s.Node, StepRef: s.StepRef}
	var out []worker.Event
	switch {
	case s.Kind == report.Kind:
		if att != nil && !sn.started {
			sn.started = true
			e := base
			e.Type, e.Node, e.Attempt, e.Reason, e.At = worker.EventSupervisorStarted, v.Job, 1, v.For, att.StartedAt
			out = append(out, e)
		}
	case RunsWorker(s.Kind):
		if att != nil {
			for n := sn.attempts + 1; n <= att.N; n++ {
				if retry != nil && n == retry.Attempt+1 {
					out, retry = append(out, *retry), nil
				}
				e := base
				e.Type, e.Attempt = worker.EventStepStarted, n
				if n == att.N {
					e.At = att.StartedAt
				}
				out = append(out, e)
			}
			if retry != nil {
				out = append(out, *retry)
			}
			sn.attempts = max(sn.attempts, att.N)
			if e, ok := progressed(sn, base, *att); ok {
				out = append(out, e)
			}
		}
	case s.Kind == flow.KindPublish:
		if !sn.started && !(v.Ended() && v.Outcome == worker.OutcomeSkipped) {
			sn.started = true
			e := base
			e.Type, e.At = worker.EventStepStarted, s.CreatedAt
			out = append(out, e)
		}
	}
	if s.Status == worker.StepWaiting && !sn.waiting {
		sn.waiting = true
		out = append(out, waiting(base, s, t.ReplyFlags))
	}
	if s.Status == stratus.StepParked {
		// Once per park (a step parks again after a later attempt).
		if key := string(s.Value); sn.parked != key {
			sn.parked = key
			e := base
			e.Type, e.Reason, e.At = worker.EventStepParked, v.Reason, s.CreatedAt
			if att != nil {
				e.Attempt, e.Terminal, e.At = att.N, att.Terminal, att.EndedAt
			}
			out = append(out, e)
		}
	}
	if v.Ended() {
		sn.ended = true
		out = append(out, ended(base, v))
	}
	return out
}

// progressed is the progress event of a running attempt whose counters
// moved since the last one returned (the runner posted stats:
// README.md § Live progress); elapsed is measured to now.
func progressed(sn *seen, e worker.Event, att stratus.Attempt) (worker.Event, bool) {
	if att.Status != stratus.AttemptRunning {
		return e, false
	}
	c := counters{attempt: att.N, steps: att.Steps, prompt: att.PromptTokens, completion: att.CompletionTokens}
	if att.CostUSD != nil {
		c.cost, c.costKnown = *att.CostUSD, true
	}
	if c == sn.counters || (c.steps == 0 && c.prompt == 0 && c.completion == 0 && !c.costKnown) {
		return e, false
	}
	sn.counters = c
	e.Type, e.At, e.Attempt = worker.EventStepProgress, time.Now(), att.N
	e.Duration = e.At.Sub(att.StartedAt)
	e.Steps, e.PromptTokens, e.CompletionTokens, e.CostUSD = att.Steps, att.PromptTokens, att.CompletionTokens, att.CostUSD
	return e, true
}

// ended is the end event of a step that ended, as the worker service
// emits it (worker: emitEnded, completeNonWorker, failStep, the hitl
// reply, the supervisor's turns).
func ended(e worker.Event, v StepView) worker.Event {
	s, att := v.Step, v.Attempt
	e.Type, e.Outcome, e.Reason, e.At = worker.EventStepEnded, v.Outcome, v.Reason, s.EndedAt
	if s.Kind == report.Kind {
		e.Type, e.Node = worker.EventSupervisorEnded, v.Job
		if v.Outcome == "done" {
			e.Reason = v.For
		}
	}
	if att != nil {
		var sv worker.StepValue
		json.Unmarshal(s.Value, &sv)
		e.Attempt = att.N
		if sv.Attempt != 0 {
			e.Attempt = sv.Attempt
		}
		if e.Attempt == att.N {
			e.Terminal = att.Terminal
			e.PromptTokens, e.CompletionTokens, e.CostUSD = att.PromptTokens, att.CompletionTokens, att.CostUSD
			if !att.EndedAt.IsZero() {
				e.Duration = att.EndedAt.Sub(att.StartedAt)
			}
		}
	}
	if s.Kind == flow.KindHITL {
		e.Reason = oneLine(v.Reason, 200)
		if !s.EndedAt.IsZero() {
			e.Duration = s.EndedAt.Sub(s.CreatedAt)
		}
	}
	return e
}

// waiting is a hitl step's wait event: the request and the commands that
// answer it (as internal/worker words it).
func waiting(e worker.Event, s stratus.Step, flags string) worker.Event {
	var v worker.HITLValue
	json.Unmarshal(s.Value, &v)
	if flags != "" {
		flags = " " + flags
	}
	how := fmt.Sprintf("stratus approve %s %s%s | stratus reject %s %s%s --reason TEXT", s.RunID, s.Node, flags, s.RunID, s.Node, flags)
	if v.Signal == worker.SignalQuestion {
		how = fmt.Sprintf("stratus answer %s %s%s TEXT", s.RunID, s.Node, flags)
	}
	e.Type, e.Outcome, e.At = worker.EventStepWaiting, v.Signal, s.CreatedAt
	e.Reason = fmt.Sprintf("%s: %s — reply with: %s (before %s)", v.Signal, oneLine(v.Request, 300), how, v.Deadline.Format(time.RFC3339))
	return e
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Open returns the tids of run runID's steps still running or waiting.
func Open(ctx context.Context, st store.Store, runID string) (map[string]bool, error) {
	steps, err := st.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	open := map[string]bool{}
	for _, s := range steps {
		if s.Status == stratus.StepRunning || s.Status == worker.StepWaiting || s.Status == stratus.StepParked {
			open[s.TID] = true
		}
	}
	return open, nil
}

// EndEvents returns the end events, as a Tracker reports them, of the
// steps among tids that have been canceled since (a run's open steps
// canceled when it is interrupted or ends: lifecycle.CancelOpen records
// them without the worker service, which emits no event for them; a step
// that ended otherwise had its event from the service).
func EndEvents(ctx context.Context, st store.Store, runID string, tids map[string]bool) ([]worker.Event, error) {
	steps, err := st.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []worker.Event
	for _, s := range steps {
		if !tids[s.TID] || s.Status != stratus.StepCanceled {
			continue
		}
		var att *stratus.Attempt
		if RunsWorker(s.Kind) {
			if att, err = latest(ctx, st, s.TID); err != nil {
				return nil, err
			}
		}
		if v := describe(s, att); v.Ended() {
			out = append(out, ended(worker.Event{RunID: s.RunID, Node: s.Node, StepRef: s.StepRef}, v))
		}
	}
	return out, nil
}
