package flow

import (
	"fmt"
	"strings"
)

// ArgProblem is one extra_args entry the forbidden-args screen rejects.
type ArgProblem struct {
	Index   int    // position of the flag in the list
	Arg     string // the flag as written, with its value when it takes one
	Message string // what the flag selects and what to use instead
}

// argRule is one group of flags a flow may not pass to an engine.
type argRule struct {
	flags    []string // exact flag names ("--sandbox", "-s"); a short flag also matches glued ("-sX")
	prefixes []string // or any flag starting with one of these
	value    bool     // the flag takes a value (shown in messages)
	why      func(value string) string
	instead  string // a clause saying what to use instead
}

func fixed(s string) func(string) string { return func(string) string { return s } }

// forbiddenArgs is the forbidden-args screen of
// docs/contracts.md § Fatal validation ("extra_args pass the forbidden-args
// screen"; "no node's extra_args selects a provider full-access mode (Codex
// --sandbox danger-full-access / Claude --permission-mode
// bypassPermissions)"), applied to a node's extra_args at every value of
// security.strict_isolation (reference.md § agent node: "rejected at any
// value of strict_isolation"). It follows worc configuration.md § extra_args
// ("What is always forbidden", "Reserved Claude extra_args (WRI-002)",
// "Reserved Codex extra_args (WRI-003)") and rejects, in both split (--flag
// X) and inline (--flag=X) form:
//
//   - full access and approvals: every --dangerously* / --allow-dangerously*
//     flag, --yolo, --ignore-rules, --full-auto, -a/--ask-for-approval,
//     --permission-mode (any value; bypassPermissions is Claude's full
//     access), -s/--sandbox (any value; danger-full-access is Codex's full
//     access), -p/--profile, -P/--permission-profile: Stratus derives the
//     sandbox and approval mode from permission_profile and network_access;
//   - network: --search (web search is the network_access grant);
//   - tools: --tools, --allowedTools/--allowed-tools, --disallowedTools/
//     --disallowed-tools, --enable/--disable, --mcp-config,
//     --strict-mcp-config, --agent/--agents, --plugin-dir/--plugin-url;
//   - workspace: --add-dir, -C/--cd, --file, -w/--worktree,
//     --skip-git-repo-check;
//   - configuration: -c/--config (Codex config overrides; Claude's -c is
//     --continue), --settings, --setting-sources, --ignore-user-config,
//     --strict-config;
//   - output plumbing: --output-format, --input-format, --json,
//     --output-schema, -o/--output-last-message, --color, --print: use
//     submit_format or output_schema;
//   - sessions: --resume/-r, --continue, --session-id, --fork-session,
//     --no-session-persistence, --from-pr, --ephemeral: use session_scope,
//     lineage_affinity and resume_role_file;
//   - model and provider: --model/-m, --fallback-model, --provider, --oss,
//     --local-provider: use the node's model and provider fields;
//   - system prompt: --system-prompt[-file], --append-system-prompt[-file]:
//     use role_file;
//   - adapter surfaces: --chrome, --no-chrome, --ide, --remote-control*,
//     --bg/--background, --tmux, --safe-mode, --bare,
//     --disable-slash-commands.
var forbiddenArgs = []argRule{
	{prefixes: []string{"--dangerously", "--allow-dangerously"},
		why:     fixed("disables approvals, the sandbox or hook trust wholesale"),
		instead: "there is no flow-side equivalent: Stratus never runs a node without isolation; grant what the node needs with permission_profile and network_access"},
	{flags: []string{"--yolo", "--ignore-rules", "--full-auto"},
		why:     fixed("turns off or selects the approval policy, which Stratus owns"),
		instead: "set permission_profile (read-only | workspace-write) instead"},
	{flags: []string{"-a", "--ask-for-approval"}, value: true,
		why:     fixed("selects the approval policy, which Stratus owns"),
		instead: "set permission_profile (read-only | workspace-write) instead"},
	{flags: []string{"--permission-mode"}, value: true,
		why: func(v string) string {
			if v == "bypassPermissions" {
				return "selects Claude's full-access mode (bypassPermissions: no isolation)"
			}
			return "selects Claude's permission mode, which Stratus derives from the node's permission_profile"
		},
		instead: "set permission_profile (read-only | workspace-write) instead"},
	{flags: []string{"--sandbox", "-s"}, value: true,
		why: func(v string) string {
			if v == "danger-full-access" {
				return "selects Codex full access (danger-full-access: no isolation)"
			}
			return "selects the Codex sandbox, which Stratus derives from permission_profile and network_access"
		},
		instead: "set permission_profile and network_access instead"},
	{flags: []string{"-p", "--profile", "-P", "--permission-profile"}, value: true,
		why:     fixed("selects an engine profile or permission profile (Claude's -p is --print), which Stratus owns"),
		instead: "set permission_profile instead (engine options belong in the provider's launch spec in config.yaml)"},
	{flags: []string{"--search"},
		why:     fixed("turns on web search, which is the node's network grant"),
		instead: "set network_access: true on the node (or the flow's network_policy) instead"},
	{flags: []string{"--tools", "--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools", "--enable", "--disable",
		"--mcp-config", "--agent", "--agents", "--plugin-dir", "--plugin-url"}, value: true,
		why:     fixed("changes the tools, MCP servers or agents the engine may use, which Stratus owns"),
		instead: "use skills / allow_skills for repository skills and permission_profile for what the node may change"},
	{flags: []string{"--strict-mcp-config"},
		why:     fixed("changes the MCP configuration, which Stratus owns"),
		instead: "there is no flow-side equivalent: the engine's setup is the provider's launch spec in config.yaml"},
	{flags: []string{"--add-dir", "-C", "--cd", "--file", "-w", "--worktree"}, value: true,
		why:     fixed("changes the directories the engine reads or writes, which Stratus confines to the work dir"),
		instead: "there is no flow-side equivalent: the working directory is the provider's dir in config.yaml"},
	{flags: []string{"--skip-git-repo-check"},
		why:     fixed("changes the workspace checks the engine adapter relies on"),
		instead: "there is no flow-side equivalent: the working directory is the provider's dir in config.yaml"},
	{flags: []string{"-c", "--config", "--settings", "--setting-sources"}, value: true,
		why:     fixed("overrides the engine's configuration, which Stratus isolates (Codex -c/--config; Claude's -c is --continue)"),
		instead: "use the node's fields (provider, model, reasoning, timeout_seconds, network_access) or the provider's launch spec in config.yaml instead"},
	{flags: []string{"--ignore-user-config", "--strict-config"},
		why:     fixed("changes how the engine loads its configuration, which Stratus isolates"),
		instead: "put engine options in the provider's launch spec in config.yaml instead"},
	{flags: []string{"--output-format", "--input-format", "--output-schema", "-o", "--output-last-message", "--color"}, value: true,
		why:     fixed("changes the output plumbing Stratus reads the node's result from"),
		instead: "use submit_format or output_schema instead"},
	{flags: []string{"--json", "--print"},
		why:     fixed("changes the output plumbing Stratus reads the node's result from"),
		instead: "use submit_format or output_schema instead"},
	{flags: []string{"--resume", "-r", "--session-id", "--from-pr"}, value: true,
		why:     fixed("resumes or names an engine session, which Stratus owns"),
		instead: "use session_scope, lineage_affinity and resume_role_file instead"},
	{flags: []string{"--continue", "--fork-session", "--no-session-persistence", "--ephemeral"},
		why:     fixed("continues, forks or drops an engine session, which Stratus owns"),
		instead: "use session_scope, lineage_affinity and resume_role_file instead"},
	{flags: []string{"--model", "-m", "--fallback-model", "--provider", "--local-provider"}, value: true,
		why:     fixed("picks the model or provider, which come from the node's fields"),
		instead: "set the node's model and provider fields instead (provider must be in agents.allowed)"},
	{flags: []string{"--oss"},
		why:     fixed("picks a local model provider, which comes from the node's fields"),
		instead: "set the node's provider field instead (it must be in agents.allowed)"},
	{flags: []string{"--system-prompt", "--system-prompt-file", "--append-system-prompt", "--append-system-prompt-file"}, value: true,
		why:     fixed("replaces or extends the system prompt"),
		instead: "put the text in the node's role_file instead"},
	{flags: []string{"--chrome", "--no-chrome", "--ide", "--bg", "--background", "--tmux", "--safe-mode", "--bare", "--disable-slash-commands"},
		prefixes: []string{"--remote-control"},
		why:      fixed("re-opens a surface the engine adapter closes"),
		instead:  "there is no flow-side equivalent: a flow cannot change how the engine is hosted"},
}

// ScreenArgs runs the forbidden-args screen (see forbiddenArgs) over an
// extra_args list and returns one ArgProblem per rejected flag. Entries
// that are not flags (values, free words) pass; a value taken by a
// rejected flag is named with it. The screen is the same at every value of
// security.strict_isolation.
func ScreenArgs(args []string) []ArgProblem {
	var out []ArgProblem
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		rule, glued := matchArg(name)
		if rule == nil {
			continue
		}
		shown := a
		switch {
		case glued != "":
			value = glued
		case !inline && rule.value && i+1 < len(args):
			value = args[i+1]
			shown = a + " " + value
		}
		out = append(out, ArgProblem{Index: i, Arg: shown, Message: fmt.Sprintf("%q %s; %s (docs/security.md § Forbidden engine arguments)",
			shown, rule.why(value), rule.instead)})
	}
	return out
}

// matchArg finds the rule of a flag name; for a short flag written with
// its value glued on ("-sdanger-full-access") it returns that value too.
func matchArg(name string) (*argRule, string) {
	for i := range forbiddenArgs {
		r := &forbiddenArgs[i]
		for _, f := range r.flags {
			if name == f {
				return r, ""
			}
		}
		for _, p := range r.prefixes {
			if strings.HasPrefix(name, p) {
				return r, ""
			}
		}
	}
	if len(name) > 2 && name[1] != '-' {
		for i := range forbiddenArgs {
			r := &forbiddenArgs[i]
			for _, f := range r.flags {
				if len(f) == 2 && r.value && strings.HasPrefix(name, f) {
					return r, name[2:]
				}
			}
		}
	}
	return nil, ""
}
