package core

import (
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
)

// SetTimeout resolves a checks node's timeout, seconds: its own (own > 0)
// → checks.timeout_seconds → 7200.
func SetTimeout(env *RunEnv, own int) int {
	switch {
	case own > 0:
		return own
	case env.Config.Checks.TimeoutSeconds > 0:
		return env.Config.Checks.TimeoutSeconds
	}
	return 7200
}

// ToolTimeout resolves a tool node's timeout (worc configuration.md §
// tools): node.timeout_seconds → tools.default_timeout_seconds → 3600 s.
func ToolTimeout(env *RunEnv, node *flow.Node) int {
	switch {
	case node.TimeoutSeconds != nil && *node.TimeoutSeconds > 0:
		return *node.TimeoutSeconds
	case env.Config.Tools.DefaultTimeoutSeconds > 0:
		return env.Config.Tools.DefaultTimeoutSeconds
	}
	return nodeexec.DefaultToolTimeoutSeconds
}
