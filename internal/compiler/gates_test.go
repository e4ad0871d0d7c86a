package compiler

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// Fail closed: a gate with no outgoing edge ends the run done
// on its pass outcome alone — evaluator accept, checks and tool pass, hitl
// question done — and parks every other outcome (fail, rework, invalid, a
// route label) at manual_action_required. An agent without edges still
// ends done whatever it returns.
func TestCompile_TerminalGateEndsDoneOnlyOnItsPassOutcome(t *testing.T) {
	t.Parallel()
	last := map[string]string{
		"checks":    "{ id: last, kind: checks, checker: command_profile }",
		"tool":      "{ id: last, kind: tool, tool: x }",
		"evaluator": "{ id: last, kind: evaluator, role: review, role_file: t/r.md }",
		"question":  "{ id: last, kind: hitl, signal: question }",
		"agent":     "{ id: last, kind: agent, role_file: t/l.md }",
	}
	flowOf := func(kind string) *flow.Flow {
		return parse(t, header+"  nodes:\n    - { id: build, kind: agent, role_file: t/b.md }\n    - "+last[kind]+"\n  edges:\n    - { from: build, to: last }\n")
	}
	cases := []struct {
		kind, outcome, end string
	}{
		{"checks", "pass", "done"},
		{"checks", "fail", ErrManualActionRequired},
		{"tool", "pass", "done"},
		{"tool", "fail", ErrManualActionRequired},
		{"tool", "route:large", ErrManualActionRequired},
		{"evaluator", "accept", "done"},
		{"evaluator", "rework", ErrManualActionRequired},
		{"evaluator", "invalid", ErrManualActionRequired},
		{"question", "done", "done"},
		{"agent", "done", "done"},
		{"agent", "anything", "done"},
	}
	for _, c := range cases {
		t.Run(c.kind+" "+c.outcome, func(t *testing.T) {
			t.Parallel()
			f := flowOf(c.kind)
			x, msgs := runFlow(t, f, Options{}, outcomes(map[string][]reply{"last": {out(c.outcome)}}))
			if got := trail(msgs); got != "build last" || ending(x) != c.end {
				t.Errorf("got %s → %s, want build last → %s", got, ending(x), c.end)
			}
		})
	}
	for _, kind := range []string{"checks", "tool", "evaluator", "question"} {
		f := flowOf(kind)
		d := decode(t, compile(t, f, Options{}))
		checkWellFormed(t, f, d)
		route := d.States["last.route"]
		rules, _ := route["Choices"].([]any)
		if d.States["last"]["Next"] != "last.route" || len(rules) != 1 || route["Default"] != "manual_action_required" ||
			rules[0].(map[string]any)["StringEquals"] != flow.PassOutcome(f.Node("last")) || rules[0].(map[string]any)["Next"] != "done" {
			t.Errorf("%s: last → %v, last.route %v; want one rule, its pass outcome → done, Default manual_action_required", kind, d.States["last"]["Next"], route)
		}
	}
	f := flowOf("agent")
	if d := decode(t, compile(t, f, Options{})); d.States["last"]["Next"] != "done" || d.States["last.route"] != nil {
		t.Errorf("an agent without edges: Next %v, route %v; want done and no route", d.States["last"]["Next"], d.States["last.route"])
	}
}

// Flow.StateNames, which Validate checks against the Step Functions limit,
// names exactly the states Compile emits (the terminals done, failed and
// manual_action_required only when some state routes to them) — for worc's
// peer flows, the built-in flow and this package's test flows alike.
func TestCompile_StateNamesMatchFlowStateNames(t *testing.T) {
	t.Parallel()
	flows := corpus(t)
	several := header + `  nodes:
    - { id: write, kind: agent, role_file: t/w.md }
    - { id: check, kind: tool, tool: lint }
    - { id: critic, kind: evaluator, role: critic, role_file: t/c.md }
    - { id: fix_lint, kind: agent, role_file: t/fl.md }
    - { id: fix_style, kind: agent, role_file: t/fs.md }
    - { id: last, kind: checks, checker: command_profile }
  edges:
    - { from: write, to: check }
    - { from: critic, to: last, outcome: accept }
    - { from: check, to: critic, outcome: pass }
    - { from: check, to: fix_lint, outcome: fail, loop: fixes }
    - { from: critic, to: fix_style, outcome: rework, loop: fixes }
    - { from: fix_lint, to: check }
    - { from: fix_style, to: check }
  budgets: { fixes: 5 }
`
	for name, y := range map[string]string{"small": small, "fixLoops": fixLoops + "  budgets: { test_fix: 2, review_fix: 2 }\n", "mdCheck": mdCheck,
		"decomposed": decomposed, "one loop, several targets, a terminal gate": several} {
		flows[name] = parse(t, y)
	}
	for name, f := range flows {
		d := decode(t, compile(t, f, Options{}))
		mirror := flow.StateNames(f)
		for _, s := range d.Names {
			if !slices.Contains(mirror, s) {
				t.Errorf("%s: compiled state %q is missing from flow.StateNames", name, s)
			}
		}
		for _, s := range mirror {
			if _, ok := d.States[s]; !ok && !isTerminal(s) {
				t.Errorf("%s: flow.StateNames lists %q, which Compile does not emit", name, s)
			}
		}
	}
}

func isTerminal(s string) bool {
	s = strings.TrimPrefix(s, "run.")
	return s == "done" || s == "failed" || s == "manual_action_required"
}

// What Compile rejects by name, flow.Validate reports first
// (so `stratus validate` says it), located at the field to change: a state
// name over 80 characters from a long loop name or route label, and two
// loops whose $.loops counters collide.
func TestCompile_NameRejectionsAreValidationProblems(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("l", 75)
	cases := []struct {
		name, yaml, path, msg string
	}{
		{"long loop name", header + `  nodes:
    - { id: s, kind: agent, role_file: t/s.md }
    - { id: a, kind: agent, role_file: t/a.md }
    - { id: r, kind: evaluator, role: review, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: s, to: a }
    - { from: a, to: r }
    - { from: r, to: publish, outcome: accept }
    - { from: r, to: a, outcome: rework, loop: ` + long + ` }
  budgets: { ` + long + `: 2 }
`, "edges[3].loop", `state name "` + long + `.budget" is longer than 80 characters`},
		{"long route label on an inline budget", header + `  nodes:
    - { id: s, kind: agent, role_file: t/s.md }
    - { id: a, kind: agent, role_file: t/a.md }
    - { id: lint, kind: tool, tool: x }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: s, to: a }
    - { from: a, to: lint }
    - { from: lint, to: publish, outcome: pass }
    - { from: lint, to: a, outcome: route:` + long + `, budget: 2 }
`, "edges[3].budget", `state name "lint_route_` + long + `.budget" is longer than 80 characters`},
		{"loops a b and a_b collide", header + `  nodes:
    - { id: s, kind: agent, role_file: t/s.md }
    - { id: a, kind: agent, role_file: t/a.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: r, kind: evaluator, role: review, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: s, to: a }
    - { from: a, to: testing }
    - { from: testing, to: r, outcome: pass }
    - { from: testing, to: a, outcome: fail, loop: a b }
    - { from: r, to: publish, outcome: accept }
    - { from: r, to: a, outcome: rework, loop: a_b }
  budgets: { a b: 2, a_b: 2 }
`, "edges[5].loop", `loop "a b" and loop "a_b" both count in $.loops.a_b; rename one`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := parse(t, c.yaml)
			fatal := flow.Fatal(flow.Validate(f, flow.ValidateOptions{}))
			if len(fatal) != 1 || fatal[0].Path != c.path || !strings.Contains(fatal[0].Message, c.msg) {
				t.Errorf("validate: %v; want one fatal problem at %s containing %q", fatal, c.path, c.msg)
			}
			if _, err := Compile(f, Options{}); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("compile: %v; want EINVALID containing %q", err, c.msg)
			}
		})
	}
}
