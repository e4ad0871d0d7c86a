package flow

import (
	"fmt"
	"slices"
)

// loops reports the non-fatal budget findings of
// docs/contracts.md § Fatal validation (last paragraph), which the engine
// degrades gracefully:
//
//   - a budget above agents.max_fix_cycles (with a Config): the engine
//     clamps it to the cap, so part of it is dead;
//   - a non-blocking evaluator whose rework loop (its named loop, clamped
//     to agents.max_fix_cycles, or its inline budget) allows fewer rounds
//     than its max_rework_per_stage: the node then accepts with a warning
//     after the loop's number, so one of the two limits is partly dead;
//   - max_rework_per_stage on a blocking evaluator, where it is ignored.
func (v *validator) loops() {
	f := v.f
	limit := 0
	if v.opt.Config != nil {
		limit = v.opt.Config.Agents.MaxFixCycles
	}
	if limit > 0 {
		names := make([]string, 0, len(f.Budgets))
		for name := range f.Budgets {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if n := f.Budgets[name]; n > limit {
				p := "budgets." + name
				v.add(f.pos(p), p, false, "budget %q is %d, above agents.max_fix_cycles %d in config.yaml: the engine clamps it to %d", name, n, limit, limit)
			}
		}
		for i, e := range f.Edges {
			if e.Budget != nil && *e.Budget > limit {
				v.add(e.pos("budget"), fmt.Sprintf("edges[%d].budget", i), false, "edge %s -> %s budget %d is above agents.max_fix_cycles %d in config.yaml: the engine clamps it to %d",
					e.From, e.To, *e.Budget, limit, limit)
			}
		}
	}
	rework := map[string][]int{} // node id → its rework edges, in flow order
	for j, e := range f.Edges {
		if e.Outcome == "rework" {
			rework[e.From] = append(rework[e.From], j)
		}
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.Kind != KindEvaluator || n.ID == "" {
			continue
		}
		if n.Blocking == nil || *n.Blocking {
			if n.MaxReworkPerStage != nil {
				v.add(n.pos("max_rework_per_stage"), fmt.Sprintf("nodes[%d].max_rework_per_stage", i), false,
					"%s max_rework_per_stage is ignored: the evaluator is blocking, so its rework loop is bounded by the loop budget and then parks to manual (set blocking: false to use it)", label(n))
			}
			continue
		}
		rounds, from := 1, "the default"
		if n.MaxReworkPerStage != nil {
			rounds, from = *n.MaxReworkPerStage, "its own"
		} else if d := f.Defaults; d != nil && d.Evaluator != nil && d.Evaluator.MaxReworkPerStage != nil {
			rounds, from = *d.Evaluator.MaxReworkPerStage, "defaults.evaluator"
		}
		for _, j := range rework[n.ID] {
			e := f.Edges[j]
			var budget int
			var what string
			raise := "raise the budget"
			switch {
			case e.Budget != nil:
				budget, what = *e.Budget, fmt.Sprintf("its inline budget %d", *e.Budget)
			case e.Loop != "":
				b, ok := f.Budgets[e.Loop]
				if !ok {
					continue // reported as fatal by edges
				}
				budget, what = b, fmt.Sprintf("loop %q (budgets.%s %d)", e.Loop, e.Loop, b)
				if limit > 0 && b > limit {
					budget, what = limit, fmt.Sprintf("loop %q (budgets.%s %d, clamped to agents.max_fix_cycles %d)", e.Loop, e.Loop, b, limit)
					raise = "raise agents.max_fix_cycles"
				}
			default:
				continue // unbounded: fatal in edges
			}
			if budget < rounds {
				key := "loop"
				if e.Budget != nil {
					key = "budget"
				}
				v.add(e.pos(key), fmt.Sprintf("edges[%d].%s", j, key), false,
					"non-blocking %s allows %d rework rounds (max_rework_per_stage, %s), but its rework edge to %q is bounded by %s: it accepts with a warning after %d, so %d of its rounds can never happen; lower max_rework_per_stage or %s",
					label(n), rounds, from, e.To, what, budget, rounds-budget, raise)
			}
		}
	}
}
