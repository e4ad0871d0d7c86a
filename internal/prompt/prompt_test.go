package prompt_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/contracts.md § Template variables, § Prompt templates: every vector of
// testdata/cases/template.
func TestRender_SharedVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(testenv.Cases(t, "template", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string            `json:"name"`
		Template string            `json:"template"`
		Vars     map[string]string `json:"vars"`
		Nodes    []string          `json:"nodes"`
		Want     string            `json:"want"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no template vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if got := prompt.Render(c.Template, c.Vars, c.Nodes); got != c.Want {
				t.Errorf("Render(%q)\n got %q\nwant %q", c.Template, got, c.Want)
			}
		})
	}
}

// docs/contracts.md § Template variables: one pass — a substituted value is
// never expanded again, inside or outside a block.
func TestRender_OnePassValuesNeverReexpanded(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"task_id":     "T1",
		"stage":       "{task_id}",
		"plan_path":   "{?task_id}x{/task_id}",
		"memory_path": "{stage}",
	}
	tests := []struct{ tmpl, want string }{
		{"{stage}", "{task_id}"},
		{"{plan_path}", "{?task_id}x{/task_id}"},
		{"{?memory_path}[{memory_path}|{stage}]{/memory_path}", "[{stage}|{task_id}]"},
		{"{{task_id}}", "{T1}"},
	}
	for _, tt := range tests {
		if got := prompt.Render(tt.tmpl, vars, nil); got != tt.want {
			t.Errorf("Render(%q) = %q, want %q", tt.tmpl, got, tt.want)
		}
	}
}

// docs/contracts.md § Prompt templates: blocks do not nest, a stray close
// marker is text, and vars outside the allowlist never render.
func TestRender_BlocksDoNotNest(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"plan_path": "p", "diff_path": "d", "secret": "s", "planning_path": "pp"}
	tests := []struct {
		name, tmpl, want string
		nodes            []string
	}{
		{"inner markers stay text", "{?plan_path}<{?diff_path}{diff_path}{/diff_path}>{/plan_path}", "<{?diff_path}d{/diff_path}>", nil},
		{"block ends at first close", "{?plan_path}a{/plan_path}b{/plan_path}", "ab{/plan_path}", nil},
		{"stray close verbatim", "x{/plan_path}y", "x{/plan_path}y", nil},
		{"var outside allowlist never renders", "{secret}{?secret}S{/secret}", "{secret}{?secret}S{/secret}", nil},
		{"node path block", "{?planning_path}see {planning_path}{/planning_path}", "see pp", []string{"planning"}},
		{"node path block without node", "{?planning_path}see{/planning_path}", "{?planning_path}see{/planning_path}", nil},
		{"dropped block swallows its tokens", "a{?review_path}{plan_path}{/review_path}b", "ab", nil},
		{"unclosed block then another", "{?plan_path}x {?diff_path}y{/diff_path}", "{?plan_path}x y", nil},
		{"brace at end", "{plan_path}{", "p{", nil},
		{"empty braces", "{}{?}{/}", "{}{?}{/}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := prompt.Render(tt.tmpl, vars, tt.nodes); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.tmpl, got, tt.want)
			}
		})
	}
}

// docs/contracts.md § Fatal validation: the tokens a template references, in
// order, without duplicates; braces that are not tokens are not reported.
func TestTokens_ListsReferencedNamesForTheLint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tmpl string
		want []string
	}{
		{"Task {task_id} at {stage}, again {task_id}.", []string{"task_id", "stage"}},
		{"A{?memory_path}See {memory_path}.{/memory_path}", []string{"memory_path"}},
		{"typo {plna_path} {?memory_path}x{/memry_path}", []string{"plna_path", "memory_path", "memry_path"}},
		{`Reply {"verdict": "pass"} or { x } or {1} or {a b}`, nil},
		{"func f() { return {x} }", []string{"x"}},
		{"{my-node_path}", []string{"my-node_path"}},
	}
	for _, tt := range tests {
		if got := prompt.Tokens(tt.tmpl); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.tmpl, got, tt.want)
		}
	}
}

// docs/contracts.md § Template variables: node ids colliding with a core stem
// are reserved.
func TestReservedNodeID_CoreStemsAndSubtaskPrefix(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"task": true, "plan": true, "diff": true, "change_overview": true, "checks": true,
		"review": true, "repo": true, "memory": true, "stage": true, "conflicts": true,
		"subtask": true, "subtask_spec": true, "subtasks": true,
		"planning": false, "implementation": false, "reviewer": false, "Plan": false,
		"task_id": false, "my_subtask": false, "": false,
	} {
		if got := prompt.ReservedNodeID(id); got != want {
			t.Errorf("ReservedNodeID(%q) = %v, want %v", id, got, want)
		}
	}
}

// docs/contracts.md § Template variables: the valid set is CoreVars plus
// <node>_path per node, derived from the flow graph.
func TestAllowlist_CoreVarsPlusNodePaths(t *testing.T) {
	t.Parallel()
	got := prompt.Allowlist([]string{"planning", "lint", "planning"})
	want := append(slices.Clone(prompt.CoreVars), "planning_path", "lint_path")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Allowlist = %q, want %q", got, want)
	}
	// docs/contracts.md § Template variables lists 18;
	// flow-authoring.md § Where a node's output goes
	// adds summary_body_path, the summary slot's variable.
	if len(prompt.CoreVars) != 19 || prompt.CoreVars[18] != "summary_body_path" {
		t.Errorf("CoreVars = %q, want the 18 of docs/contracts.md § Template variables then summary_body_path", prompt.CoreVars)
	}
}

// flow-authoring.md § Where a node's output goes: {summary_body_path} is
// the summary slot's core variable, allowlisted without any node;
// docs/contracts.md § Template variables: without a value it renders empty.
func TestRender_SummaryBodyPathIsCore(t *testing.T) {
	t.Parallel()
	tmpl := "[{summary_body_path}]{?summary_body_path} see it{/summary_body_path}"
	if got := prompt.Render(tmpl, map[string]string{"summary_body_path": "/c/summary.md"}, nil); got != "[/c/summary.md] see it" {
		t.Errorf("with a value: %q", got)
	}
	if got := prompt.Render(tmpl, nil, nil); got != "[]" {
		t.Errorf("without a value: %q", got)
	}
}
