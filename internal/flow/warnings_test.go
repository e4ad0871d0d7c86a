package flow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/config"
)

// lintSetup writes role files under a fresh flows dir and returns it.
func lintSetup(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLint_UnknownTokenWarnsNamingFileLineAndToken(t *testing.T) { // docs/contracts.md § Fatal validation
	t.Parallel()
	root := lintSetup(t, map[string]string{
		"t/a.md": "Read {task_path}.\n{?plan_path}Plan: {plan_path}.{/plan_path}\nSee {plna_path} and {b_path}.\n",
		// front matter lines count; JSON braces and code are not tokens.
		"t/b.md": "---\nsubmit_format: json\n---\nOutput {\"ok\": true} and {a_path}\n  {?memry_path}x{/memry_path} {gate_path}\n",
		"t/s.md": "Task {task_id}: {summary}\n",
	})
	f := mustParse(t, graph([]string{agentA, agentB, "{ id: gate, kind: tool, tool: x }", publish},
		[]string{"{ from: a, to: b }", "{ from: b, to: gate }", "{ from: gate, to: pub, outcome: pass }"}, "")+
		"  supervisor: { finalize_role_file: t/s.md }\n")
	ps := Validate(f, ValidateOptions{RoleFileRoot: root})
	if len(Fatal(ps)) != 0 {
		t.Fatalf("the lint is never fatal:\n%s", problemsText(ps))
	}
	want := []string{
		filepath.Join(root, "t", "a.md") + `:3:5: {plna_path} is not a prompt variable of flow "t", so it reaches the agent verbatim (in node "a" role_file "t/a.md"; the flow's variables are the core set and {a_path}, {b_path}, {gate_path})`,
		filepath.Join(root, "t", "b.md") + `:5:3: {?memry_path} is not a prompt variable of flow "t"`,
		filepath.Join(root, "t", "s.md") + `:1:17: {summary} is not a prompt variable of flow "t", so it reaches the agent verbatim (in supervisor.finalize_role_file "t/s.md";`,
	}
	if len(ps) != len(want) {
		t.Fatalf("want %d warnings, got:\n%s", len(want), problemsText(ps))
	}
	for i, w := range want {
		if !strings.HasPrefix(ps[i].String(), w) {
			t.Errorf("warning %d:\n got %s\nwant %s...", i, ps[i], w)
		}
	}
	if ps[0].Path != "nodes[0].role_file" || ps[2].Path != "supervisor.finalize_role_file" {
		t.Errorf("paths %q, %q", ps[0].Path, ps[2].Path)
	}
}

func TestLint_EachRoleFileOnceAndEvaluatorsAreNotOutputs(t *testing.T) { // docs/contracts.md § Template variables: only agent and tool nodes expose {<id>_path}
	t.Parallel()
	root := lintSetup(t, map[string]string{"t/a.md": "{r_path}\n"})
	f := mustParse(t, graph([]string{agentA, "{ id: r, kind: evaluator, role: critic, role_file: t/a.md }", publish},
		[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }"}, ""))
	ps := Validate(f, ValidateOptions{RoleFileRoot: root})
	if len(ps) != 1 || ps[0].Fatal || !strings.Contains(ps[0].Message, "{r_path} is not a prompt variable") {
		t.Errorf("want one warning for the evaluator's {r_path}, reported once, got:\n%s", problemsText(ps))
	}
}

func TestLint_HITLNodeAnswerIsAPromptVariable(t *testing.T) { // docs/prompt-variables.md § Node outputs: a hitl node's reply is {<id>_path}
	t.Parallel()
	root := lintSetup(t, map[string]string{"t/a.md": "x\n", "t/b.md": "Answer: {ask_path}\n"})
	f := mustParse(t, graph([]string{agentA, "{ id: ask, kind: hitl, signal: question }", agentB, publish},
		[]string{"{ from: a, to: ask }", "{ from: ask, to: b }", "{ from: b, to: pub }"}, ""))
	if ps := Validate(f, ValidateOptions{RoleFileRoot: root}); len(ps) != 0 {
		t.Errorf("{ask_path} of hitl node ask should be a prompt variable, got:\n%s", problemsText(ps))
	}
	if got := strings.Join(OutputNodes(f), ","); got != "a,ask,b" {
		t.Errorf("OutputNodes = %s, want a,ask,b", got)
	}
}

func TestValidate_NonBlockingReworkLoopShorterThanMaxReworkWarns(t *testing.T) { // docs/contracts.md § Fatal validation: the non-fatal rework-loop warning
	t.Parallel()
	flow := func(eval, edge, budgets string) *Flow {
		return mustParse(t, graph([]string{agentA, eval, agentB, publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", edge, "{ from: b, to: r }"}, budgets))
	}
	nonBlocking := "{ id: r, kind: evaluator, role: test_quality, role_file: t/r.md, blocking: false, max_rework_per_stage: 3 }"
	capped := withConfig(func(c *config.Config) { c.Agents.MaxFixCycles = 2 })
	cases := []struct {
		name string
		f    *Flow
		cfg  *config.Config
		want []string // fragments, one per warning, in order
	}{
		{"named loop long enough", flow(nonBlocking, "{ from: r, to: b, outcome: rework, loop: qa }", "{ qa: 3 }"), nil, nil},
		{"named loop too short", flow(nonBlocking, "{ from: r, to: b, outcome: rework, loop: qa }", "{ qa: 1 }"), nil,
			[]string{`non-blocking node "r" allows 3 rework rounds (max_rework_per_stage, its own), but its rework edge to "b" is bounded by loop "qa" (budgets.qa 1): it accepts with a warning after 1, so 2 of its rounds can never happen`}},
		{"clamped by max_fix_cycles", flow(nonBlocking, "{ from: r, to: b, outcome: rework, loop: qa }", "{ qa: 5 }"), capped,
			[]string{`bounded by loop "qa" (budgets.qa 5, clamped to agents.max_fix_cycles 2): it accepts with a warning after 2, so 1 of its rounds can never happen; lower max_rework_per_stage or raise agents.max_fix_cycles`,
				`budget "qa" is 5, above agents.max_fix_cycles 2 in config.yaml: the engine clamps it to 2`}},
		{"inline budget", flow(nonBlocking, "{ from: r, to: b, outcome: rework, budget: 2 }", ""), nil,
			[]string{"bounded by its inline budget 2: it accepts with a warning after 2"}},
		{"default of one round", flow("{ id: r, kind: evaluator, role: critic, role_file: t/r.md, blocking: false }", "{ from: r, to: b, outcome: rework, budget: 1 }", ""), nil, nil},
		{"blocking ignores max_rework_per_stage", flow("{ id: r, kind: evaluator, role: review, role_file: t/r.md, max_rework_per_stage: 2 }", "{ from: r, to: b, outcome: rework, budget: 1 }", ""), nil,
			[]string{`node "r" max_rework_per_stage is ignored: the evaluator is blocking`}},
		{"inline budget above the cap", flow("{ id: r, kind: evaluator, role: review, role_file: t/r.md }", "{ from: r, to: b, outcome: rework, budget: 9 }", ""), capped,
			[]string{"edge r -> b budget 9 is above agents.max_fix_cycles 2 in config.yaml: the engine clamps it to 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ps := Validate(c.f, ValidateOptions{Config: c.cfg})
			if len(Fatal(ps)) != 0 || len(ps) != len(c.want) {
				t.Fatalf("want %d warnings, got:\n%s", len(c.want), problemsText(ps))
			}
			for i, w := range c.want {
				if !strings.Contains(ps[i].Message, w) {
					t.Errorf("warning %d: %q\nwant it to contain %q", i, ps[i].Message, w)
				}
			}
		})
	}
}
