package flow

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/config"
)

// withConfig is config.Default() (primary echo; claude and codex allowed)
// changed by edit.
func withConfig(edit func(c *config.Config)) *config.Config {
	c := config.Default()
	if edit != nil {
		edit(c)
	}
	return c
}

// configCase is a flow body validated against a config.
type configCase struct {
	name string
	body string // appended to header (header may be replaced with hdr)
	hdr  string
	cfg  *config.Config
	want []string // Path of every fatal problem
	msg  string   // fragment of the first fatal problem
}

func runConfigCases(t *testing.T, cases []configCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hdr := header
			if c.hdr != "" {
				hdr = c.hdr
			}
			f, err := Parse("t.yaml", []byte(hdr+c.body))
			if err != nil {
				t.Fatal(err)
			}
			ps := Validate(f, ValidateOptions{Config: c.cfg})
			if got := fatalPaths(ps); !slices.Equal(got, c.want) {
				t.Fatalf("fatal paths %q, want %q; problems:\n%s", got, c.want, problemsText(ps))
			}
			if c.msg != "" && !strings.Contains(Fatal(ps)[0].Message, c.msg) {
				t.Errorf("message %q, want it to contain %q", Fatal(ps)[0].Message, c.msg)
			}
			// Without a config the layer is skipped.
			if ps := Fatal(Validate(f, ValidateOptions{})); len(ps) != 0 {
				t.Errorf("without a config:\n%s", problemsText(ps))
			}
		})
	}
}

func one(node string) string { return graph([]string{node}, nil, "") }

func TestValidateConfig_PinnedProviderAllowedAndLaunchable(t *testing.T) { // docs/contracts.md § Fatal validation: a pinned provider is in agents.allowed
	t.Parallel()
	runConfigCases(t, []configCase{
		{name: "allowed", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: claude }"), cfg: withConfig(nil)},
		{name: "not allowed", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: claude }"),
			cfg:  withConfig(func(c *config.Config) { c.Agents.Allowed = []string{"echo", "codex"} }),
			want: []string{"nodes[0].provider"}, msg: `node "a": provider "claude" is not in agents.allowed; valid: echo, codex`},
		{name: "no launch spec", body: one("{ id: r, kind: evaluator, role: review, role_file: t/r.md, provider: gemini }"),
			cfg:  withConfig(func(c *config.Config) { c.Agents.Allowed = append(c.Agents.Allowed, "gemini") }),
			want: []string{"nodes[0].provider"}, msg: `provider "gemini" has no launch spec in agents.providers`},
	})
}

func TestValidateConfig_ReasoningSupportedByTheProviderThatRunsTheNode(t *testing.T) { // docs/contracts.md § Per-node overrides: reasoning
	t.Parallel()
	codexPrimary := withConfig(func(c *config.Config) { c.Agents.Primary = "codex" })
	runConfigCases(t, []configCase{
		{name: "any value on an engine without a family", body: one("{ id: a, kind: agent, role_file: t/a.md, reasoning: galaxy-brain }"), cfg: withConfig(nil)},
		{name: "codex accepts minimal", body: one("{ id: a, kind: agent, role_file: t/a.md, reasoning: minimal }"), cfg: codexPrimary},
		{name: "claude rejects minimal when pinned", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: claude, reasoning: minimal }"), cfg: codexPrimary,
			want: []string{"nodes[0].reasoning"}, msg: `reasoning "minimal" is not supported by provider claude (pinned), which runs it; valid: low, medium, high, xhigh, max`},
		{name: "the primary runs an unpinned node", body: one("{ id: r, kind: evaluator, role: review, role_file: t/r.md, reasoning: ultra }"), cfg: codexPrimary,
			want: []string{"nodes[0].reasoning"}, msg: "not supported by provider codex (agents.primary)"},
		{name: "a provider's own reasoning_levels", body: one("{ id: a, kind: agent, role_file: t/a.md, reasoning: high }"),
			cfg: withConfig(func(c *config.Config) {
				p := c.Agents.Providers["echo"]
				p.ReasoningLevels = []string{"low"}
				c.Agents.Providers["echo"] = p
			}),
			want: []string{"nodes[0].reasoning"}, msg: "valid: low"},
	})
}

func TestValidateConfig_CodexNeverRunsAWorkspaceWriteNodeWithNetwork(t *testing.T) { // docs/contracts.md § Network access: Codex hardening
	t.Parallel()
	codex := withConfig(func(c *config.Config) { c.Agents.Primary = "codex" })
	research := header + "  network_policy: research\n"
	runConfigCases(t, []configCase{
		{name: "network_access true", body: one("{ id: a, kind: agent, role_file: t/a.md, permission_profile: workspace-write, network_access: true }"), cfg: codex,
			want: []string{"nodes[0].network_access"}, msg: `node "a" runs on Codex (provider codex, agents.primary) as workspace-write with network (network_access: true)`},
		{name: "inherited from network_policy and the ceiling", hdr: research, body: one("{ id: a, kind: agent, role_file: t/a.md }"), cfg: codex,
			want: []string{"nodes[0].permission_profile"}, msg: `inherited from the flow's network_policy "research"`},
		{name: "pinned codex under another primary", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: codex, network_access: true }"), cfg: withConfig(nil),
			want: []string{"nodes[0].network_access"}, msg: "provider codex, pinned"},
		{name: "network_access false opts out", hdr: research, body: one("{ id: a, kind: agent, role_file: t/a.md, network_access: false }"), cfg: codex},
		{name: "read-only with network is fine", body: one("{ id: a, kind: agent, role_file: t/a.md, permission_profile: read-only, network_access: true }"), cfg: codex},
		{name: "claude may write with network", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: claude, network_access: true }"), cfg: codex},
	})
}

func TestValidateConfig_SkillsRequireRelaxedIsolation(t *testing.T) { // docs/contracts.md § Per-node overrides: skills, allow_skills
	t.Parallel()
	relaxed := withConfig(func(c *config.Config) { off := false; c.Security.StrictIsolation = &off })
	runConfigCases(t, []configCase{
		{name: "skills under strict isolation", body: one("{ id: a, kind: agent, role_file: t/a.md, skills: [docs] }"), cfg: withConfig(nil),
			want: []string{"nodes[0].skills"}, msg: "require security.strict_isolation: false"},
		{name: "allow_skills true under strict isolation", body: one("{ id: a, kind: agent, role_file: t/a.md, allow_skills: true }"), cfg: withConfig(nil),
			want: []string{"nodes[0].allow_skills"}, msg: "allow_skills: true, which requires security.strict_isolation: false"},
		{name: "allow_skills false narrows", body: one("{ id: a, kind: agent, role_file: t/a.md, allow_skills: false }"), cfg: withConfig(nil)},
		{name: "skills with isolation relaxed", body: one("{ id: a, kind: agent, role_file: t/a.md, skills: [docs], allow_skills: true }"), cfg: relaxed},
	})
}

func TestValidateConfig_ObserveModeMayOnlyNarrow(t *testing.T) { // docs/contracts.md § What observe.mode costs: a flow may only narrow it
	t.Parallel()
	mode := func(m string) string { return one(agentA) + "  supervisor:\n    observe: { mode: " + m + " }\n" }
	cfgMode := func(m string) *config.Config {
		return withConfig(func(c *config.Config) { c.Supervisor.Observe.Mode = m })
	}
	disabled := withConfig(func(c *config.Config) { off := false; c.Supervisor.Enabled = &off; c.Supervisor.Observe.Mode = "none" })
	runConfigCases(t, []configCase{
		{name: "equal", body: mode("events"), cfg: cfgMode("events")},
		{name: "narrower", body: mode("none"), cfg: cfgMode("all")},
		{name: "wider", body: mode("all"), cfg: cfgMode("events"),
			want: []string{"supervisor.observe.mode"}, msg: `supervisor.observe.mode "all" widens config.yaml's supervisor.observe.mode "events"; a flow may only narrow the cadence (none < events < selected < all)`},
		{name: "events over a global none", body: mode("events"), cfg: cfgMode("none"),
			want: []string{"supervisor.observe.mode"}, msg: `"events" widens config.yaml's supervisor.observe.mode "none"`},
		{name: "skipped when the supervisor is disabled", body: mode("all"), cfg: disabled},
	})
}

func TestValidateConfig_SupervisorProviderAllowedAndReasoningSupported(t *testing.T) { // docs/contracts.md § The supervisor: validated under the same ceiling as flow nodes
	t.Parallel()
	runConfigCases(t, []configCase{
		{name: "supervisor provider not allowed", body: one(agentA),
			cfg:  withConfig(func(c *config.Config) { c.Supervisor.Provider = "claude"; c.Agents.Allowed = []string{"echo"} }),
			want: []string{"supervisor"}, msg: `config.yaml supervisor.provider): provider "claude" is not in agents.allowed`},
		{name: "phase reasoning unsupported", body: one(agentA),
			cfg:  withConfig(func(c *config.Config) { c.Supervisor.Provider = "claude"; c.Supervisor.Finalize.Reasoning = "minimal" }),
			want: []string{"supervisor"}, msg: `supervisor.finalize.reasoning "minimal" is not supported by provider claude`},
		{name: "ignored when disabled", body: one(agentA),
			cfg: withConfig(func(c *config.Config) {
				off := false
				c.Supervisor.Enabled = &off
				c.Supervisor.Provider = "claude"
				c.Agents.Allowed = []string{"echo"}
			})},
	})
}

func TestValidateConfig_CodexRejectsAnOpenOutputSchema(t *testing.T) { // reference.md § agent node: output_schema (Codex 400s otherwise)
	t.Parallel()
	loose := `'{"type":"object"}'`
	runConfigCases(t, []configCase{
		{name: "codex", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: codex, output_schema: " + loose + " }"), cfg: withConfig(nil),
			want: []string{"nodes[0].output_schema"}, msg: "which rejects an output_schema with objects lacking additionalProperties: false (at /)"},
		{name: "claude", body: one("{ id: a, kind: agent, role_file: t/a.md, provider: claude, output_schema: " + loose + " }"), cfg: withConfig(nil)},
	})
}

// toolFlow is a flow with one tool node named name.
func toolFlow(t *testing.T, name string) *Flow {
	return mustParse(t, graph([]string{agentA, "{ id: gate, kind: tool, tool: " + name + " }", publish},
		[]string{"{ from: a, to: gate }", "{ from: gate, to: pub, outcome: pass }"}, ""))
}

func TestValidateTools_EveryToolInstalledExecutableAndContained(t *testing.T) { // docs/contracts.md § Tools: the registry rejects a missing / uncontained / non-executable tool
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	write := func(path string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho ok\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "ok"), 0o755)
	write(filepath.Join(dir, "plain"), 0o644)
	write(filepath.Join(outside, "far"), 0o755)
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlinks := os.Symlink(filepath.Join(outside, "far"), filepath.Join(dir, "escape")) == nil &&
		os.Symlink(filepath.Join(dir, "ok"), filepath.Join(dir, "alias")) == nil
	cases := []struct{ tool, want string }{
		{"ok", ""},
		{"check_length", `node "gate": tool "check_length" is not installed: no executable at ` + filepath.Join(dir, "check_length") + " (install it there, chmod +x)"},
		{"plain", `node "gate": tool "plain" at ` + filepath.Join(dir, "plain") + " is not executable (chmod +x"},
		{"folder", "is a directory, not an executable file"},
	}
	if symlinks {
		cases = append(cases, struct{ tool, want string }{"alias", ""},
			struct{ tool, want string }{"escape", "resolves through a symlink to " + filepath.Join(outside, "far") + ", outside " + dir})
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			t.Parallel()
			ps := Fatal(Validate(toolFlow(t, c.tool), ValidateOptions{ToolsDir: dir}))
			switch {
			case c.want == "" && len(ps) != 0:
				t.Errorf("installed tool rejected:\n%s", problemsText(ps))
			case c.want != "" && (len(ps) != 1 || ps[0].Path != "nodes[1].tool" || !strings.Contains(ps[0].Message, c.want)):
				t.Errorf("got:\n%s\nwant one problem at nodes[1].tool containing %q", problemsText(ps), c.want)
			}
		})
	}
	// Without a registry, tools are not looked up.
	if ps := Validate(toolFlow(t, "check_length"), ValidateOptions{}); len(ps) != 0 {
		t.Errorf("without ToolsDir:\n%s", problemsText(ps))
	}
}

// With a config and an empty tool registry, the only fatal problems of the
// worc flows are their tool nodes, each saying the tool is not installed
// ("where its tools are not installed, the tool-registry error says exactly
// that").
func TestValidate_PeerFlowsWithConfigFailOnlyOnUninstalledTools(t *testing.T) { // docs/contracts.md § Fatal validation: config consistency
	t.Parallel()
	root := peerFlowsDir(t)
	want := map[string][]string{ // flow → tool node: tool
		"blog_article":        {`node "length": tool "check_length"`},
		"blog_article_revise": {`node "length": tool "check_length"`},
		"content_book":        {`node "constraints": tool "check_journey"`},
		"content_chapter":     {`node "constraints": tool "check_chapter"`},
		"content_translate":   {`node "constraints_en": tool "check_chapter"`},
		"implementation":      nil,
		"merge":               nil,
	}
	for _, primary := range []string{"echo", "codex", "claude"} {
		cfg := withConfig(func(c *config.Config) { c.Agents.Primary = primary; c.Agents.MaxFixCycles = 0 })
		for stem, tools := range want {
			t.Run(primary+"/"+stem, func(t *testing.T) {
				t.Parallel()
				f, err := Load(root, stem)
				if err != nil {
					t.Fatal(err)
				}
				tdir := t.TempDir()
				got := Fatal(Validate(f, ValidateOptions{RoleFileRoot: root, Config: cfg, ToolsDir: tdir}))
				if len(got) != len(tools) {
					t.Fatalf("want %d tool problems, got:\n%s", len(tools), problemsText(got))
				}
				for i, p := range got {
					if !strings.HasPrefix(p.Message, tools[i]+" is not installed: no executable at "+tdir) || !strings.HasSuffix(p.Path, ".tool") {
						t.Errorf("got %s\nwant %s is not installed ...", p, tools[i])
					}
				}
			})
		}
	}
}
