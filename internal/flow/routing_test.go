package flow

import (
	"strings"
	"testing"
)

// agentS and startEdge put an entry node in front of a flow that loops
// back to agentA.
const (
	agentS    = "{ id: s, kind: agent, role_file: t/s.md }"
	startEdge = "{ from: s, to: a }"
)

// problemsAt returns the problems whose Path is path.
func problemsAt(ps []Problem, path string) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Path == path {
			out = append(out, p)
		}
	}
	return out
}

// An evaluator, checks or tool node with no outgoing edge is a
// terminal gate: only its pass outcome ends the run done, any other parks
// it. Validate warns (worc accepts the flow); an agent or a hitl question
// at the end draws no warning.
func TestValidate_TerminalGateWarns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, node, want string
	}{
		{"checks", "{ id: g, kind: checks, checker: command_profile }", `node "g" is a terminal gate: only its pass outcome ends done; any other (fail) parks the run`},
		{"tool", "{ id: g, kind: tool, tool: x }", `node "g" is a terminal gate: only its pass outcome ends done`},
		{"evaluator", "{ id: g, kind: evaluator, role: review, role_file: t/r.md }", `node "g" is a terminal gate: only its accept outcome ends done; any other (rework, or an invalid report) parks the run`},
		{"agent", "{ id: g, kind: agent, role_file: t/g.md }", ""},
		{"question", "{ id: g, kind: hitl, signal: question }", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ps := Validate(mustParse(t, graph([]string{agentA, c.node}, []string{"{ from: a, to: g }"}, "")), ValidateOptions{})
			if c.want == "" {
				if len(ps) != 0 {
					t.Errorf("want no problem, got:\n%s", problemsText(ps))
				}
				return
			}
			if len(ps) != 1 || ps[0].Fatal || ps[0].Path != "nodes[1]" || !strings.Contains(ps[0].Message, c.want) {
				t.Errorf("want one warning at nodes[1] containing %q, got:\n%s", c.want, problemsText(ps))
			}
		})
	}
}

// An evaluator, checks or hitl question node never emits a route label, so
// when all its edges are route:<label> no edge can ever be taken (fatal);
// beside edges that do route, a route:<label> edge from it is dead (a
// warning). A tool may print a route label: no problem.
func TestValidate_RouteEdgesFromKindsThatNeverRoute(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"evaluator with only route edges", graph([]string{agentA, "{ id: r, kind: evaluator, role: review, role_file: t/r.md }", publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: route:ok }"}, ""),
			[]string{"nodes[1]"}, `node "r" (evaluator) only has route:<label> edges, but it emits accept or rework and never a route label`},
		{"checks with only route edges", graph([]string{agentA, "{ id: c, kind: checks, checker: command_profile }", publish},
			[]string{"{ from: a, to: c }", "{ from: c, to: pub, outcome: route:green }"}, ""),
			[]string{"nodes[1]"}, "emits pass or fail and never a route label"},
		{"question with only route edges", graph([]string{agentA, "{ id: q, kind: hitl, signal: question }", publish},
			[]string{"{ from: a, to: q }", "{ from: q, to: pub, outcome: route:answered }"}, ""),
			[]string{"nodes[1]"}, `node "q" (hitl question) only has route:<label> edges, but it emits done`},
		{"tool may print a route label", graph([]string{agentA, "{ id: c, kind: tool, tool: x }", publish},
			[]string{"{ from: a, to: c }", "{ from: c, to: pub, outcome: route:small }"}, ""), nil, ""},
	})
	f := mustParse(t, graph([]string{agentS, agentA, "{ id: r, kind: evaluator, role: review, role_file: t/r.md }", publish},
		[]string{startEdge, "{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: route:again }"}, ""))
	ps := Validate(f, ValidateOptions{})
	if w := problemsAt(ps, "edges[3].outcome"); len(Fatal(ps)) != 0 || len(w) != 1 ||
		!strings.Contains(w[0].Message, `edge r -> a on route:again can never be taken: node "r" (evaluator) emits accept or rework, never a route label`) {
		t.Errorf("want one warning on the dead route edge, got:\n%s", problemsText(ps))
	}
}

// The facts are booleans, so a when.equals that is not one warns:
// "true"/"false" strings match by their text only, anything else never
// matches and the node is always skipped.
func TestValidate_WhenEqualsNotABooleanWarns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		equals, want string
	}{
		{"true", ""},
		{"false", ""},
		{`"true"`, `when.equals is "true", not a boolean; the facts are booleans, so it only matches by its text: write equals: true`},
		{"maybe", `when.equals is "maybe", which no fact ever equals (the facts are booleans): the node is always skipped`},
		{"1", "when.equals is 1, which no fact ever equals"},
	}
	for _, c := range cases {
		f := mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: derived.needs_refinement, equals: " + c.equals + " } }"}, nil, ""))
		ps := Validate(f, ValidateOptions{})
		if c.want == "" {
			if len(ps) != 0 {
				t.Errorf("equals %s: want no problem, got:\n%s", c.equals, problemsText(ps))
			}
			continue
		}
		if len(ps) != 1 || ps[0].Fatal || ps[0].Path != "nodes[0].when.equals" || ps[0].Line != 8 || !strings.Contains(ps[0].Message, c.want) {
			t.Errorf("equals %s: want one warning at nodes[0].when.equals containing %q, got:\n%s", c.equals, c.want, problemsText(ps))
		}
	}
}

// A budget no edge names is reported (a warning); the global
// backstop and decomposition.shared_budget count as used.
func TestValidate_UnusedBudgetWarns(t *testing.T) {
	t.Parallel()
	review := "{ id: r, kind: evaluator, role: review, role_file: t/r.md }"
	edges := []string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, loop: fix }"}
	f := mustParse(t, graph([]string{agentS, agentA, review, publish}, append([]string{startEdge}, edges...), "{ fix: 2, spare: 3, global_fix_iterations: 9 }"))
	ps := Validate(f, ValidateOptions{})
	if len(ps) != 1 || ps[0].Fatal || ps[0].Path != "budgets.spare" || !strings.Contains(ps[0].Message, `budget "spare" is never used: no edge names it as its loop`) {
		t.Errorf("want one warning for budgets.spare, got:\n%s", problemsText(ps))
	}
}

// Validate reports what compile rejects by name, at the field
// to change: loops "a b" and "a_b" share the counter a_b; a loop named like
// an inline budget's <from>_<outcome>; a 75-character loop name makes a
// state name over 80 characters.
func TestValidate_CompiledNamesCollisionsAndLength(t *testing.T) {
	t.Parallel()
	review := "{ id: r, kind: evaluator, role: review, role_file: t/r.md }"
	checks := "{ id: c, kind: checks, checker: command_profile }"
	long := strings.Repeat("l", 75)
	runRuleCases(t, []ruleCase{
		{"a b and a_b collide", graph([]string{agentS, agentA, checks, review, publish},
			[]string{startEdge, "{ from: a, to: c }", "{ from: c, to: r, outcome: pass }", "{ from: c, to: a, outcome: fail, loop: a b }",
				"{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, loop: a_b }"}, "{ a b: 2, a_b: 2 }"),
			[]string{"edges[5].loop"}, `loop "a b" and loop "a_b" both count in $.loops.a_b; rename one`},
		{"a loop named like an inline budget", graph([]string{agentS, agentA, checks, review, publish},
			[]string{startEdge, "{ from: a, to: c }", "{ from: c, to: r, outcome: pass }", "{ from: c, to: a, outcome: fail, budget: 2 }",
				"{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, loop: c_fail }"}, "{ c_fail: 2 }"),
			[]string{"edges[5].loop"}, `the inline budget of edge c -> a (fail) and loop "c_fail" both count in $.loops.c_fail`},
		{"long loop name", graph([]string{agentS, agentA, review, publish},
			[]string{startEdge, "{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, loop: " + long + " }"}, "{ "+long+": 2 }"),
			[]string{"edges[3].loop"}, `state name "` + long + `.budget" is longer than 80 characters (82; the Step Functions limit); shorten loop name`},
		{"80 characters pass", graph([]string{agentS, agentA, review, publish},
			[]string{startEdge, "{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, loop: " + long[:73] + " }"}, "{ "+long[:73]+": 2 }"),
			nil, ""},
	})
}
