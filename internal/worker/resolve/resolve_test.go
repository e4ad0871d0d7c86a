package resolve

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
)

// resolveConfig is a config with a primary and two pinnable providers of
// the claude and codex families, each with its own model and reasoning.
func resolveConfig() *config.Config {
	return &config.Config{Agents: config.Agents{
		Primary: "claude",
		Allowed: []string{"claude", "codex", "openseek"},
		Providers: map[string]config.Provider{
			"claude":   {Command: config.StratusCommand, Args: []string{"engine", "claude"}, Model: "claude-sonnet-5", Reasoning: "medium", TimeoutSeconds: 1200},
			"codex":    {Command: config.StratusCommand, Args: []string{"engine", "codex"}, Model: "gpt-6-codex", Reasoning: "high"},
			"openseek": {Command: "openseek", Kind: "worker"},
			"echo":     {Command: config.StratusCommand, Args: []string{"engine", "echo"}}, // configured, not allowed
		},
	}}
}

func intp(n int) *int { return &n }

func boolp(b bool) *bool { return &b }

// TestResolve_PerNodeOverrides checks each resolution rule of
// docs/contracts.md § Per-node overrides (worc reference.md § agent node, §
// evaluator node, § network_policy): task > node > config for provider, model
// and reasoning; node > provider > 600 s for the deadline; evaluators
// read-only, agents capped at the ceiling; network tri-state over the flow's
// network_policy; extra_args carried.
func TestResolve_PerNodeOverrides(t *testing.T) {
	t.Parallel()
	ww := &flow.Flow{PermissionCeiling: flow.WorkspaceWrite}
	ro := &flow.Flow{PermissionCeiling: flow.ReadOnly}
	research := &flow.Flow{PermissionCeiling: flow.ReadOnly, NetworkPolicy: "research"}
	agent := func(mod func(n *flow.Node)) *flow.Node {
		n := &flow.Node{ID: "impl", Kind: flow.KindAgent}
		if mod != nil {
			mod(n)
		}
		return n
	}
	task := func(kv ...string) map[string]any {
		o := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			o[kv[i]] = kv[i+1]
		}
		return map[string]any{"nodes": map[string]any{"impl": o}}
	}
	claudeDefaults := stratus.ModelChoice{Model: "claude-sonnet-5", Reasoning: "medium"}
	codexDefaults := stratus.ModelChoice{Model: "gpt-6-codex", Reasoning: "high"}
	for _, tc := range []struct {
		rule  string
		flow  *flow.Flow
		node  *flow.Node
		front map[string]any
		want  stratus.Resolved
	}{
		{"NothingSet_ConfigDefaultsAndCeiling", ww, agent(nil), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"NodePin_ProviderAndItsDefaults", ww, agent(func(n *flow.Node) { n.Provider = "codex"; n.PermissionProfile = flow.ReadOnly }), nil,
			stratus.Resolved{Provider: "codex", Model: "gpt-6-codex", Reasoning: "high", PermissionProfile: flow.ReadOnly, TimeoutSeconds: 600, Configured: codexDefaults}},
		{"NodeModelReasoning_OverrideProvider", ww, agent(func(n *flow.Node) { n.Model = "claude-opus-5"; n.Reasoning = "xhigh" }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-opus-5", Reasoning: "xhigh", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"TaskOverride_BeatsNode", ww, agent(func(n *flow.Node) {
			n.Provider = "claude"
			n.Model = "claude-opus-5"
			n.Reasoning = "xhigh"
			n.PermissionProfile = flow.ReadOnly
		}),
			task("provider", "codex", "model", "gpt-6", "reasoning", "minimal"),
			stratus.Resolved{Provider: "codex", Model: "gpt-6", Reasoning: "minimal", PermissionProfile: flow.ReadOnly, TimeoutSeconds: 600, Configured: codexDefaults}},
		{"TaskOverride_OtherNodeIgnored", ww, agent(nil), map[string]any{"nodes": map[string]any{"review": map[string]any{"model": "x"}}},
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"Timeout_NodeBeatsProvider", ww, agent(func(n *flow.Node) { n.TimeoutSeconds = intp(45) }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 45, Configured: claudeDefaults}},
		{"Timeout_OpenseekKindDefault", ww, agent(func(n *flow.Node) { n.Provider = "openseek" }), nil,
			stratus.Resolved{Provider: "openseek", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 2700}},
		{"Evaluator_AlwaysReadOnly", ww, &flow.Node{ID: "review", Kind: flow.KindEvaluator, PermissionProfile: flow.WorkspaceWrite}, nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.ReadOnly, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"Permission_NeverAboveCeiling", ro, agent(func(n *flow.Node) { n.PermissionProfile = flow.WorkspaceWrite }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.ReadOnly, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"Network_FlowPolicyGrants", research, agent(nil), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.ReadOnly, NetworkAccess: true, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"Network_NodeFalseForcesOffline", research, agent(func(n *flow.Node) { n.NetworkAccess = boolp(false) }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.ReadOnly, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"Network_NodeTrueGrantsWithoutPolicy", ww, agent(func(n *flow.Node) { n.NetworkAccess = boolp(true) }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.WorkspaceWrite, NetworkAccess: true, TimeoutSeconds: 1200, Configured: claudeDefaults}},
		{"ExtraArgs_Carried", ww, agent(func(n *flow.Node) { n.ExtraArgs = []string{"--add-dir", "docs"} }), nil,
			stratus.Resolved{Provider: "claude", Model: "claude-sonnet-5", Reasoning: "medium", PermissionProfile: flow.WorkspaceWrite, TimeoutSeconds: 1200, ExtraArgs: []string{"--add-dir", "docs"}, Configured: claudeDefaults}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			got, _, err := Resolve(resolveConfig(), tc.flow, tc.node, tc.front)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Resolve:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestResolve_Refusals: a pin outside agents.allowed, a reasoning the
// resolved provider does not accept, and a workspace-write node with network
// routed to Codex fail with EINVALID naming the field at fault
// (docs/contracts.md § Fatal validation; worc reference.md § network_policy).
func TestResolve_Refusals(t *testing.T) {
	t.Parallel()
	ww := &flow.Flow{PermissionCeiling: flow.WorkspaceWrite}
	for _, tc := range []struct {
		rule, field string
		node        *flow.Node
		front       map[string]any
	}{
		{"NodePinNotAllowed", "provider", &flow.Node{ID: "impl", Kind: flow.KindAgent, Provider: "echo"}, nil},
		{"TaskPinNotAllowed", "nodes.impl.provider", &flow.Node{ID: "impl", Kind: flow.KindAgent},
			map[string]any{"nodes": map[string]any{"impl": map[string]any{"provider": "nosuch"}}}},
		{"NodeReasoningUnsupported", "reasoning", &flow.Node{ID: "impl", Kind: flow.KindAgent, Reasoning: "minimal"}, nil},
		{"TaskReasoningUnsupported", "nodes.impl.reasoning", &flow.Node{ID: "impl", Kind: flow.KindAgent, Provider: "codex"},
			map[string]any{"nodes": map[string]any{"impl": map[string]any{"provider": "claude", "reasoning": "minimal"}}}},
		{"TaskRoutesNetworkWriterToCodex", "nodes.impl.provider", &flow.Node{ID: "impl", Kind: flow.KindAgent, NetworkAccess: boolp(true)},
			map[string]any{"nodes": map[string]any{"impl": map[string]any{"provider": "codex"}}}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			_, _, err := Resolve(resolveConfig(), ww, tc.node, tc.front)
			var se *stratus.Error
			if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != tc.field || !strings.Contains(se.Message, `"impl"`) {
				t.Errorf("Resolve: err = %#v, want EINVALID on field %q naming the node", err, tc.field)
			}
		})
	}
}

// The codex rule also holds when the primary is Codex and nothing pins.
func TestResolve_PrimaryCodexNetworkWriter_Refused(t *testing.T) {
	t.Parallel()
	cfg := resolveConfig()
	cfg.Agents.Primary = "codex"
	_, _, err := Resolve(cfg, &flow.Flow{PermissionCeiling: flow.WorkspaceWrite, NetworkPolicy: "advisories"}, &flow.Node{ID: "impl", Kind: flow.KindAgent}, nil)
	var se *stratus.Error
	if !errors.As(err, &se) || se.Field != "agents.primary" {
		t.Errorf("Resolve: err = %v, want EINVALID on agents.primary", err)
	}
}
