package flow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate_HITLApprovalRoutesApproveAndDeny(t *testing.T) { // reference.md § Edges: an approval needs route:approve / route:deny edges
	t.Parallel()
	hitl := "{ id: h, kind: hitl, signal: approval }"
	runRuleCases(t, []ruleCase{
		{"both routes", graph([]string{hitl, agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: h, to: pub, outcome: route:deny }", "{ from: b, to: pub }"}, ""), nil, ""},
		{"deny missing", graph([]string{hitl, agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: b, to: pub }"}, ""),
			[]string{"nodes[0].signal"}, `node "h" asks for an approval but has no route:deny edge`},
		{"no unconditional edge", graph([]string{hitl, agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: h, to: pub, outcome: route:deny }", "{ from: h, to: pub }", "{ from: b, to: pub }"}, ""),
			[]string{"edges[2]"}, "give it route:approve and route:deny edges instead of an unconditional one"},
		{"no other route label", graph([]string{hitl, agentB, publish},
			[]string{"{ from: h, to: b, outcome: route:approve }", "{ from: h, to: pub, outcome: route:deny }", "{ from: h, to: b, outcome: route:maybe }", "{ from: b, to: pub }"}, ""),
			[]string{"edges[2].outcome"}, `outcome "route:maybe" is not allowed; want route:approve or route:deny`},
		{"a question proceeds unconditionally", graph([]string{"{ id: h, kind: hitl, signal: question }", publish}, []string{"{ from: h, to: pub }"}, ""), nil, ""},
	})
}

func TestValidate_OutputFileIsOnePortableNameExclusiveWithOutputArtifact(t *testing.T) { // reference.md § agent node: output_file
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"a file name", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_file: report.md }"}, nil, ""), nil, ""},
		{"no separator", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_file: docs/report.md }"}, nil, ""),
			[]string{"nodes[0].output_file"}, `output_file "docs/report.md" must be one portable file name`},
		{"no leading dot", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_file: .env }"}, nil, ""),
			[]string{"nodes[0].output_file"}, "one portable file name"},
		{"not with output_artifact", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_file: plan.md, output_artifact: plan }"}, nil, ""),
			[]string{"nodes[0].output_file"}, "sets both output_file and output_artifact; they are mutually exclusive"},
	})
}

func TestValidate_WhenFactNamespacedAndUnknownFactWarns(t *testing.T) { // reference.md § Conditional nodes (when:)
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"namespace required", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: task.big } }"}, nil, ""),
			[]string{"nodes[0].when.fact"}, `when.fact "task.big" must be namespaced derived.* or config.*`},
		{"fact required", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { equals: true } }"}, nil, ""),
			[]string{"nodes[0].when"}, "when requires a fact"},
	})
	f := mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: derived.needs_refinment } }"}, nil, ""))
	ps := Validate(f, ValidateOptions{})
	if len(ps) != 1 || ps[0].Fatal || ps[0].Path != "nodes[0].when.fact" ||
		!strings.Contains(ps[0].Message, `when.fact "derived.needs_refinment" is not a known fact (known: derived.needs_refinement, config.external_research)`) ||
		!strings.Contains(ps[0].Message, "worc resolves an unknown fact to false silently") {
		t.Errorf("want one warning saying the unknown fact resolves false silently, got:\n%s", problemsText(ps))
	}
	f = mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, when: { fact: config.external_research } }"}, nil, ""))
	if ps := Validate(f, ValidateOptions{}); len(ps) != 1 || ps[0].Fatal || !strings.Contains(ps[0].Message, "config.external_research is false in this flow") {
		t.Errorf("want the inert-predicate warning, got:\n%s", problemsText(ps))
	}
}

func TestValidate_SkillsArePortableNamesNeverEmptyNorForbidden(t *testing.T) { // docs/contracts.md § Per-node overrides: skills, allow_skills
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"names", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, skills: [release-notes, api_docs] }"}, nil, ""), nil, ""},
		{"empty list", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, skills: [] }"}, nil, ""),
			[]string{"nodes[0].skills"}, "omit the key to turn skills off"},
		{"no path", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, skills: [ok, ../../etc] }"}, nil, ""),
			[]string{"nodes[0].skills[1]"}, `skills[1] "../../etc" must be one portable directory name`},
		{"not with allow_skills false", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, skills: [x], allow_skills: false }"}, nil, ""),
			[]string{"nodes[0].allow_skills"}, "sets skills and allow_skills: false"},
	})
}

func TestValidate_ToolIsANameNotAPath(t *testing.T) { // docs/contracts.md § Tools: resolved against the registry, not a path
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"path", graph([]string{"{ id: c, kind: tool, tool: ../bin/sh }", publish}, []string{"{ from: c, to: pub, outcome: pass }"}, ""),
			[]string{"nodes[0].tool"}, `tool "../bin/sh" must be a registered tool name`},
		{"absolute", graph([]string{"{ id: c, kind: tool, tool: /bin/sh }", publish}, []string{"{ from: c, to: pub, outcome: pass }"}, ""),
			[]string{"nodes[0].tool"}, "not a path"},
	})
}

func TestValidate_LineageCannotResumeAcrossProviders(t *testing.T) { // flow-authoring.md § Session scope: no resume across providers
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"same provider", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, session_scope: editing_lineage, provider: codex }",
			"{ id: b, kind: agent, role_file: t/b.md, lineage_affinity: a, provider: codex }"}, []string{"{ from: a, to: b }"}, ""), nil, ""},
		{"one pin", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, session_scope: editing_lineage, provider: codex }",
			"{ id: b, kind: agent, role_file: t/b.md, lineage_affinity: a }"}, []string{"{ from: a, to: b }"}, ""), nil, ""},
		{"conflicting pins", graph([]string{"{ id: a, kind: agent, role_file: t/a.md, session_scope: editing_lineage, provider: codex }",
			"{ id: b, kind: agent, role_file: t/b.md, lineage_affinity: a, provider: claude }"}, []string{"{ from: a, to: b }"}, ""),
			[]string{"nodes[1].lineage_affinity"}, "a session cannot resume across providers"},
	})
}

func TestValidate_DecompositionRegionIsConnectedEnteredAndLeft(t *testing.T) { // reference.md § Validation 1: sub_flow region connected
	t.Parallel()
	nodes := []string{"{ id: p, kind: agent, role_file: t/p.md }", agentA, "{ id: r, kind: evaluator, role: review, role_file: t/r.md }", agentB, publish}
	edges := []string{"{ from: p, to: a }", "{ from: a, to: r }", "{ from: r, to: b, outcome: rework, loop: fix }", "{ from: b, to: r }", "{ from: r, to: pub, outcome: accept }"}
	dec := func(sub string) string {
		return "  decomposition: { proposed_by: p, sub_flow: " + sub + ", shared_budget: fix }\n"
	}
	runRuleCases(t, []ruleCase{
		{"connected", graph(nodes, edges, "{ fix: 2 }") + dec("[a, r, b]"), nil, ""},
		{"not entered from proposed_by", graph(nodes, edges, "{ fix: 2 }") + dec("[r, b]"),
			[]string{"decomposition.sub_flow"}, `not entered from proposed_by "p"`},
		{"not connected", graph(nodes, edges, "{ fix: 2 }") + dec("[a, b]"),
			[]string{"decomposition.sub_flow"}, `b has no edge path to "a" inside it`},
		{"no forward exit", graph(nodes, edges, "{ fix: 2 }") + dec("[a, r, b, pub]"),
			[]string{"decomposition.sub_flow"}, "has no forward exit"},
		{"proposer outside the region", graph(nodes, edges, "{ fix: 2 }") + dec("[p, a, r, b]"),
			[]string{"decomposition.sub_flow"}, `contains proposed_by "p"`},
	})
}

func TestValidate_ExtraArgsPassTheForbiddenArgsScreen(t *testing.T) { // docs/contracts.md § Fatal validation: extra_args pass the forbidden-args screen
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{"harmless flags", graph([]string{`{ id: a, kind: agent, role_file: t/a.md, extra_args: ["--max-turns", "50", "--verbose"] }`}, nil, ""), nil, ""},
		{"full access", graph([]string{`{ id: a, kind: agent, role_file: t/a.md, extra_args: ["--verbose", "--sandbox", "danger-full-access"] }`}, nil, ""),
			[]string{"nodes[0].extra_args[1]"}, `extra_args[1] "--sandbox danger-full-access" selects Codex full access`},
		{"every offending flag", graph([]string{`{ id: a, kind: agent, role_file: t/a.md, extra_args: ["--yolo", "--model=opus", "--add-dir", "/"] }`}, nil, ""),
			[]string{"nodes[0].extra_args[0]", "nodes[0].extra_args[1]", "nodes[0].extra_args[2]"}, `"--yolo"`},
	})
}

func TestValidate_RoleFileSymlinkedOutsideTheFlowsDirIsFatal(t *testing.T) { // docs/contracts.md § Fatal validation: role_file paths contain no traversal
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(root, "t", "a.md")); err != nil {
		t.Skip("symlinks unavailable:", err)
	}
	f := mustParse(t, graph([]string{agentA}, nil, ""))
	ps := Fatal(Validate(f, ValidateOptions{RoleFileRoot: root}))
	if len(ps) != 1 || ps[0].Path != "nodes[0].role_file" || !strings.Contains(ps[0].Message, "outside the flows directory") {
		t.Errorf("want the symlink escape, got:\n%s", problemsText(ps))
	}
}

func TestValidate_OutputSchemaObjectsNeedAdditionalPropertiesFalse(t *testing.T) { // reference.md § agent node: output_schema
	t.Parallel()
	strict := `'{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","additionalProperties":false}}}'`
	loose := `'{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object"}}}'`
	if ps := Validate(mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_schema: " + strict + " }"}, nil, "")), ValidateOptions{}); len(ps) != 0 {
		t.Errorf("strict schema:\n%s", problemsText(ps))
	}
	ps := Validate(mustParse(t, graph([]string{"{ id: a, kind: agent, role_file: t/a.md, output_schema: " + loose + " }"}, nil, "")), ValidateOptions{})
	if len(ps) != 1 || ps[0].Fatal || !strings.Contains(ps[0].Message, "without additionalProperties: false (at /properties/a)") {
		t.Errorf("want one warning naming /properties/a, got:\n%s", problemsText(ps))
	}
}
