package flow

import (
	"strings"
	"testing"
)

func TestScreenArgs_RejectsFullAccessAndStratusOwnedFlags(t *testing.T) { // docs/contracts.md § Fatal validation: the forbidden-args screen
	t.Parallel()
	cases := []struct {
		args    []string
		arg     string // the rejected flag as shown
		why     string // fragment of what it selects
		instead string // fragment of what to use instead
	}{
		{[]string{"--dangerously-skip-permissions"}, "--dangerously-skip-permissions", "disables approvals", "never runs a node without isolation"},
		{[]string{"--dangerously-bypass-approvals-and-sandbox"}, "--dangerously-bypass-approvals-and-sandbox", "disables approvals", "permission_profile and network_access"},
		{[]string{"--allow-dangerously-skip-permissions"}, "--allow-dangerously-skip-permissions", "disables approvals", ""},
		{[]string{"--permission-mode", "bypassPermissions"}, "--permission-mode bypassPermissions", "Claude's full-access mode", "set permission_profile"},
		{[]string{"--permission-mode=acceptEdits"}, "--permission-mode=acceptEdits", "Claude's permission mode", "set permission_profile"},
		{[]string{"--sandbox", "danger-full-access"}, "--sandbox danger-full-access", "Codex full access", "set permission_profile and network_access"},
		{[]string{"-s", "danger-full-access"}, "-s danger-full-access", "Codex full access", ""},
		{[]string{"-sdanger-full-access"}, "-sdanger-full-access", "Codex full access", ""},
		{[]string{"--sandbox=workspace-write"}, "--sandbox=workspace-write", "the Codex sandbox", ""},
		{[]string{"--yolo"}, "--yolo", "approval policy", "set permission_profile"},
		{[]string{"--full-auto"}, "--full-auto", "approval policy", ""},
		{[]string{"-a", "never"}, "-a never", "approval policy", ""},
		{[]string{"--allowedTools", "Bash"}, "--allowedTools Bash", "tools", "skills / allow_skills"},
		{[]string{"--disallowed-tools=Edit"}, "--disallowed-tools=Edit", "tools", ""},
		{[]string{"--add-dir", "../lib"}, "--add-dir ../lib", "directories", "working directory is the provider's dir"},
		{[]string{"-c", "model_reasoning_effort=high"}, "-c model_reasoning_effort=high", "configuration", "node's fields"},
		{[]string{"--config=x"}, "--config=x", "configuration", ""},
		{[]string{"--output-format", "text"}, "--output-format text", "output plumbing", "submit_format or output_schema"},
		{[]string{"--json"}, "--json", "output plumbing", ""},
		{[]string{"--resume", "abc"}, "--resume abc", "session", "session_scope, lineage_affinity and resume_role_file"},
		{[]string{"--continue"}, "--continue", "session", ""},
		{[]string{"--model", "opus"}, "--model opus", "model or provider", "node's model and provider fields"},
		{[]string{"--provider=openai"}, "--provider=openai", "model or provider", ""},
		{[]string{"--append-system-prompt", "be brief"}, "--append-system-prompt be brief", "system prompt", "role_file"},
		{[]string{"--search"}, "--search", "web search", "network_access: true"},
	}
	for _, c := range cases {
		t.Run(c.arg, func(t *testing.T) {
			t.Parallel()
			ps := ScreenArgs(c.args)
			if len(ps) != 1 {
				t.Fatalf("ScreenArgs(%q) = %+v, want one problem", c.args, ps)
			}
			p := ps[0]
			if p.Index != 0 || p.Arg != c.arg || !strings.HasPrefix(p.Message, `"`+c.arg+`" `) ||
				!strings.Contains(p.Message, c.why) || !strings.Contains(p.Message, c.instead) ||
				!strings.Contains(p.Message, "docs/security.md § Forbidden engine arguments") {
				t.Errorf("got %+v\nwant arg %q, why %q, instead %q", p, c.arg, c.why, c.instead)
			}
		})
	}
}

func TestScreenArgs_PassesFlagsStratusDoesNotOwn(t *testing.T) { // docs/contracts.md § Fatal validation: only the screened flags fail
	t.Parallel()
	args := []string{"--max-turns", "50", "--verbose", "plain-word", "--", "-", "--debug=api"}
	if ps := ScreenArgs(args); len(ps) != 0 {
		t.Errorf("ScreenArgs(%q) = %+v, want none", args, ps)
	}
	// Every offending entry is reported, each at its own index.
	ps := ScreenArgs([]string{"--verbose", "--yolo", "--max-turns", "3", "--model=x"})
	if len(ps) != 2 || ps[0].Index != 1 || ps[1].Index != 4 {
		t.Errorf("got %+v", ps)
	}
}
