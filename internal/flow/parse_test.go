package flow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// worc's packaged flows must load unchanged (peers/worc/README.md).
func TestParse_EveryPeerFlowParses(t *testing.T) { // docs/contracts.md § Flows and task types
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(peerFlowsDir(t), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 7 {
		t.Fatalf("found %d peer flows, want the 7 copied ones", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(file, data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			stem := strings.TrimSuffix(filepath.Base(file), ".yaml")
			if f.TaskType != stem || f.Name == "" || len(f.Nodes) == 0 || len(f.Edges) == 0 {
				t.Errorf("got task_type %q name %q, %d nodes, %d edges", f.TaskType, f.Name, len(f.Nodes), len(f.Edges))
			}
		})
	}
}

func TestParse_ReadsEveryFieldOfImplementation(t *testing.T) { // reference.md § agent node, § decomposition
	t.Parallel()
	f, err := Load(peerFlowsDir(t), "implementation")
	if err != nil {
		t.Fatal(err)
	}
	if f.PermissionCeiling != WorkspaceWrite || f.OutputPolicy != "code_change" || f.Publishing != "pull_request" {
		t.Errorf("header: %+v", f)
	}
	ref := f.Node("refinement")
	if ref == nil || ref.Kind != KindAgent || ref.OutputArtifact != "enriched_spec" ||
		ref.When == nil || ref.When.Fact != "derived.needs_refinement" ||
		ref.HITL == nil || !ref.HITL.AllowQuestion || ref.HITL.AllowApproval {
		t.Errorf("refinement: %+v", ref)
	}
	if fx := f.Node("fixing"); fx == nil || fx.LineageAffinity != "implementation" || fx.ResumeRoleFile != "implementation/fixing.continue.md" {
		t.Errorf("fixing: %+v", fx)
	}
	if doc := f.Node("documentation"); doc == nil || doc.NetworkAccess == nil || *doc.NetworkAccess || doc.Reasoning != "medium" {
		t.Errorf("documentation: %+v", doc)
	}
	if got := f.Budgets; got["review_fix"] != 15 || got["test_fix"] != 15 || got["global_fix_iterations"] != 30 {
		t.Errorf("budgets: %v", got)
	}
	if d := f.Decomposition; d == nil || d.ProposedBy != "planning" || strings.Join(d.SubFlow, ",") != "implementation,testing,review,fixing" || d.SharedBudget != "global_fix_iterations" {
		t.Errorf("decomposition: %+v", d)
	}
	if s := f.Supervisor; s == nil || s.EmitFollowUps == nil || !*s.EmitFollowUps || s.Observe == nil || s.Observe.Mode != "events" {
		t.Errorf("supervisor: %+v", s)
	}
	e := f.Out("review")
	if len(e) != 2 || e[0].Outcome != "accept" || e[1].Loop != "review_fix" || e[1].To != "fixing" {
		t.Errorf("review out-edges: %+v", e)
	}
}

func TestParse_ReadsToolArgsAsFlatScalars(t *testing.T) { // reference.md § tool node
	t.Parallel()
	f, err := Load(peerFlowsDir(t), "content_translate")
	if err != nil {
		t.Fatal(err)
	}
	n := f.Node("constraints_en")
	if n.Tool != "check_chapter" || n.Args["min_chars"] != int64(1000) || n.Args["max_paragraphs"] != int64(8) {
		t.Errorf("constraints_en: %+v", n)
	}
}

func TestParse_UnknownKeyFailsClosedWithPositionAndAllowedKeys(t *testing.T) { // reference.md: every mapping is a fail-closed allowlist
	t.Parallel()
	cases := []struct {
		name, yaml, want string
	}{
		{"top level", "flow: {name: x}\nflows: {}\n",
			`t.yaml:2:1: unknown key "flows" in the document; allowed: flow`},
		{"flow block", "flow:\n  name: x\n  colour: red\n",
			`t.yaml:3:3: unknown key "colour" in flow; allowed: budgets, check_policy, decomposition, defaults, edges, name, network_policy, nodes, output_policy, permission_ceiling, publishing, submit_format, supervisor, task_type`},
		{"node keys depend on kind", "flow:\n  nodes:\n    - id: testing\n      kind: checks\n      role_file: x.md\n",
			`t.yaml:5:7: unknown key "role_file" in nodes[0] (checks "testing"); allowed: checker, id, kind, manifest, when`},
		{"evaluator has no timeout_seconds", "flow:\n  nodes:\n    - {id: r, kind: evaluator, timeout_seconds: 5}\n",
			`t.yaml:3:32: unknown key "timeout_seconds" in nodes[0] (evaluator "r"); allowed: `},
		{"edge", "flow:\n  edges:\n    - { from: a, to: b, when: x }\n",
			`t.yaml:3:25: unknown key "when" in edges[0]; allowed: budget, from, loop, outcome, to`},
		{"nested block", "flow:\n  supervisor:\n    observe: { mode: none, every: 3 }\n",
			`t.yaml:3:28: unknown key "every" in supervisor.observe; allowed: mode`},
		{"when", "flow:\n  nodes:\n    - {id: a, kind: agent, when: {fact: derived.x, unless: y}}\n",
			`unknown key "unless" in nodes[0].when; allowed: equals, fact`},
		{"defaults", "flow:\n  defaults:\n    agent: {}\n",
			`t.yaml:3:5: unknown key "agent" in defaults; allowed: evaluator`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatal("Parse accepted an unknown key")
			}
			if stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("code %q, want %q", stratus.ErrorCode(err), stratus.EINVALID)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%s\nwant it to contain:\n%s", err, c.want)
			}
		})
	}
}

func TestParse_ReportsEveryProblemNotOnlyTheFirst(t *testing.T) { // docs/contracts.md § Fatal validation: all collected
	t.Parallel()
	_, err := Parse("t.yaml", []byte("flow:\n  nam: x\n  nodes:\n    - {id: a, kind: agent, rolefile: a.md}\n  edges:\n    - {from: a, to: b, budget: lots}\n"))
	if err == nil {
		t.Fatal("Parse accepted a bad flow")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 ||
		!strings.HasPrefix(lines[0], `t.yaml:2:3: unknown key "nam"`) ||
		!strings.HasPrefix(lines[1], `t.yaml:4:28: unknown key "rolefile"`) ||
		!strings.HasPrefix(lines[2], `t.yaml:6:32: edges[0].budget must be an integer, got string "lots"`) {
		t.Errorf("got:\n%s", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) || len(pe.Problems) != 3 || pe.Problems[1].Path != "nodes[0].rolefile" || pe.Problems[1].Line != 4 || pe.Problems[1].Col != 28 {
		t.Errorf("structured problems: %+v", pe)
	}
}

func TestParse_WrongValueTypesFail(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want string }{
		{"tool args must be flat", "  nodes:\n    - {id: c, kind: tool, tool: x, args: {levels: [1, 2]}}\n", "nodes[0].args.levels must be a scalar"},
		{"bool field", "  nodes:\n    - {id: a, kind: agent, best_effort: sometimes}\n", "nodes[0].best_effort must be true or false"},
		{"list field", "  nodes:\n    - {id: a, kind: agent, extra_args: --fast}\n", "nodes[0].extra_args must be a list"},
		{"nodes must be a list", "  nodes: {a: 1}\n", "nodes must be a list, got a mapping"},
		{"budget value", "  budgets: {fix: null}\n", "budgets.fix must be an integer iteration cap, got null"},
		{"duplicate key", "  name: again\n", `t.yaml:7:3: duplicate key "name" (first at line 2, column 3)`},
		{"unknown alias", "  nodes: *nodes\n", "alias *nodes names no anchor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", []byte(header+c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParse_RejectsNonFlowDocuments(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"empty":          "",
		"comment only":   "# nothing\n",
		"two documents":  "flow: {name: a}\n---\nflow: {name: b}\n",
		"not a mapping":  "- flow\n",
		"no flow key":    "{}\n",
		"invalid yaml":   "flow: [\n",
		"flow is scalar": "flow: implementation\n",
		"null document":  "~\n",
		"flow is null":   "flow:\n",
		"null node":      "flow:\n  nodes:\n    -\n",
		"merge scalar":   "flow:\n  <<: x\n",
		"merge itself":   "flow:\n  nodes:\n    - &n {id: a, kind: agent, <<: *n}\n",
		"not UTF-8":      "flow:\n  name: caf\xe9\n",
		"too large":      "flow:\n  name: x\n" + strings.Repeat("#", MaxFlowBytes) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := Parse("t.yaml", []byte(src)); stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("Parse(%q) = %v, want EINVALID", src, err)
			}
		})
	}
}

func TestParse_KeepsSourcePositions(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `  nodes:
    - id: a
      kind: agent
      role_file: t/a.md
    - { id: p, kind: publish, policy: pull_request }
  edges:
    - { from: a, to: p }
  budgets:
    fix: 3
`)
	if got := f.Nodes[0].Pos; got != (Pos{8, 7}) {
		t.Errorf("nodes[0] at %v, want 8:7", got)
	}
	if got := f.Nodes[0].Fields["role_file"]; got != (Pos{10, 7}) {
		t.Errorf("nodes[0].role_file at %v, want 10:7", got)
	}
	if got := f.Nodes[1].Fields["policy"]; got != (Pos{11, 31}) {
		t.Errorf("nodes[1].policy at %v, want 11:31", got)
	}
	if got := f.Edges[0].Fields["to"]; got != (Pos{13, 18}) {
		t.Errorf("edges[0].to at %v, want 13:18", got)
	}
	if got := f.Fields["budgets.fix"]; got != (Pos{15, 5}) {
		t.Errorf("budgets.fix at %v, want 15:5", got)
	}
	if f.Nodes[1].Index != 1 || f.Edges[0].Index != 0 {
		t.Errorf("indexes: node %d edge %d", f.Nodes[1].Index, f.Edges[0].Index)
	}
}

func TestParse_ResolvesAnchorsAndAliases(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `  nodes:
    - id: a
      kind: agent
      role_file: &rf t/a.md
    - id: b
      kind: agent
      role_file: *rf
`)
	if f.Nodes[1].RoleFile != "t/a.md" {
		t.Errorf("alias resolved to %q", f.Nodes[1].RoleFile)
	}
}

func TestLoad_ReadsTheFlowNamedByTaskType(t *testing.T) { // docs/contracts.md § Flows and task types: <repo>/.worc/flows/<task_type>.yaml
	t.Parallel()
	f, err := Load(filepath.Join("..", "builtin", "flows"), "implementation")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "implementation" || f.File != filepath.Join("..", "builtin", "flows", "implementation.yaml") || f.Entry() == nil || f.Entry().ID != "planning" {
		t.Errorf("implementation: name %q file %q entry %+v", f.Name, f.File, f.Entry())
	}
}

func TestLoad_MissingFlowIsNotFoundNamingThePath(t *testing.T) { // docs/contracts.md § Flows and task types: a task_type with no file is a hard "flow not found"
	t.Parallel()
	dir := t.TempDir()
	_, err := Load(dir, "deep_research")
	if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Fatalf("err %v, want ENOTFOUND", err)
	}
	want := filepath.Join(dir, "deep_research.yaml")
	if !strings.Contains(err.Error(), "flow not found") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "there is no flow (*.yaml) in "+dir) {
		t.Errorf("error %q should say flow not found, name %s and that there is none", err, want)
	}
	// With flows there, the error lists them.
	for _, n := range []string{"b_flow", "a_flow"} {
		os.WriteFile(filepath.Join(dir, n+".yaml"), []byte(header), 0o644)
	}
	if _, err := Load(dir, "deep_research"); err == nil || !strings.HasSuffix(err.Error(), "; flows there: a_flow, b_flow") {
		t.Errorf("error %v should list the flows there", err)
	}
}

func TestLoad_TaskTypeMustEqualFileStem(t *testing.T) { // reference.md § Flow-level fields: task_type
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(strings.Replace(header, "task_type: t", "task_type: other", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, "mine")
	var se *stratus.Error
	if !errors.As(err, &se) || se.Code != stratus.EINVALID || !strings.Contains(se.Message, `mine.yaml:3:3: task_type "other" must equal the file stem "mine"`) {
		t.Errorf("err %v", err)
	}
}

func TestLoad_RejectsTaskTypesThatAreNotOneFileName(t *testing.T) {
	t.Parallel()
	for _, tt := range []string{"", "../secrets", "a/b", ".hidden", `a\b`} {
		if _, err := Load(t.TempDir(), tt); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("Load(%q) = %v, want EINVALID", tt, err)
		}
	}
}
