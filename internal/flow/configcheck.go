package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
)

// configLayer is the config-consistency layer of
// docs/contracts.md § Fatal validation, run when ValidateOptions.Config is
// set:
//
//   - a node's pinned provider is in agents.allowed and has a launch spec;
//   - its reasoning is supported by the provider that will run it (the pin,
//     else agents.primary): config.Provider.SupportsReasoning;
//   - Codex is not routed to a workspace-write agent whose network_access
//     resolves true (the node's tri-state, else the flow's network_policy);
//   - skills, and allow_skills: true, only under security.strict_isolation:
//     false (docs/contracts.md § Per-node overrides);
//   - supervisor.observe.mode of the flow may only narrow the config's
//     (none < events < selected < all), and the supervisor's provider and
//     phase reasoning hold under the same rules; skipped when the config's
//     supervisor is disabled
//     (docs/contracts.md § Running without a supervisor).
func (v *validator) configLayer() {
	cfg := v.opt.Config
	if cfg == nil {
		return
	}
	f := v.f
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if n.Kind != KindAgent && n.Kind != KindEvaluator {
			continue
		}
		path := fmt.Sprintf("nodes[%d]", i)
		at := func(key string) (Pos, string) { return n.pos(key), path + "." + key }
		name, p, err := cfg.Provider(n.Provider)
		if err != nil {
			pos, pp := at("provider")
			if n.Provider == "" {
				pos, pp = n.Pos, path
			}
			v.add(pos, pp, true, "%s: %s", label(n), errorMessage(err))
			continue
		}
		source := "agents.primary"
		if n.Provider != "" {
			source = "pinned"
		}
		if n.Reasoning != "" {
			if ok, levels := p.SupportsReasoning(name, n.Reasoning); !ok {
				pos, pp := at("reasoning")
				v.add(pos, pp, true, "%s reasoning %q is not supported by provider %s (%s), which runs it; valid: %s",
					label(n), n.Reasoning, name, source, strings.Join(levels, ", "))
			}
		}
		if n.Kind == KindAgent && p.Family(name) == "codex" && v.profile(n) == WorkspaceWrite {
			if net, why := v.network(n); net {
				pos, pp := at("network_access")
				if n.NetworkAccess == nil {
					pos, pp = at("permission_profile")
				}
				v.add(pos, pp, true, "%s runs on Codex (provider %s, %s) as workspace-write with network (%s): Codex is never routed to a writing node with network; split the external fetch into a read-only node, or set network_access: false here",
					label(n), name, source, why)
			}
		}
		if n.OutputSchema != "" && p.Family(name) == "codex" {
			if open := openObjects(n.OutputSchema); len(open) > 0 {
				pos, pp := at("output_schema")
				v.add(pos, pp, true, "%s runs on Codex (provider %s, %s), which rejects an output_schema with objects lacking additionalProperties: false (at %s); add it to every object",
					label(n), name, source, strings.Join(open, ", "))
			}
		}
		if !cfg.Security.Strict() {
			continue
		}
		if len(n.Skills) > 0 {
			pos, pp := at("skills")
			v.add(pos, pp, true, "%s declares skills, which require security.strict_isolation: false in config.yaml (it is true); drop skills or relax isolation in the config", label(n))
		} else if n.AllowSkills != nil && *n.AllowSkills {
			pos, pp := at("allow_skills")
			v.add(pos, pp, true, "%s sets allow_skills: true, which requires security.strict_isolation: false in config.yaml (it is true); drop it or relax isolation in the config", label(n))
		}
	}
	v.supervisorConfig(cfg)
}

// supervisorConfig checks the flow's supervisor block against the config's
// supervisor (docs/contracts.md § The supervisor, § What observe.mode costs).
func (v *validator) supervisorConfig(cfg *config.Config) {
	s := &cfg.Supervisor
	if !s.On() {
		return // no cadence to widen, and the block is inert
	}
	f := v.f
	if fs := f.Supervisor; fs != nil && fs.Observe != nil && fs.Observe.Mode != "" {
		flowRank, cfgRank := slices.Index(config.ObserveModes, fs.Observe.Mode), slices.Index(config.ObserveModes, s.Observe.Mode)
		if flowRank >= 0 && cfgRank >= 0 && flowRank > cfgRank {
			p := "supervisor.observe.mode"
			v.add(f.pos(p), p, true, "supervisor.observe.mode %q widens config.yaml's supervisor.observe.mode %q; a flow may only narrow the cadence (%s): set %q or narrower here, or widen the config",
				fs.Observe.Mode, s.Observe.Mode, strings.Join(config.ObserveModes, " < "), s.Observe.Mode)
		}
	}
	pos, path := f.pos("supervisor"), "supervisor"
	name, p, err := cfg.Provider(s.Provider)
	if err != nil {
		v.add(pos, path, true, "the supervisor of this flow (config.yaml supervisor.provider): %s", errorMessage(err))
		return
	}
	for _, ph := range []struct{ key, reasoning string }{
		{"observe", s.Observe.Reasoning}, {"finalize", s.Finalize.Reasoning}, {"handoff", s.Handoff.Reasoning},
	} {
		if ph.reasoning == "" {
			continue
		}
		if ok, levels := p.SupportsReasoning(name, ph.reasoning); !ok {
			v.add(pos, path, true, "the supervisor of this flow: config.yaml supervisor.%s.reasoning %q is not supported by provider %s; valid: %s",
				ph.key, ph.reasoning, name, strings.Join(levels, ", "))
		}
	}
}

// profile is a node's effective permission profile: its own, else the
// ceiling for an agent; evaluators are read-only.
func (v *validator) profile(n *Node) string {
	if n.Kind == KindEvaluator {
		return ReadOnly
	}
	if n.PermissionProfile != "" {
		return n.PermissionProfile
	}
	return v.f.PermissionCeiling
}

// network resolves a node's network grant
// (docs/contracts.md § Network access): its network_access tri-state, else
// the flow's network_policy; why says which.
func (v *validator) network(n *Node) (bool, string) {
	if n.NetworkAccess != nil {
		return *n.NetworkAccess, fmt.Sprintf("network_access: %v", *n.NetworkAccess)
	}
	if v.f.NetworkPolicy != "" {
		return true, fmt.Sprintf("inherited from the flow's network_policy %q", v.f.NetworkPolicy)
	}
	return false, "no network_policy"
}

// errorMessage is err's message without a field prefix.
func errorMessage(err error) string {
	var se *stratus.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

// tools checks every tool node against the registry (ValidateOptions.ToolsDir).
func (v *validator) tools() {
	dir := v.opt.ToolsDir
	if dir == "" {
		return
	}
	for i := range v.f.Nodes {
		n := &v.f.Nodes[i]
		if n.Kind != KindTool || n.Tool == "" || !portableSegment(n.Tool) {
			continue // a missing or path-like name is reported by nodeFields
		}
		if _, err := ResolveTool(dir, n.Tool); err != nil {
			v.add(n.pos("tool"), fmt.Sprintf("nodes[%d].tool", i), true, "%s: %s", label(n), errorMessage(err))
		}
	}
}

// ResolveTool returns the executable registered as name in the tool
// registry dir (DIR/.stratus/tools; worc's .worc/tools/,
// docs/contracts.md § Tools: "the registry rejects a missing / uncontained /
// non-executable tool fatally at flow validation"). The tool must be
// dir/<name>: a regular file, executable, and inside dir once symlinks are
// resolved.
//
// Errors (*stratus.Error): EINVALID when name is not one file name;
// ENOTFOUND `tool "x" is not installed: no executable at dir/x (install
// it there, chmod +x)`; EINVALID when it is a directory or other
// non-regular file, not executable, or resolves outside dir.
func ResolveTool(dir, name string) (string, error) {
	if !portableSegment(name) {
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q must be a registered tool name (one file name in %s), not a path", name, dir)
	}
	path := filepath.Join(dir, name)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, "tool", "tool %q is not installed: no executable at %s (install it there, chmod +x)", name, path)
	case err != nil:
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q at %s cannot be inspected: %v", name, path, err)
	case st.IsDir():
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q at %s is a directory, not an executable file", name, path)
	case !st.Mode().IsRegular():
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q at %s is not a regular file (%s)", name, path, st.Mode().Type())
	case runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q at %s is not executable (chmod +x %s)", name, path, path)
	}
	if where, ok := inside(dir, path); !ok {
		return "", stratus.FieldErrorf(stratus.EINVALID, "tool", "tool %q at %s resolves through a symlink to %s, outside %s; a tool must live inside the tools directory (copy it there instead of linking)", name, path, where, dir)
	}
	return path, nil
}

// openObjects returns the JSON pointers of the object schemas in schema
// (a JSON-encoded JSON Schema) that do not set additionalProperties: false;
// "" is the root, shown as "/". reference.md § agent node: output_schema.
func openObjects(schema string) []string {
	var doc any
	if err := json.Unmarshal([]byte(schema), &doc); err != nil {
		return nil
	}
	var out []string
	var walk func(node any, ptr string)
	walk = func(node any, ptr string) {
		switch x := node.(type) {
		case map[string]any:
			_, hasProps := x["properties"]
			if x["type"] == "object" || hasProps {
				if ap, ok := x["additionalProperties"].(bool); !ok || ap {
					p := ptr
					if p == "" {
						p = "/"
					}
					out = append(out, p)
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if k == "const" || k == "enum" || k == "default" || k == "examples" {
					continue // data, not schemas
				}
				walk(x[k], ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
			}
		case []any:
			for i, it := range x {
				walk(it, fmt.Sprintf("%s/%d", ptr, i))
			}
		}
	}
	walk(doc, "")
	return out
}
