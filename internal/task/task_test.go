package task

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/testenv"
)

func TestLoad_MinimalPeerTaskDefaultsToImplementation(t *testing.T) { // SKILL.md § The task contract: task_type omitted ⇒ implementation
	t.Parallel()
	path := testenv.Peers(t, "worc", "tasks", "task-minimal.md")
	tk, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID != "task-pagination" || tk.Title != "Add page parameter to the users list endpoint" || tk.TaskType != "implementation" || tk.Path != path {
		t.Errorf("got %+v", tk)
	}
	if !strings.HasPrefix(tk.Body, "\n## Description\n") || !strings.Contains(tk.Body, "## Acceptance criteria") || strings.Contains(tk.Body, "id: task-pagination") {
		t.Errorf("body %q", tk.Body)
	}
	if len(tk.Front) != 2 {
		t.Errorf("front %v", tk.Front)
	}
}

func TestLoad_RichPeerTaskKeepsEveryAllowedKey(t *testing.T) { // SKILL.md § The task contract
	t.Parallel()
	tk, err := Load(testenv.Peers(t, "worc", "tasks", "task-rich.md"))
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID != "task-webhook-retry-budget" || tk.TaskType != "implementation" || tk.Title != "Add a bounded retry budget to webhook delivery" {
		t.Errorf("got %+v", tk)
	}
	if tk.Front["branch_name"] != "feature/ABC-123-webhook-retry-budget" || tk.Front["auto_merge"] != false || tk.Front["priority"] != "high" {
		t.Errorf("front %v", tk.Front)
	}
	nodes, _ := tk.Front["nodes"].(map[string]any)
	fixing, _ := nodes["fixing"].(map[string]any)
	if fixing["enabled"] != false {
		t.Errorf("nodes.fixing %v", nodes["fixing"])
	}
	if contacts, _ := tk.Front["contacts"].([]any); len(contacts) != 2 || contacts[0] != "@team-lead" {
		t.Errorf("contacts %v", tk.Front["contacts"])
	}
	if !strings.Contains(tk.Body, "## Constraints") {
		t.Errorf("body %q", tk.Body)
	}
}

func TestLoad_MissingFileIsNotFound(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "nope.md")); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("err %v, want ENOTFOUND", err)
	}
}

func TestParse_Rejections(t *testing.T) { // SKILL.md § Hard rules
	t.Parallel()
	cases := []struct {
		name, src, field, msg string
	}{
		{"no front matter", "# Title\n\nbody\n", "", "must start with a `---` line"},
		{"blank line before the fence", "\n---\nid: a\ntitle: b\n---\n", "", "must start with a `---` line"},
		{"unclosed front matter", "---\nid: a\ntitle: b\n", "", "no closing `---` line"},
		{"front matter not a mapping", "---\n- a\n---\n", "", "must be a YAML mapping of keys (id, title, ...), got a list"},
		{"invalid yaml", "---\nid: [\n---\n", "", "not valid YAML"},
		{"id required", "---\ntitle: b\n---\n", "id", "requires id"},
		{"title required", "---\nid: a\n---\n", "title", "requires title"},
		{"title not empty", "---\nid: a\ntitle: '  '\n---\n", "title", "want a non-empty string"},
		{"id is a string", "---\nid: 12\ntitle: b\n---\n", "id", "want a non-empty string"},
		{"id has no slash", "---\nid: a/b\ntitle: t\n---\n", "id", `id "a/b" is not a portable token`},
		{"id has no ..", "---\nid: a..b\ntitle: t\n---\n", "id", "no \"..\""},
		{"id does not start with a dot", "---\nid: .hidden\ntitle: t\n---\n", "id", "not a portable token"},
		{"id has no trailing dot", "---\nid: a.\ntitle: t\n---\n", "id", "not a portable token"},
		{"id is lowercase", "---\nid: Task-1\ntitle: t\n---\n", "id", "not a portable token"},
		{"id is not a device name", "---\nid: con.md\ntitle: t\n---\n", "id", "Windows device name"},
		{"unknown key", "---\nid: a\ntitle: t\nmodel: gpt\n---\n", "model",
			`unknown front-matter key "model"; allowed: id, title, task_type, branch_name, branch_mode, branch_ref, publish, trust_level, auto_merge, prompt_audit, decomposition, contacts, depends_on, subtasks, priority, queue, nodes`},
		{"task_type names one file", "---\nid: a\ntitle: t\ntask_type: ../x\n---\n", "task_type", "must name a flow"},
		{"enumerated value", "---\nid: a\ntitle: t\nbranch_mode: detached\n---\n", "branch_mode", "want one of new, existing, current"},
		{"branch name", "---\nid: a\ntitle: t\nbranch_name: bad..name\n---\n", "branch_name", "want a git branch name"},
		{"branch name HEAD", "---\nid: a\ntitle: t\nbranch_name: HEAD\n---\n", "branch_name", "want a git branch name"},
		{"existing needs branch_ref", "---\nid: a\ntitle: t\nbranch_mode: existing\n---\n", "branch_ref", "requires branch_ref"},
		{"bool value", "---\nid: a\ntitle: t\nauto_merge: yes please\n---\n", "auto_merge", "want true or false"},
		{"list value", "---\nid: a\ntitle: t\ndepends_on: task-0\n---\n", "depends_on", "want a list of task ids"},
		{"node override sub-key", "---\nid: a\ntitle: t\nnodes: {review: {skip: true}}\n---\n", "nodes.review.skip", "allowed: enabled, model, reasoning, provider"},
		{"node override type", "---\nid: a\ntitle: t\nnodes: {review: {enabled: 'no'}}\n---\n", "nodes.review.enabled", "want true or false"},
		{"argv-shaped value", "---\nid: a\ntitle: '--force'\n---\n", "title", "may not start with '-'"},
		{"shell token in a list", "---\nid: a\ntitle: t\ncontacts: ['@a', 'x; rm -rf /']\n---\n", "contacts[1]", "';'"},
		{"not UTF-8", "---\nid: a\ntitle: caf\xe9\n---\n", "", "not valid UTF-8: byte 0xe9 at byte offset 20 (line 3)"},
		// A number written with a leading zero is octal to YAML.
		{"octal id", "---\nid: 0123\ntitle: t\n---\n", "id", `id is 83 (YAML read 0123 as an octal number; quote it to keep the text: id: "0123")`},
		// Nesting is refused before any parse, at its line.
		{"nested 100,000 deep", "---\nid: a\ntitle: t\nx: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n---\n", "", "tasks/x.md:4:67: front matter: nesting depth 65 is over the limit of 64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("tasks/x.md", []byte(c.src))
			var se *stratus.Error
			if !errors.As(err, &se) || se.Code != stratus.EINVALID {
				t.Fatalf("err %v, want EINVALID", err)
			}
			if se.Field != c.field || !strings.Contains(se.Message, c.msg) || !strings.Contains(se.Message, "tasks/x.md") {
				t.Errorf("field %q message %q; want field %q and a message naming the file and containing %q", se.Field, se.Message, c.field, c.msg)
			}
		})
	}
}

func TestParse_AcceptsCRLFAndExplicitTaskType(t *testing.T) {
	t.Parallel()
	tk, err := Parse("x.md", []byte("---\r\nid: a.b_c-1\r\ntitle: T\r\ntask_type: blog_article\r\npriority: urgent\r\n---\r\nbody\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tk.ID != "a.b_c-1" || tk.TaskType != "blog_article" || tk.Body != "body\r\n" {
		t.Errorf("got %+v", tk)
	}
}

func TestParse_BodyMayBeEmptyAndHoldFences(t *testing.T) {
	t.Parallel()
	tk, err := Parse("x.md", []byte("---\nid: a\ntitle: t\n---\n"))
	if err != nil || tk.Body != "" {
		t.Fatalf("empty body: %+v %v", tk, err)
	}
	tk, err = Parse("x.md", []byte("---\nid: a\ntitle: t\n---\ntext\n---\nmore\n"))
	if err != nil || tk.Body != "text\n---\nmore\n" {
		t.Fatalf("body with a later fence: %q %v", tk.Body, err)
	}
}

// A front-matter error reads like a flow's problem, file:line:col first, the
// field named once; code still finds the field.
func TestParse_ErrorsCarryFileLineCol(t *testing.T) {
	for name, c := range map[string]struct{ src, want, field string }{
		"bad value":   {"---\nid: t1\ntitle: x\nmax_cost_usd: abc\n---\nbody\n", `tasks/x.md:4:1: max_cost_usd is "abc"`, "max_cost_usd"},
		"unknown key": {"---\nid: t1\ntitle: x\nbogus: 1\n---\n", `tasks/x.md:4:1: unknown front-matter key "bogus"`, "bogus"},
		"not YAML":    {"---\nid: [t1\n---\n", "tasks/x.md:2:5: front matter is not valid YAML: sequence end token ']' not found", ""},
	} {
		_, err := Parse("tasks/x.md", []byte(c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want it to start %q on one line", name, err, c.want)
			continue
		}
		var se *stratus.Error
		if c.field != "" && (!errors.As(err, &se) || se.Field != c.field || stratus.ErrorCode(err) != stratus.EINVALID) {
			t.Errorf("%s: %v does not name field %q", name, err, c.field)
		}
	}
}
