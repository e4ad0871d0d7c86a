package supervisor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

// Observe modes (docs/contracts.md § What observe.mode costs), narrowest
// first.
const (
	ModeNone     = "none"
	ModeEvents   = "events"
	ModeSelected = "selected"
	ModeAll      = "all"
)

// Triggers of mode events.
const (
	TriggerRework   = "rework"
	TriggerFailure  = "failure"
	TriggerFallback = "fallback"
)

func rank(mode string) int { return slices.Index(config.ObserveModes, mode) }

// EffectiveMode is the observe cadence of a run: the config's
// supervisor.observe.mode narrowed by the flow's supervisor.observe.mode —
// the narrower of the two (docs/contracts.md § What observe.mode costs: "A
// flow may narrow the cadence … but never widen it"; refusing a widening flow is flow validation's job, so a
// wider flow mode here simply does not widen). An empty or unknown mode on
// either side leaves the other; both empty is events.
func EffectiveMode(configMode, flowMode string) string {
	m := configMode
	if rank(m) < 0 {
		m = ModeEvents
	}
	if r := rank(flowMode); r >= 0 && r < rank(m) {
		m = flowMode
	}
	return m
}

// FlowMode is the flow's supervisor.observe.mode ("" when it states none).
func FlowMode(fl *flow.Flow) string {
	if fl == nil || fl.Supervisor == nil || fl.Supervisor.Observe == nil {
		return ""
	}
	return fl.Supervisor.Observe.Mode
}

// NarrowingWarning is the warning a run says once at its start when the
// flow narrows the config's observe mode
// (docs/contracts.md § What observe.mode costs: "naming both modes and, when
// the flow lands on none, the triggers that stop applying"), or "" when it
// does not — including when the layer is off, since there is then no cadence
// to narrow.
func NarrowingWarning(cfg config.Supervisor, fl *flow.Flow) string {
	if !cfg.On() {
		return ""
	}
	fm := FlowMode(fl)
	cm := cfg.Observe.Mode
	if cm == "" {
		cm = ModeEvents
	}
	eff := EffectiveMode(cm, fm)
	if eff == cm {
		return ""
	}
	msg := fmt.Sprintf("flow %s narrows supervisor.observe.mode from %s (config.yaml) to %s (the flow's supervisor.observe.mode)", fl.TaskType, cm, eff)
	if eff == ModeNone {
		switch {
		case cm == ModeEvents && len(cfg.Observe.Triggers) > 0:
			msg += fmt.Sprintf("; the triggers %s stop applying", strings.Join(cfg.Observe.Triggers, ", "))
		case cm == ModeSelected && len(cfg.Observe.IncludeNodes) > 0:
			msg += fmt.Sprintf("; include_nodes %s stop applying", strings.Join(cfg.Observe.IncludeNodes, ", "))
		}
		msg += "; no step is observed, and the finalize turn still writes the summary"
	}
	return msg
}

// StepEnd is what the observe decision reads of a step that just ended.
type StepEnd struct {
	Node    string
	Kind    string // the node kind
	Outcome string // accept, rework, done, failed, invalid, skipped, …
	// Failed: the step's run failed (status failed, or the evaluator's
	// report broke the contract).
	Failed bool
	// AcceptedOpen: an evaluator accepted with gating findings still open
	// after spending its rework budget.
	AcceptedOpen bool
	// Fallback: the step ran on a provider other than the one it was routed
	// to (a degradation recorded for it).
	Fallback bool
}

// neverObserved are the kinds no mode observes: their result is already a
// durable fact the finalize packet carries verbatim
// (docs/contracts.md § What observe.mode costs), plus the supervisor's own
// turns.
var neverObserved = []string{flow.KindTool, flow.KindChecks, flow.KindPublish, report.Kind}

// Decide says whether a step that just ended earns an observation under
// mode (the run's EffectiveMode), with the why an observation prompt
// states (docs/contracts.md § What observe.mode costs):
//
//   - tool, checks, publish and supervisor turns: never; a skipped step
//     did not execute: never;
//   - none: never; all: every executed step;
//   - selected: exactly the nodes in include;
//   - events: a deviation whose trigger is in triggers — rework (an
//     evaluator sending work back, or accepting after exhausting its rework
//     budget), failure (a step whose run failed), fallback (a step that ran
//     on a provider other than the one routed to).
func Decide(mode string, triggers, include []string, e StepEnd) (bool, string) {
	if slices.Contains(neverObserved, e.Kind) || e.Outcome == "skipped" {
		return false, ""
	}
	switch mode {
	case ModeAll:
		return true, "observe.mode is all: every executed step is observed"
	case ModeSelected:
		if slices.Contains(include, e.Node) {
			return true, fmt.Sprintf("observe.mode is selected and %s is in include_nodes", e.Node)
		}
		return false, ""
	case ModeEvents:
		on := func(t string) bool { return slices.Contains(triggers, t) }
		switch {
		case e.Outcome == "rework" && on(TriggerRework):
			return true, "deviation (rework): the evaluator sent the work back"
		case e.AcceptedOpen && on(TriggerRework):
			return true, "deviation (rework): the evaluator accepted after exhausting its rework budget, with gating findings still open"
		case e.Failed && on(TriggerFailure):
			return true, "deviation (failure): the step's run failed"
		case e.Fallback && on(TriggerFallback):
			return true, "deviation (fallback): the step ran on a provider other than the one it was routed to"
		}
	}
	return false, ""
}
