package flow

import (
	"fmt"
	"slices"
	"strings"
)

// routing reports the flows that pass worc's graph rules but cannot route
// as written:
//
//   - a terminal gate — an evaluator, checks or tool node with no
//     outgoing edge — ends the run done only on its pass outcome
//     (PassOutcome); any other parks it at manual_action_required (the
//     compiled machine fails closed). A warning, so the author sees that
//     a failing gate there does not end the run done. hitl nodes are left
//     out: a question's only outcome is done, and an approval without its
//     route:approve / route:deny edges is fatal already.
//   - an evaluator, checks or hitl question node whose outgoing edges are
//     all route:<label>: these kinds never emit a route label (evaluator:
//     accept, rework; checks: pass, fail; question: done), so every visit
//     parks the run. Fatal. When such a node has other edges too, each
//     route:<label> edge is dead: a warning.
//   - a `when.equals` that is not a boolean: the facts are booleans, so a
//     string "true"/"false" only matches by its text, and anything else
//     never matches: the node is then always skipped. A warning.
//   - a budget declared in budgets that no edge names (nor the global
//     backstop, nor decomposition.shared_budget): a warning.
func (v *validator) routing() {
	f := v.f
	outs := map[string][]Edge{}
	used := map[string]bool{}
	for _, e := range f.Edges {
		outs[e.From] = append(outs[e.From], e)
		if e.Loop != "" {
			used[e.Loop] = true
		}
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.ID == "" {
			continue
		}
		out := outs[n.ID]
		pass := PassOutcome(n)
		switch {
		case pass == "" || n.Kind == KindHITL:
		case len(out) == 0:
			v.add(n.Pos, fmt.Sprintf("nodes[%d]", i), false,
				"%s is a terminal gate: only its %s outcome ends done; any other (%s) parks the run at manual_action_required (give the others an edge, or end the flow on a publish node)",
				label(n), pass, otherOutcomes(n))
		}
		if !neverRoutes(n) || len(out) == 0 {
			continue
		}
		var dead []int
		for _, e := range out {
			if strings.HasPrefix(e.Outcome, "route:") {
				dead = append(dead, e.Index)
			}
		}
		switch {
		case len(dead) == 0:
		case len(dead) == len(out):
			v.add(n.Pos, fmt.Sprintf("nodes[%d]", i), true,
				"%s (%s) only has route:<label> edges, but it emits %s and never a route label: no edge can ever be taken, so every visit parks the run; route its own outcomes",
				label(n), kindLabel(n), emitted(n))
		default:
			for _, j := range dead {
				e := &f.Edges[j]
				v.add(e.pos("outcome"), fmt.Sprintf("edges[%d].outcome", j), false,
					"edge %s -> %s on %s can never be taken: %s (%s) emits %s, never a route label", e.From, e.To, e.Outcome, label(n), kindLabel(n), emitted(n))
			}
		}
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.When == nil || n.When.Fact == "" || n.When.Equals == nil {
			continue
		}
		if _, ok := n.When.Equals.(bool); ok {
			continue
		}
		p := fmt.Sprintf("nodes[%d].when.equals", i)
		text := strings.ToLower(fmt.Sprint(n.When.Equals))
		if text == "true" || text == "false" {
			v.add(n.pos("when.equals"), p, false, "%s when.equals is %#v, not a boolean; the facts are booleans, so it only matches by its text: write equals: %s", label(n), n.When.Equals, text)
		} else {
			v.add(n.pos("when.equals"), p, false, "%s when.equals is %#v, which no fact ever equals (the facts are booleans): the node is always skipped; want equals: true or false", label(n), n.When.Equals)
		}
	}
	if g := GlobalBudgetName(f); g != "" {
		used[g] = true
	}
	names := make([]string, 0, len(f.Budgets))
	for name := range f.Budgets {
		if !used[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := "budgets." + name
		why := "no edge names it as its loop"
		if name == GlobalBudget {
			why += ", and decomposition.shared_budget names the global backstop instead"
		}
		v.add(f.pos(p), p, false, "budget %q is never used: %s; drop it or name it on a fail/rework edge (loop: %s)", name, why, name)
	}
}

// neverRoutes reports whether n is a kind that never emits route:<label>.
func neverRoutes(n *Node) bool {
	return n.Kind == KindEvaluator || n.Kind == KindChecks || (n.Kind == KindHITL && n.Signal == "question")
}

func kindLabel(n *Node) string {
	if n.Kind == KindHITL && n.Signal != "" {
		return "hitl " + n.Signal
	}
	return n.Kind
}

// emitted lists the outcomes a kind that never routes by label emits.
func emitted(n *Node) string {
	if n.Kind == KindHITL {
		return "done"
	}
	return strings.Join(kindOutcomes[n.Kind], " or ")
}

// otherOutcomes names what a terminal gate may emit besides its pass
// outcome.
func otherOutcomes(n *Node) string {
	switch n.Kind {
	case KindEvaluator:
		return "rework, or an invalid report"
	case KindChecks:
		return "fail"
	}
	return "fail, or a route:<label> it prints"
}
