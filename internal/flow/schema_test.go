package flow

import (
	"slices"
	"strings"
	"testing"
)

// Every mapping of a flow file is a fail-closed allowlist (reference.md:
// "an unknown key anywhere is a fatal load error"): one case per mapping,
// each checking the position and the allowed keys the error lists.
func TestParse_UnknownKeyRejectedInEveryMapping(t *testing.T) { // docs/contracts.md § Fatal validation: unknown fields anywhere fail closed
	t.Parallel()
	node := func(kind, extra string) string {
		return "flow:\n  nodes:\n    - id: n\n      kind: " + kind + "\n" + extra
	}
	cases := []struct {
		mapping string
		yaml    string
		at      string // file:line:col of the unknown key
		where   string
		allowed []string
	}{
		{"document", "flow: {name: x}\nextra: 1\n", "t.yaml:2:1", "the document", topKeys},
		{"flow", "flow:\n  name: x\n  extra: 1\n", "t.yaml:3:3", "flow", flowKeys},
		{"defaults", "flow:\n  defaults:\n    extra: {}\n", "t.yaml:3:5", "defaults", defaultsKeys},
		{"defaults.evaluator", "flow:\n  defaults:\n    evaluator: { blocking: false }\n", "t.yaml:3:18", "defaults.evaluator", evalDefaultsKeys},
		{"supervisor", "flow:\n  supervisor:\n    provider: codex\n", "t.yaml:3:5", "supervisor", supervisorKeys},
		{"supervisor.observe", "flow:\n  supervisor:\n    observe: { mode: none, triggers: [rework] }\n", "t.yaml:3:28", "supervisor.observe", observeKeys},
		{"decomposition", "flow:\n  decomposition:\n    proposed_by: p\n    max_subtasks: 3\n", "t.yaml:4:5", "decomposition", decompositionKeys},
		{"edges[]", "flow:\n  edges:\n    - { from: a, to: b, weight: 2 }\n", "t.yaml:3:25", "edges[0]", edgeKeys},
		{"agent node", node("agent", "      sandbox: x\n"), "t.yaml:5:7", `nodes[0] (agent "n")`, allowedNodeKeys(KindAgent)},
		{"evaluator node", node("evaluator", "      output_file: x.md\n"), "t.yaml:5:7", `nodes[0] (evaluator "n")`, allowedNodeKeys(KindEvaluator)},
		{"checks node", node("checks", "      command: make\n"), "t.yaml:5:7", `nodes[0] (checks "n")`, allowedNodeKeys(KindChecks)},
		{"tool node", node("tool", "      argv: [x]\n"), "t.yaml:5:7", `nodes[0] (tool "n")`, allowedNodeKeys(KindTool)},
		{"hitl node", node("hitl", "      timeout_seconds: 5\n"), "t.yaml:5:7", `nodes[0] (hitl "n")`, allowedNodeKeys(KindHITL)},
		{"publish node", node("publish", "      branch: main\n"), "t.yaml:5:7", `nodes[0] (publish "n")`, allowedNodeKeys(KindPublish)},
		{"node of unknown kind", node("robot", "      wheels: 4\n"), "t.yaml:5:7", "nodes[0]", allowedNodeKeys("robot")},
		{"when", node("agent", "      when: { fact: derived.x, not: true }\n"), "t.yaml:5:32", "nodes[0].when", whenKeys},
		{"hitl grant", node("agent", "      hitl: { allow_question: true, allow_anything: true }\n"), "t.yaml:5:37", "nodes[0].hitl", hitlGrantKeys},
		{"verdicts", node("agent", "      verdicts: { allowed: [ok], default: ok }\n"), "t.yaml:5:34", "nodes[0].verdicts", verdictsKeys},
		{"context", node("agent", "      context: { steps: [], files: [] }\n"), "t.yaml:5:29", "nodes[0].context", contextKeys},
	}
	for _, c := range cases {
		t.Run(c.mapping, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatal("Parse accepted an unknown key")
			}
			allowed := slices.Clone(c.allowed)
			slices.Sort(allowed)
			want := " in " + c.where + "; allowed: " + strings.Join(allowed, ", ")
			if !strings.Contains(err.Error(), c.at+": unknown key ") || !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%s\nwant %s: unknown key ...%s", err, c.at, want)
			}
		})
	}
}

// Every field of reference.md's tables (and the Stratus extensions) is
// accepted where the reference puts it.
func TestParse_AcceptsEveryReferenceField(t *testing.T) { // reference.md § Flow-level fields, § Node kinds, § Edges
	t.Parallel()
	src := `flow:
  name: every
  task_type: every
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  network_policy: research
  submit_format: json
  check_policy: strict
  defaults:
    evaluator: { session_scope: fresh_disposable, permission_profile: read-only, max_rework_per_stage: 2, gate_severity: medium }
  nodes:
    - id: author
      kind: agent
      role_file: every/author.md
      resume_role_file: every/author.continue.md
      session_scope: editing_lineage
      lineage_affinity: null
      permission_profile: workspace-write
      network_access: false
      git_evidence: null
      provider: claude
      model: claude-opus-5
      reasoning: high
      timeout_seconds: 600
      output_file: notes.md
      output_schema: '{"type":"object","additionalProperties":false}'
      best_effort: false
      hitl: { allow_question: true, allow_approval: false }
      extra_args: ["--max-turns", "50"]
      skills: [release-notes]
      allow_skills: true
      when: { fact: derived.needs_refinement, equals: true }
      submit_format: text
      verdicts: { allowed: [done], channel: body }
      context: { steps: [] }
    - id: judge
      kind: evaluator
      role: critic
      role_file: every/judge.md
      resume_role_file: every/judge.continue.md
      session_scope: resume_own_lineage
      permission_profile: read-only
      network_access: true
      git_evidence: true
      blocking: false
      max_rework_per_stage: 2
      gate_severity: low
      provider: codex
      model: gpt-5.5
      reasoning: medium
      when: { fact: config.external_research }
      submit_format: json
      verdicts: { allowed: [accept, rework] }
      context: { steps: [author] }
    - { id: gate, kind: checks, checker: citation, manifest: sources.json, when: { fact: config.external_research } }
    - { id: lint, kind: tool, tool: check_length, args: { min: 1, ratio: 0.5, strict: true, name: x }, timeout_seconds: 30, when: { fact: config.external_research } }
    - { id: ask, kind: hitl, signal: question, question: "Which one for {task_id}?", timeout_s: 60, when: { fact: config.external_research } }
    - { id: ship, kind: publish, policy: pull_request, when: { fact: config.external_research } }
  edges:
    - { from: author, to: judge, outcome: null }
    - { from: judge, to: author, outcome: rework, loop: fix }
    - { from: judge, to: gate, outcome: accept, budget: null }
  budgets: { fix: 3 }
  supervisor:
    role_file: every/supervisor.md
    finalize_role_file: every/summary.md
    handoff_role_file: every/handoff.md
    emit_follow_ups: true
    observe: { mode: events }
  decomposition: { proposed_by: author, sub_flow: [judge], shared_budget: fix }
`
	f, err := Parse("every.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse rejected a documented field:\n%v", err)
	}
	a := f.Node("author")
	if a.OutputFile != "notes.md" || a.AllowSkills == nil || !*a.AllowSkills || len(a.Skills) != 1 || a.ResumeRoleFile == "" ||
		a.OutputSchema == "" || a.HITL == nil || a.When.Equals != true {
		t.Errorf("author: %+v", a)
	}
	if j := f.Node("judge"); j.GitEvidence == nil || !*j.GitEvidence || j.Blocking == nil || *j.Blocking || *j.MaxReworkPerStage != 2 {
		t.Errorf("judge: %+v", j)
	}
	if g := f.Node("gate"); g.Manifest != "sources.json" {
		t.Errorf("gate: %+v", g)
	}
	if h := f.Node("ask"); h.Signal != "question" || h.TimeoutS == nil || *h.TimeoutS != 60 {
		t.Errorf("ask: %+v", h)
	}
	if s := f.Supervisor; s.HandoffRoleFile != "every/handoff.md" || s.Observe.Mode != "events" {
		t.Errorf("supervisor: %+v", s)
	}
	if f.Defaults.Evaluator.GateSeverity != "medium" || f.SubmitFormat != "json" || f.CheckPolicy != "strict" {
		t.Errorf("header: %+v", f)
	}
}
