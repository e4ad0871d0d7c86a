package resolve

import (
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
)

// DefaultEngineTimeoutSeconds is an attempt's wall-clock deadline when
// neither the node nor its provider sets one (config.yaml:
// agents.providers.<p>.timeout_seconds "0 = 600 s").
const DefaultEngineTimeoutSeconds = 600

// Resolve resolves one agent or evaluator node's per-node overrides
// against config.yaml and the task's front matter (front may be nil), in
// one place, and returns the resolution together with the resolved
// provider's launch spec (openseek's per-kind defaults filled in). Sources:
// docs/contracts.md § Per-node overrides; worc reference.md § agent node, §
// evaluator node, § network_policy; SKILL.md § nodes for the task's
// nodes.<id>.{provider,model,reasoning}.
//
//   - provider: the task's nodes.<id>.provider > the node's provider >
//     agents.primary; a pinned provider must be in agents.allowed.
//   - model: the task's > the node's > agents.providers.<p>.model.
//   - reasoning: the task's > the node's > agents.providers.<p>.reasoning;
//     an explicit value must be valid for the resolved provider.
//   - timeout_seconds: the node's > the provider's timeout_seconds >
//     DefaultEngineTimeoutSeconds.
//   - permission_profile: an evaluator is always read-only; else the node's >
//     the flow's permission_ceiling, and never above the ceiling.
//   - network_access: the node's tri-state when set > whether the flow
//     declares a network_policy.
//   - extra_args: the node's, appended after the provider's args.
//
// Configured records the provider's own model and reasoning, so a reader
// sees which halves an override changed. A workspace-write node with
// network never runs on a Codex provider (worc reference.md §
// network_policy): the flow validator checks the flow's pins, and this
// check also covers a task's override and the primary.
// Errors are *stratus.Error EINVALID naming the field.
func Resolve(cfg *config.Config, fl *flow.Flow, node *flow.Node, front map[string]any) (stratus.Resolved, config.Provider, error) {
	return resolve(cfg, fl, node, front, "")
}

// Pinned is the provider a node is pinned to: the task's
// nodes.<id>.provider, else the node's provider; "" when it runs on
// agents.primary (the retry policy's fallback order starts from it:
// internal/retry Policy.Order).
func Pinned(node *flow.Node, front map[string]any) string {
	if p := TaskOverrides(front, node.ID)["provider"]; p != "" {
		return p
	}
	return node.Provider
}

// ResolveOn is Resolve for an attempt the retry policy moved to provider
// (a fallback after transient failures, internal/retry): the node runs on
// provider with that provider's own model and reasoning, since the
// node's and the task's model and reasoning name the pinned provider's.
// provider equal to what Resolve picks is Resolve.
func ResolveOn(cfg *config.Config, fl *flow.Flow, node *flow.Node, front map[string]any, provider string) (stratus.Resolved, config.Provider, error) {
	return resolve(cfg, fl, node, front, provider)
}

func resolve(cfg *config.Config, fl *flow.Flow, node *flow.Node, front map[string]any, fallback string) (stratus.Resolved, config.Provider, error) {
	override := TaskOverrides(front, node.ID)

	pinned, pinField := node.Provider, "provider"
	if p := override["provider"]; p != "" {
		pinned, pinField = p, "nodes."+node.ID+".provider"
	}
	if fallback != "" {
		if cur, _, err := cfg.Provider(pinned); err != nil || cur != fallback {
			// The node's and the task's model and reasoning name the
			// pinned provider's; the fallback runs on its own.
			pinned, pinField = fallback, "agents.allowed"
			delete(override, "model")
			delete(override, "reasoning")
			n := *node
			n.Model, n.Reasoning = "", ""
			node = &n
		}
	}
	name, prov, err := cfg.Provider(pinned)
	if err != nil {
		return stratus.Resolved{}, config.Provider{}, stratus.FieldErrorf(stratus.EINVALID, pinField, "node %q: %s", node.ID, stratus.ErrorMessage(err))
	}
	prov = prov.Resolved()

	r := stratus.Resolved{
		Provider:   name,
		Model:      First(override["model"], node.Model, prov.Model),
		Reasoning:  First(override["reasoning"], node.Reasoning, prov.Reasoning),
		Configured: stratus.ModelChoice{Model: prov.Model, Reasoning: prov.Reasoning},
	}
	if field, value := reasoningSource(node, override); value != "" {
		if ok, valid := prov.SupportsReasoning(name, value); !ok {
			return stratus.Resolved{}, config.Provider{}, stratus.FieldErrorf(stratus.EINVALID, field,
				"node %q: reasoning %q is not supported by provider %q; valid: %s", node.ID, value, name, strings.Join(valid, ", "))
		}
	}

	r.TimeoutSeconds = DefaultEngineTimeoutSeconds
	if prov.TimeoutSeconds > 0 {
		r.TimeoutSeconds = prov.TimeoutSeconds
	}
	if node.TimeoutSeconds != nil && *node.TimeoutSeconds > 0 {
		r.TimeoutSeconds = *node.TimeoutSeconds
	}

	r.PermissionProfile = permissionProfile(fl, node)
	r.NetworkAccess = fl.NetworkPolicy != ""
	if node.NetworkAccess != nil {
		r.NetworkAccess = *node.NetworkAccess
	}
	if len(node.ExtraArgs) > 0 {
		r.ExtraArgs = slices.Clone(node.ExtraArgs)
	}

	if prov.Family(name) == "codex" && r.PermissionProfile == flow.WorkspaceWrite && r.NetworkAccess {
		if pinned == "" {
			pinField = "agents.primary"
		}
		return stratus.Resolved{}, config.Provider{}, stratus.FieldErrorf(stratus.EINVALID, pinField,
			"node %q is workspace-write with network access, which a Codex provider (%q) may not run; valid: a provider of another family, or a read-only node for the fetches", node.ID, name)
	}
	return r, prov, nil
}

// permissionProfile is the node's filesystem grant: read-only for an
// evaluator; else the node's profile capped at the flow's ceiling, or the
// ceiling itself. An unknown or missing ceiling resolves read-only (the
// flow validator refuses such a flow; this only keeps the fallback closed).
func permissionProfile(fl *flow.Flow, node *flow.Node) string {
	ceiling := fl.PermissionCeiling
	if ceiling != flow.WorkspaceWrite {
		ceiling = flow.ReadOnly
	}
	switch {
	case node.Kind == flow.KindEvaluator:
		return flow.ReadOnly
	case node.PermissionProfile == flow.ReadOnly:
		return flow.ReadOnly
	default:
		return ceiling
	}
}

// reasoningSource names where an explicit reasoning came from ("" when
// the provider's default applies: config validates its own values).
func reasoningSource(node *flow.Node, override map[string]string) (field, value string) {
	if v := override["reasoning"]; v != "" {
		return "nodes." + node.ID + ".reasoning", v
	}
	return "reasoning", node.Reasoning
}

// TaskOverrides reads the task's nodes.<id> string overrides (provider,
// model, reasoning); internal/task has already checked their shape.
func TaskOverrides(front map[string]any, id string) map[string]string {
	out := map[string]string{}
	nodes, _ := front["nodes"].(map[string]any)
	o, _ := nodes[id].(map[string]any)
	for _, k := range []string{"provider", "model", "reasoning"} {
		if s, ok := o[k].(string); ok {
			out[k] = strings.TrimSpace(s)
		}
	}
	return out
}

// First returns the first of vals that is not "", or "" when all are.
func First(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
