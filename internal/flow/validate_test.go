package flow

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every worc flow passes the structural layers unchanged. The one gap of the
// peer copy, implementation/refinement.md (peers/worc/README.md § Caveats),
// is a warning: the node is gated by `when` and fails only if it runs.
func TestValidate_PeerFlowsHaveNoFatalStructuralProblem(t *testing.T) { // docs/contracts.md § Fatal validation
	t.Parallel()
	root := peerFlowsDir(t)
	files, err := filepath.Glob(filepath.Join(root, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		stem := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(stem, func(t *testing.T) {
			t.Parallel()
			f, err := Load(root, stem)
			if err != nil {
				t.Fatal(err)
			}
			ps := Validate(f, ValidateOptions{RoleFileRoot: root})
			if got := Fatal(ps); len(got) != 0 {
				t.Errorf("fatal problems:\n%s", problemsText(got))
			}
			if stem != "implementation" {
				if len(ps) != 0 {
					t.Errorf("warnings:\n%s", problemsText(ps))
				}
				return
			}
			if len(ps) != 1 || ps[0].Path != "nodes[0].role_file" || ps[0].Line != 52 ||
				!strings.Contains(ps[0].Message, `"implementation/refinement.md" does not exist`) ||
				!strings.Contains(ps[0].Message, "the node fails if it runs") {
				t.Errorf("want exactly the missing implementation/refinement.md warning, got:\n%s", problemsText(ps))
			}
			missing := MissingRoleFiles(f, root)
			if len(missing) != 1 || missing[0].Node != "refinement" || missing[0].Field != "role_file" ||
				missing[0].File != "implementation/refinement.md" || !missing[0].Problem.Fatal || missing[0].Problem.Line != 52 {
				t.Errorf("MissingRoleFiles = %+v", missing)
			}
		})
	}
}

// ok is a minimal valid graph: plan -> build -> review (accept -> publish,
// rework -> build via loop fix) with budgets.
const ok = `  nodes:
    - { id: plan_it, kind: agent, role_file: t/plan.md }
    - { id: build, kind: agent, role_file: t/build.md, permission_profile: workspace-write }
    - { id: review, kind: evaluator, role: review, role_file: t/review.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: plan_it, to: build }
    - { from: build, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: build, outcome: rework, loop: fix }
  budgets:
    fix: 3
`

func TestValidate_MinimalFlowIsClean(t *testing.T) {
	t.Parallel()
	if ps := Validate(mustParse(t, ok), ValidateOptions{}); len(ps) != 0 {
		t.Errorf("problems:\n%s", problemsText(ps))
	}
}

// Each case is a small flow breaking one rule; want lists the Path of every
// fatal problem Validate must report, and msg a fragment of the first.
type ruleCase struct {
	name string
	body string
	want []string
	msg  string
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ps := Validate(mustParse(t, c.body), ValidateOptions{})
			got := fatalPaths(ps)
			if !slices.Equal(got, c.want) {
				t.Fatalf("fatal paths %q, want %q; problems:\n%s", got, c.want, problemsText(ps))
			}
			if c.msg != "" && !strings.Contains(Fatal(ps)[0].Message, c.msg) {
				t.Errorf("message %q, want it to contain %q", Fatal(ps)[0].Message, c.msg)
			}
		})
	}
}

// graph builds a body from node and edge lines (each already a flow-style
// mapping) plus optional budgets.
func graph(nodes, edges []string, budgets string) string {
	var b strings.Builder
	b.WriteString("  nodes:\n")
	for _, n := range nodes {
		b.WriteString("    - " + n + "\n")
	}
	if len(edges) > 0 {
		b.WriteString("  edges:\n")
		for _, e := range edges {
			b.WriteString("    - " + e + "\n")
		}
	}
	if budgets != "" {
		b.WriteString("  budgets: " + budgets + "\n")
	}
	return b.String()
}

const (
	start   = "{ id: s, kind: agent, role_file: t/s.md }"
	agentA  = "{ id: a, kind: agent, role_file: t/a.md }"
	agentB  = "{ id: b, kind: agent, role_file: t/b.md }"
	publish = "{ id: pub, kind: publish, policy: pull_request }"
)

func TestValidate_NodeIDs(t *testing.T) { // docs/contracts.md § Prompt templates: reserved stems; reference.md § Reserved node ids
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"ids are unique", graph([]string{agentA, "{ id: a, kind: agent, role_file: t/x.md }", publish}, []string{"{ from: a, to: pub }"}, ""),
			[]string{"nodes[1].id"}, `node id "a" is already used by nodes[0]`},
		{"id pattern", graph([]string{"{ id: Plan.1, kind: agent, role_file: t/a.md }", publish}, []string{"{ from: Plan.1, to: pub }"}, ""),
			[]string{"nodes[0].id"}, `must match ^[a-z0-9][a-z0-9_-]{0,63}$`},
		{"id is required", graph([]string{"{ kind: agent, role_file: t/a.md }"}, nil, ""),
			[]string{"nodes[0].id"}, "has no id"},
		{"windows device name", graph([]string{"{ id: con, kind: agent, role_file: t/a.md }"}, nil, ""),
			[]string{"nodes[0].id"}, "Windows device name"},
		{"agent id shadows a reserved stem", graph([]string{"{ id: plan, kind: agent, role_file: t/a.md }", publish}, []string{"{ from: plan, to: pub }"}, ""),
			[]string{"nodes[0].id"}, "shadows the reserved prompt variable {plan_path}"},
		{"tool id shadows change_overview", graph([]string{"{ id: change_overview, kind: tool, tool: x }", publish}, []string{"{ from: change_overview, to: pub, outcome: pass }"}, ""),
			[]string{"nodes[0].id"}, "reserved"},
		{"ids starting with subtask are reserved", graph([]string{"{ id: subtask_split, kind: agent, role_file: t/a.md }"}, nil, ""),
			[]string{"nodes[0].id"}, "subtask*"},
		{"an evaluator may be called review", graph([]string{agentA, "{ id: review, kind: evaluator, role: review, role_file: t/r.md }", agentB, publish},
			[]string{"{ from: a, to: review }", "{ from: review, to: pub, outcome: accept }", "{ from: review, to: b, outcome: rework, budget: 2 }", "{ from: b, to: review }"}, ""),
			nil, ""},
	})
}

func TestValidate_KindAndRequiredFields(t *testing.T) { // reference.md § Node kinds
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"kind known", graph([]string{"{ id: a, kind: robot }"}, nil, ""), []string{"nodes[0].kind"}, `kind "robot" is not allowed; want one of: agent, evaluator, checks, tool, hitl, publish`},
		{"kind required", graph([]string{"{ id: a }"}, nil, ""), []string{"nodes[0].kind"}, "has no kind"},
		{"agent needs role_file", graph([]string{"{ id: a, kind: agent }"}, nil, ""), []string{"nodes[0].role_file"}, `node "a" (agent) requires role_file`},
		{"evaluator needs role and role_file", graph([]string{"{ id: a, kind: evaluator }"}, nil, ""), []string{"nodes[0].role", "nodes[0].role_file"}, "requires role"},
		{"tool needs tool", graph([]string{"{ id: a, kind: tool }"}, nil, ""), []string{"nodes[0].tool"}, "requires tool"},
		{"checks needs checker", graph([]string{"{ id: a, kind: checks }"}, nil, ""), []string{"nodes[0].checker"}, "requires checker"},
		{"publish needs policy", graph([]string{"{ id: a, kind: publish }"}, nil, ""), []string{"nodes[0].policy"}, "requires policy"},
		{"hitl needs signal", graph([]string{"{ id: a, kind: hitl }"}, nil, ""), []string{"nodes[0].signal"}, "requires signal"},
		{"enumerated values", graph([]string{"{ id: a, kind: checks, checker: lint }"}, nil, ""), []string{"nodes[0].checker"}, `checker "lint" is not allowed; want one of: command_profile, citation, dependency_scan`},
	})
}

func TestValidate_Edges(t *testing.T) { // reference.md § Edges
	t.Parallel()
	tool := "{ id: c, kind: tool, tool: lint }"
	eval := "{ id: r, kind: evaluator, role: critic, role_file: t/r.md }"
	runRuleCases(t, []ruleCase{
		{"edges resolve", graph([]string{agentA, publish}, []string{"{ from: a, to: pub }", "{ from: a, to: ghost, outcome: route:x }"}, ""),
			[]string{"edges[1].to"}, `edge to "ghost": no node has that id`},
		{"agent emits no outcome", graph([]string{agentA, publish}, []string{"{ from: a, to: pub, outcome: accept }"}, ""),
			[]string{"edges[0].outcome"}, `edge from "a" (agent): outcome "accept" is not allowed; want no outcome (edges from agent nodes are unconditional) or route:<label>`},
		{"route from any kind", graph([]string{agentA, publish}, []string{"{ from: a, to: pub, outcome: route:ship }"}, ""), nil, ""},
		{"route needs a label", graph([]string{agentA, publish}, []string{"{ from: a, to: pub, outcome: 'route:' }"}, ""),
			[]string{"edges[0].outcome"}, "route:<label>"},
		{"evaluator emits accept or rework", graph([]string{agentA, eval, publish}, []string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: pass }"}, ""),
			[]string{"edges[1].outcome"}, "want accept, rework or route:<label>"},
		{"checks emit pass or fail", graph([]string{"{ id: t1, kind: checks, checker: command_profile }", publish}, []string{"{ from: t1, to: pub, outcome: accept }"}, ""),
			[]string{"edges[0].outcome"}, "want pass, fail or route:<label>"},
		{"tool emits pass, fail or route", graph([]string{tool, agentB, publish},
			[]string{"{ from: c, to: pub, outcome: pass }", "{ from: c, to: b, outcome: route:fix }", "{ from: b, to: pub }"}, ""), nil, ""},
		{"hitl approval routes approve or deny", graph([]string{"{ id: h, kind: hitl, signal: approval }", agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: h, to: pub, outcome: route:deny }", "{ from: b, to: pub }"}, ""), nil, ""},
		{"hitl approval cannot pass", graph([]string{"{ id: h, kind: hitl, signal: approval }", agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: h, to: pub, outcome: route:deny }", "{ from: h, to: pub, outcome: pass }", "{ from: b, to: pub }"}, ""),
			[]string{"edges[2].outcome"}, "route:approve or route:deny"},
		{"fail edge needs a loop or budget", graph([]string{agentA, tool, agentB, publish},
			[]string{"{ from: a, to: c }", "{ from: c, to: pub, outcome: pass }", "{ from: c, to: b, outcome: fail }", "{ from: b, to: c }"}, ""),
			[]string{"edges[2].outcome"}, "edge c -> b on fail is unbounded"},
		{"rework edge with inline budget is bounded", graph([]string{agentA, eval, agentB, publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: b, outcome: rework, budget: 2 }", "{ from: b, to: r }"}, ""), nil, ""},
		{"loop must be declared in budgets", graph([]string{agentA, eval, agentB, publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: b, outcome: rework, loop: fixes }", "{ from: b, to: r }"}, "{ fix: 2 }"),
			[]string{"edges[2].loop"}, `loop "fixes" is not declared in budgets (declared: fix)`},
		{"loop and budget are exclusive", graph([]string{agentA, eval, agentB, publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: b, outcome: rework, loop: fix, budget: 1 }", "{ from: b, to: r }"}, "{ fix: 2 }"),
			[]string{"edges[2].budget"}, "sets both"},
		{"one edge per outcome", graph([]string{agentA, agentB, publish},
			[]string{"{ from: a, to: b }", "{ from: a, to: pub }", "{ from: b, to: pub }"}, ""),
			[]string{"edges[1]"}, `node "a" already has an unconditional edge (edges[0], to "b")`},
		{"nothing leaves publish", graph([]string{agentA, publish, agentB},
			[]string{"{ from: a, to: pub }", "{ from: pub, to: b }"}, ""),
			[]string{"edges[1].from"}, "a publish node is terminal"},
		{"budgets are not negative", graph([]string{agentA}, nil, "{ fix: -1 }"),
			[]string{"budgets.fix"}, "budgets.fix is -1; valid: an iteration cap of at least 1"},
		{"a budget of 0 is refused, naming field, value and what is valid", graph([]string{agentA}, nil, "{ review_fix: 0 }"),
			[]string{"budgets.review_fix"}, "budgets.review_fix is 0; valid: an iteration cap of at least 1 (0 would let the loop run no round at all"},
		{"an inline budget of 0 is refused", graph([]string{agentA, eval, agentB, publish},
			[]string{"{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: b, outcome: rework, budget: 0 }", "{ from: b, to: r }"}, ""),
			[]string{"edges[2].budget"}, "edge r -> b: budget is 0; valid: an iteration cap of at least 1"},
	})
}

func TestValidate_Graph(t *testing.T) { // docs/contracts.md § Fatal validation: graph integrity
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"exactly one entry node", graph([]string{agentA, agentB, publish}, []string{"{ from: a, to: pub }", "{ from: b, to: pub }"}, ""),
			[]string{"nodes"}, "2 entry nodes (a, b)"},
		{"no entry node", graph([]string{agentA, agentB}, []string{"{ from: a, to: b }", "{ from: b, to: a }"}, ""),
			[]string{"nodes", "nodes[0]", "nodes[1]"}, "no entry node"},
		{"every node reaches a terminal", graph([]string{agentA, "{ id: t1, kind: checks, checker: command_profile }", agentB},
			[]string{"{ from: a, to: t1 }", "{ from: t1, to: b, outcome: fail, budget: 3 }", "{ from: t1, to: b, outcome: pass }", "{ from: b, to: t1 }"}, ""),
			[]string{"nodes[0]", "nodes[1]", "nodes[2]"}, `node "a" cannot reach a terminal`},
		{"every node is reachable from the entry", graph([]string{agentA, publish, agentB, "{ id: c, kind: agent, role_file: t/c.md }"},
			[]string{"{ from: a, to: pub }", "{ from: b, to: c }", "{ from: c, to: b }"}, ""),
			[]string{"nodes[2]", "nodes[2]", "nodes[3]", "nodes[3]"}, `node "b" is not reachable from the entry node "a"`},
	})
}

func TestValidate_Security(t *testing.T) { // docs/contracts.md § Fatal validation: security ceiling
	t.Parallel()
	eval := func(extra string) string {
		return "{ id: r, kind: evaluator, role: review, role_file: t/r.md" + extra + " }"
	}
	edges := []string{"{ from: s, to: a }", "{ from: a, to: r }", "{ from: r, to: pub, outcome: accept }", "{ from: r, to: a, outcome: rework, budget: 1 }"}
	runRuleCases(t, []ruleCase{
		{"role_file is not absolute", graph([]string{"{ id: a, kind: agent, role_file: /etc/passwd }"}, nil, ""),
			[]string{"nodes[0].role_file"}, `role_file "/etc/passwd" must be a relative path inside the flows directory`},
		{"role_file has no ..", graph([]string{"{ id: a, kind: agent, role_file: t/../../x.md }"}, nil, ""),
			[]string{"nodes[0].role_file"}, "no \"..\""},
		{"resume_role_file has no .. either way", graph([]string{`{ id: a, kind: agent, role_file: t/a.md, session_scope: editing_lineage, resume_role_file: 't\..\..\x.md' }`}, nil, ""),
			[]string{"nodes[0].resume_role_file"}, "resume_role_file"},
		{"supervisor prompts are contained", graph([]string{agentA}, nil, "") + "  supervisor: { finalize_role_file: ../x.md }\n",
			[]string{"supervisor.finalize_role_file"}, "must be a relative path"},
		{"evaluator is read-only", graph([]string{start, agentA, eval(", permission_profile: workspace-write"), publish}, edges, ""),
			[]string{"nodes[2].permission_profile"}, "evaluators are forced read-only"},
		{"evaluator defaults are read-only", "  defaults:\n    evaluator: { permission_profile: workspace-write }\n" + graph([]string{start, agentA, eval(""), publish}, edges, ""),
			[]string{"defaults.evaluator.permission_profile"}, "forced read-only"},
		{"evaluator never editing_lineage", graph([]string{start, agentA, eval(", session_scope: editing_lineage"), publish}, edges, ""),
			[]string{"nodes[2].session_scope"}, "never joins"},
		{"git_evidence not on a workspace-write agent", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, git_evidence: true }"}, nil, ""),
			[]string{"nodes[0].git_evidence"}, "git_evidence"},
		{"resume_role_file needs a resumable session", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, resume_role_file: t/a2.md }"}, nil, ""),
			[]string{"nodes[0].resume_role_file"}, "fresh_disposable never resumes"},
	})
}

func TestValidate_PermissionProfileAtMostCeiling(t *testing.T) { // docs/contracts.md § Fatal validation: security ceiling
	t.Parallel()
	body := strings.Replace(header, "workspace-write", "read-only", 1) +
		graph([]string{"{ id: a, kind: agent, role_file: t/a.md, permission_profile: workspace-write }", "{ id: b, kind: agent, role_file: t/b.md, permission_profile: read-only }"},
			[]string{"{ from: a, to: b }"}, "")
	f, err := Parse("t.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ps := Fatal(Validate(f, ValidateOptions{}))
	if len(ps) != 1 || ps[0].Path != "nodes[0].permission_profile" ||
		ps[0].Message != `node "a" permission_profile "workspace-write" exceeds the flow permission_ceiling "read-only"` {
		t.Errorf("got:\n%s", problemsText(ps))
	}
}

func TestValidate_MissingRoleFileIsAWarningNotFatal(t *testing.T) { // docs/contracts.md § Prompt templates; fatal only in a run's preflight
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plan.md", "build.md"} {
		if err := os.WriteFile(filepath.Join(root, "t", name), []byte("prompt"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ps := Validate(mustParse(t, ok), ValidateOptions{RoleFileRoot: root})
	if len(ps) != 1 || ps[0].Fatal || ps[0].Path != "nodes[2].role_file" {
		t.Fatalf("want one warning; problems:\n%s", problemsText(ps))
	}
	want := `t.yaml:10:52: node "review" role_file "t/review.md" does not exist (looked for ` + filepath.Join(root, "t", "review.md") + "); the node fails if it runs"
	if ps[0].String() != want {
		t.Errorf("got  %s\nwant %s", ps[0], want)
	}
	missing := MissingRoleFiles(mustParse(t, ok), root)
	if len(missing) != 1 || missing[0].Node != "review" || missing[0].File != "t/review.md" || !missing[0].Problem.Fatal ||
		missing[0].Problem.String() != `t.yaml:10:52: node "review" role_file "t/review.md" does not exist (looked for `+filepath.Join(root, "t", "review.md")+")" {
		t.Errorf("MissingRoleFiles = %+v", missing)
	}
}

func TestValidate_LineageAndDecompositionResolve(t *testing.T) { // reference.md § agent node: lineage_affinity; § decomposition
	t.Parallel()
	owner := "{ id: a, kind: agent, role_file: t/a.md, session_scope: editing_lineage }"
	runRuleCases(t, []ruleCase{
		{"affinity to an editing owner", graph([]string{owner, "{ id: b, kind: agent, role_file: t/b.md, lineage_affinity: a }"}, []string{"{ from: a, to: b }"}, ""), nil, ""},
		{"affinity to a fresh node", graph([]string{agentA, "{ id: b, kind: agent, role_file: t/b.md, lineage_affinity: a }"}, []string{"{ from: a, to: b }"}, ""),
			[]string{"nodes[1].lineage_affinity"}, "editing_lineage"},
		{"no affinity chains", graph([]string{owner, "{ id: b, kind: agent, role_file: t/b.md, session_scope: editing_lineage, lineage_affinity: a }",
			"{ id: c, kind: agent, role_file: t/c.md, lineage_affinity: b }"}, []string{"{ from: a, to: b }", "{ from: b, to: c }"}, ""),
			[]string{"nodes[2].lineage_affinity"}, "chains are not allowed"},
		{"decomposition references resolve", graph([]string{agentA}, nil, "{ fix: 1 }") +
			"  decomposition: { proposed_by: ghost, sub_flow: [a, nope], shared_budget: shared }\n",
			[]string{"decomposition.proposed_by", "decomposition.sub_flow[1]", "decomposition.shared_budget"}, `proposed_by "ghost" must name an agent node`},
		{"output_file is one file name", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_file: ../report.md }"}, nil, ""),
			[]string{"nodes[0].output_file"}, "one portable file name"},
		{"when fact is namespaced", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: needs_refinement } }"}, nil, ""),
			[]string{"nodes[0].when.fact"}, "derived.* or config.*"},
	})
}

func TestValidate_ReturnsEveryProblemSortedByLine(t *testing.T) { // docs/contracts.md § Fatal validation: all collected
	t.Parallel()
	f := mustParse(t, graph([]string{"{ id: a, kind: agent }", "{ id: B, kind: tool }", "{ id: c, kind: checks, checker: command_profile }"},
		[]string{"{ from: a, to: B }", "{ from: B, to: c, outcome: fail }", "{ from: c, to: zz }"}, ""))
	ps := Validate(f, ValidateOptions{})
	if len(ps) < 5 {
		t.Fatalf("only %d problems:\n%s", len(ps), problemsText(ps))
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Line < ps[i-1].Line || (ps[i].Line == ps[i-1].Line && ps[i].Col < ps[i-1].Col) {
			t.Fatalf("not sorted by position:\n%s", problemsText(ps))
		}
	}
	for _, want := range []string{"nodes[0].role_file", "nodes[1].id", "nodes[1].tool", "edges[1].outcome", "edges[2].to"} {
		if !slices.Contains(fatalPaths(ps), want) {
			t.Errorf("missing %s in:\n%s", want, problemsText(ps))
		}
	}
}

func TestValidate_WarningsAreNotFatal(t *testing.T) {
	t.Parallel()
	f := mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: derived.is_big } }", "{ id: pub, kind: publish, policy: local_artifact }"},
		[]string{"{ from: a, to: pub }"}, ""))
	ps := Validate(f, ValidateOptions{})
	if len(ps) != 2 || len(Fatal(ps)) != 0 {
		t.Errorf("want two warnings (unknown fact, policy mismatch), got:\n%s", problemsText(ps))
	}
}

func TestProblem_StringIsFileLineColMessage(t *testing.T) {
	t.Parallel()
	p := Problem{File: "flows/x.yaml", Line: 3, Col: 7, Path: "nodes[0].id", Message: "bad id", Fatal: true}
	if got := p.String(); got != "flows/x.yaml:3:7: bad id" {
		t.Errorf("got %q", got)
	}
	if got := (Problem{File: "x.yaml", Message: "m"}).String(); got != "x.yaml: m" {
		t.Errorf("without position: %q", got)
	}
}

func TestFlow_EntryNodeOut(t *testing.T) {
	t.Parallel()
	f := mustParse(t, ok)
	if e := f.Entry(); e == nil || e.ID != "plan_it" {
		t.Errorf("Entry() = %+v", e)
	}
	if n := f.Node("review"); n == nil || n.Kind != KindEvaluator || n.Index != 2 {
		t.Errorf("Node(review) = %+v", n)
	}
	if f.Node("ghost") != nil {
		t.Error("Node(ghost) != nil")
	}
	out := f.Out("review")
	if len(out) != 2 || out[0].To != "publish" || out[1].Loop != "fix" {
		t.Errorf("Out(review) = %+v", out)
	}
	two := mustParse(t, graph([]string{agentA, agentB}, nil, ""))
	if two.Entry() != nil {
		t.Error("Entry() with two entry nodes should be nil")
	}
}

// A hitl node may say what it asks (a Stratus extension): a blank or
// oversized question is fatal, a {name} outside the flow's variables a
// warning (the human would read it verbatim).
func TestValidate_HITLQuestion(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"blank question", graph([]string{`{ id: a, kind: hitl, signal: question, question: "  " }`}, nil, ""), []string{"nodes[0].question"}, "question is empty"},
		{"long question", graph([]string{`{ id: a, kind: hitl, signal: question, question: "` + strings.Repeat("q", MaxQuestionBytes+1) + `" }`}, nil, ""), []string{"nodes[0].question"}, "at most 4096"},
	})
	f := mustParse(t, "  nodes:\n    - { id: a, kind: hitl, signal: question, question: \"Which of {task_id} or {nope}?\" }\n")
	if f.Nodes[0].Question != "Which of {task_id} or {nope}?" {
		t.Fatalf("question parsed as %q", f.Nodes[0].Question)
	}
	ps := Validate(f, ValidateOptions{})
	text := problemsText(ps)
	if len(Fatal(ps)) != 0 || !strings.Contains(text, "{nope} in its question is not a prompt variable") || strings.Contains(text, "{task_id} in its") {
		t.Errorf("problems:\n%s", text)
	}
	if _, err := Parse("t.yaml", []byte(header+"  nodes:\n    - { id: a, kind: agent, role_file: a.md, question: x }\n")); err == nil {
		t.Error("question on an agent node parsed; it is a hitl key")
	}
}
