package flow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The names of the compiled state machine (internal/compiler), kept here
// so that Validate reports what Compile would reject — a state name over
// the Step Functions limit, two loops counting in one $.loops member —
// with the same rule Compile names them by (validate ok must
// mean compile ok).

// MaxStateName is the Step Functions limit on a state name, in characters.
const MaxStateName = 80

// ResumeState is the name of the compiled machine's entry state, a Choice
// on $.resume_at (internal/compiler.ResumeState); "run.resume" when a node
// takes the name.
const ResumeState = "resume"

// GlobalBudget is the budget the global backstop counts in when the flow's
// decomposition names no shared_budget (worc configuration.md § agents:
// a hard global fix cap across the whole task and all subtasks).
const GlobalBudget = "global_fix_iterations"

var unsafeCounter = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_]`) })

// CounterName is the $.loops member a loop name (or an inline budget's
// "<from>_<outcome>", or an agent's "<id>_hitl") counts in: a JSONPath
// member name, so every character outside [A-Za-z0-9_] becomes '_'. Two
// loops "a b" and "a_b" therefore share a member, which Validate rejects.
func CounterName(s string) string { return unsafeCounter().ReplaceAllString(s, "_") }

// EdgeCounter returns the $.loops member an edge charges — its loop's, or
// "<from>_<outcome>" for an inline budget — or "" for an edge that is not
// budgeted, and what the member stands for (for collision messages).
func EdgeCounter(e Edge) (counter, source string) {
	switch {
	case e.Loop != "":
		return CounterName(e.Loop), fmt.Sprintf("loop %q", e.Loop)
	case e.Budget != nil:
		return CounterName(e.From + "_" + e.Outcome), fmt.Sprintf("the inline budget of edge %s -> %s (%s)", e.From, e.To, e.Outcome)
	}
	return "", ""
}

// AsksHuman reports whether n is an agent that may ask a human
// (reference.md § agent node: hitl).
func AsksHuman(n *Node) bool {
	return n.Kind == KindAgent && n.HITL != nil && (n.HITL.AllowQuestion || n.HITL.AllowApproval)
}

// HITLCounter is the $.loops member bounding an agent's hitl rounds.
func HITLCounter(id string) string { return CounterName(id + "_hitl") }

// GlobalBudgetName is the budget of the global backstop: the one
// decomposition.shared_budget names, else GlobalBudget when budgets
// declares it, else "" (none).
func GlobalBudgetName(f *Flow) string {
	if d := f.Decomposition; d != nil && d.SharedBudget != "" {
		return d.SharedBudget
	}
	if _, ok := f.Budgets[GlobalBudget]; ok {
		return GlobalBudget
	}
	return ""
}

// LoopStateNames names the pair of states in front of target that check
// and charge counter: "<counter>.budget" and "<counter>.count", suffixed
// ".<target>" when the counter feeds more than one target (targets is how
// many distinct targets it feeds).
func LoopStateNames(counter, target string, targets int) (check, charge string) {
	check, charge = counter+".budget", counter+".count"
	if targets > 1 {
		check += "." + target
		charge += "." + target
	}
	return check, charge
}

// PassOutcome is the outcome with which a gate lets the run through
// (reference.md § Edges, § hitl node): "accept" for an evaluator, "pass"
// for checks and tool, "route:approve" for a hitl approval, "done" for a
// hitl question. Agents and publish nodes do not gate: "". A gate that is
// skipped (task nodes.<id>.enabled: false, a false `when`) completes with
// this outcome, and a gate with no outgoing edge ends the run done on it
// alone (any other outcome parks the run).
func PassOutcome(n *Node) string {
	switch n.Kind {
	case KindEvaluator:
		return "accept"
	case KindChecks, KindTool:
		return "pass"
	case KindHITL:
		if n.Signal == "approval" {
			return "route:approve"
		}
		return "done"
	}
	return ""
}

// StateNames lists the name of every state Compile emits for f, in no
// particular order; the terminals done, failed and manual_action_required
// (or run.<name>) are listed whether or not some state routes to them.
// It mirrors the compiler's naming (compiler.Compile documents the shape)
// and is meaningful for a flow without fatal problems.
func StateNames(f *Flow) []string {
	var out []string
	for _, s := range compiledStates(f).states {
		out = append(out, s.name)
	}
	return out
}

// compiledState is one state name of the compiled machine and the field
// of the flow it derives from, for problems.
type compiledState struct {
	name string
	pos  Pos
	path string
	from string // what to shorten, for the message
}

// counterClash is two things counting in one $.loops member.
type counterClash struct {
	pos          Pos
	path         string
	prev, source string
	counter      string
}

type compiledPlan struct {
	states  []compiledState
	clashes []counterClash
}

// compiledStates mirrors compiler.plan and compiler.machine: the state
// names and the counter collisions.
func compiledStates(f *Flow) compiledPlan {
	var p compiledPlan
	add := func(name string, pos Pos, path, from string) {
		p.states = append(p.states, compiledState{name: name, pos: pos, path: path, from: from})
	}
	fixed := func(base string) string {
		if f.Node(base) != nil {
			return "run." + base
		}
		return base
	}
	for _, base := range []string{ResumeState, "init", "done", "failed", "manual_action_required"} {
		add(fixed(base), f.Pos, "", "")
	}

	// The decomposition region and its entry.
	var region map[string]bool
	regionEntry := ""
	if d := f.Decomposition; d != nil {
		add("init.subtask", f.pos("decomposition"), "decomposition", "")
		region = map[string]bool{}
		for _, id := range d.SubFlow {
			region[id] = true
		}
		for _, e := range f.Out(d.ProposedBy) {
			if region[e.To] {
				regionEntry = e.To
				break
			}
		}
	}

	// Counters: the global backstop, each budgeted edge, each hitl grant.
	sources := map[string]string{}
	targets := map[string][]string{}
	inside := map[string]bool{}
	type origin struct {
		pos          Pos
		path         string
		one, several string // what to shorten: the counter feeds one target, or several
	}
	first := map[[2]string]origin{} // (counter, target) → the field that made it
	var pairs [][2]string
	claim := func(counter, source string, pos Pos, path string) {
		if prev, ok := sources[counter]; ok && prev != source {
			p.clashes = append(p.clashes, counterClash{pos: pos, path: path, prev: prev, source: source, counter: counter})
			return
		}
		sources[counter] = source
	}
	charge := func(counter, target string, in bool, o origin) {
		if !slices.Contains(targets[counter], target) {
			targets[counter] = append(targets[counter], target)
		}
		if prev, ok := inside[counter]; ok {
			in = in && prev
		}
		inside[counter] = in
		k := [2]string{counter, target}
		if _, ok := first[k]; !ok {
			first[k] = o
			pairs = append(pairs, k)
		}
	}
	global := ""
	if g := GlobalBudgetName(f); g != "" {
		global = CounterName(g)
		path := "budgets." + g
		if d := f.Decomposition; d != nil && d.SharedBudget == g {
			path = "decomposition.shared_budget"
		}
		claim(global, fmt.Sprintf("loop %q", g), f.pos(path), path)
	}
	for i, e := range f.Edges {
		counter, source := EdgeCounter(e)
		if counter == "" {
			continue
		}
		o := origin{one: fmt.Sprintf("loop name %q", e.Loop), several: fmt.Sprintf("loop name %q or node id %q", e.Loop, e.To)}
		key := "loop"
		if e.Loop == "" {
			key = "budget"
			o.one = fmt.Sprintf("node id %q or the outcome %q of this inline-budget edge", e.From, e.Outcome)
			o.several = o.one
		}
		o.pos, o.path = e.pos(key), fmt.Sprintf("edges[%d].%s", i, key)
		claim(counter, source, o.pos, o.path)
		charge(counter, e.To, region[e.From] && region[e.To], o)
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if !AsksHuman(n) {
			continue
		}
		counter, path := HITLCounter(n.ID), fmt.Sprintf("nodes[%d].hitl", i)
		claim(counter, fmt.Sprintf("the hitl rounds of node %q", n.ID), n.pos("hitl"), path)
		from := fmt.Sprintf("node id %q", n.ID)
		charge(counter, n.ID, region[n.ID], origin{n.pos("hitl"), path, from, from})
	}
	// stateOf is the state an edge enters: the budget check in front of
	// its target when it is budgeted.
	stateOf := func(e Edge) string {
		if counter, _ := EdgeCounter(e); counter != "" {
			check, _ := LoopStateNames(counter, e.To, len(targets[counter]))
			return check
		}
		return e.To
	}
	for _, k := range pairs {
		o, n := first[k], len(targets[k[0]])
		check, count := LoopStateNames(k[0], k[1], n)
		from := o.one
		if n > 1 {
			from = o.several
		}
		add(check, o.pos, o.path, from)
		add(count, o.pos, o.path, from)
	}

	// Per node: its Task, its stop and park states, its route, its hitl
	// wait, its decomposition choice.
	outs := map[string][]Edge{}
	for _, e := range f.Edges {
		outs[e.From] = append(outs[e.From], e)
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		pos, path, from := n.pos("id"), fmt.Sprintf("nodes[%d].id", i), fmt.Sprintf("node id %q", n.ID)
		add(n.ID, pos, path, from)
		switch n.Kind {
		case KindAgent, KindEvaluator, KindChecks, KindTool:
			add(n.ID+".stop", pos, path, from)
			add(n.ID+".park", pos, path, from)
			add(n.ID+".wait", pos, path, from)
		}
		out := outs[n.ID]
		routed := slices.ContainsFunc(out, func(e Edge) bool { return e.Outcome != "" })
		if n.Kind != KindPublish && (routed || (len(out) == 0 && PassOutcome(n) != "")) {
			add(n.ID+".route", pos, path, from)
		}
		if AsksHuman(n) {
			add(n.ID+".human_input", pos, path, from)
			add(n.ID+".hitl", pos, path, from)
			add(n.ID+".hitl.route", pos, path, from)
		}
		if d := f.Decomposition; d != nil && d.ProposedBy == n.ID && regionEntry != "" {
			add(n.ID+".decompose", pos, path, from)
			add("decompose.start", pos, path, from)
		}
	}

	// Leaving the decomposition region: "decompose.more[.<state>]" per
	// distinct entry state of an exit edge, then the cursor's states.
	if region != nil && regionEntry != "" {
		var keys []string
		var exits []int
		for i, e := range f.Edges {
			if region[e.From] && !region[e.To] {
				if t := stateOf(e); !slices.Contains(keys, t) {
					keys = append(keys, t)
					exits = append(exits, i)
				}
			}
		}
		for j, k := range keys {
			name := "decompose.more"
			if len(keys) > 1 {
				name += "." + k
			}
			e := f.Edges[exits[j]]
			key := "to"
			if e.Loop != "" {
				key = "loop"
			} else if e.Budget != nil {
				key = "budget"
			}
			add(name, e.pos(key), fmt.Sprintf("edges[%d].%s", exits[j], key), fmt.Sprintf("the name of the state edge %s -> %s leaves the decomposition region by (%q)", e.From, e.To, k))
		}
		if len(keys) > 0 {
			add("decompose.next", f.pos("decomposition"), "decomposition", "")
			shared := CounterName(f.Decomposition.SharedBudget)
			for k, in := range inside {
				if in && k != global && k != shared {
					add("decompose.reset", f.pos("decomposition"), "decomposition", "")
					break
				}
			}
		}
	}
	return p
}

// compiledNames reports, fatally, what Compile rejects by name: two
// things counting in one $.loops member (loops whose names differ only in
// characters outside [A-Za-z0-9_], a loop named like an inline budget's
// "<from>_<outcome>" or an agent's "<id>_hitl"), and a state name longer
// than MaxStateName (a long loop name, node id or route label). Each
// field at fault is reported once.
func (v *validator) compiledNames() {
	p := compiledStates(v.f)
	for _, c := range p.clashes {
		v.add(c.pos, c.path, true, "%s and %s both count in $.loops.%s; rename one (counters are the names with every character outside [A-Za-z0-9_] made '_')",
			c.prev, c.source, c.counter)
	}
	reported := map[string]bool{}
	for _, s := range p.states {
		n := len([]rune(s.name))
		if n <= MaxStateName || reported[s.path] || strings.HasSuffix(s.path, ".id") {
			continue // a node's own states stay under the limit unless its id is invalid, which nodes() reports
		}
		reported[s.path] = true
		what := "the node id or loop name"
		if s.from != "" {
			what = s.from
		}
		v.add(s.pos, s.path, true, "state name %q is longer than %d characters (%d; the Step Functions limit); shorten %s",
			s.name, MaxStateName, n, strings.TrimSpace(what))
	}
}
