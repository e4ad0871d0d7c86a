package core

import (
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
)

// EvaluatorPolicy is an evaluator node's gate after flow.defaults.evaluator
// fills the fields it omits (worc reference.md § defaults.evaluator, §
// evaluator node).
type EvaluatorPolicy struct {
	Gate      string // gate_severity: the least severe finding that gates (default high)
	Blocking  bool   // blocking (default true): rework loops through the named-loop budget
	MaxRework int    // max_rework_per_stage (default 1); only a non-blocking node uses it
}

// PolicyOf returns the evaluator policy of node n of flow f: the node's
// own field, else the flow's defaults.evaluator, else the built-in default.
// blocking has no flow default (reference.md lists none).
func PolicyOf(f *flow.Flow, n *flow.Node) EvaluatorPolicy {
	p := EvaluatorPolicy{Gate: n.GateSeverity, Blocking: n.Blocking == nil || *n.Blocking, MaxRework: 1}
	var d *flow.EvaluatorDefaults
	if f.Defaults != nil {
		d = f.Defaults.Evaluator
	}
	if p.Gate == "" && d != nil {
		p.Gate = d.GateSeverity
	}
	if p.Gate == "" {
		p.Gate = findings.DefaultGate
	}
	switch {
	case n.MaxReworkPerStage != nil:
		p.MaxRework = *n.MaxReworkPerStage
	case d != nil && d.MaxReworkPerStage != nil:
		p.MaxRework = *d.MaxReworkPerStage
	}
	return p
}
