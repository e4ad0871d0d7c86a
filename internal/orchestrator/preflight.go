package orchestrator

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/task"
)

// SupportedKinds are the node kinds this build of the embedded dispatcher
// runs. The others (checks, tool, hitl) parse, validate and compile, but a
// run that would reach one is refused before it starts.
var SupportedKinds = []string{flow.KindAgent, flow.KindEvaluator, flow.KindPublish}

// Preflight checks what flow validation alone cannot, before anything runs:
// that this build can run every node of the flow, that every provider a node
// pins (or the task hints, nodes.<id>.provider) is in agents.allowed and has
// a launch spec (seed 004 § Fatal validation, config consistency), and that
// the task's nodes overrides name nodes of the flow (worc: "an id absent
// from the flow ends the task failed"). tk may be nil (validate). It returns
// every problem found, one message each.
func Preflight(fl *flow.Flow, cfg *config.Config, tk *task.Task) []string {
	var probs []string
	for _, n := range fl.Nodes {
		if !slices.Contains(SupportedKinds, n.Kind) {
			probs = append(probs, fmt.Sprintf("node %s: kind %s is not supported by this build of Stratus yet; supported: %s",
				n.ID, n.Kind, strings.Join(SupportedKinds, ", ")))
		}
		if n.Provider != "" && cfg != nil {
			if _, _, err := cfg.Provider(n.Provider); err != nil {
				probs = append(probs, fmt.Sprintf("node %s: %v", n.ID, err))
			}
		}
	}
	if tk == nil {
		return probs
	}
	nodes, _ := tk.Front["nodes"].(map[string]any)
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if fl.Node(id) == nil {
			probs = append(probs, fmt.Sprintf("task %s: nodes.%s: flow %s has no node %q", tk.Path, id, fl.TaskType, id))
			continue
		}
		o, _ := nodes[id].(map[string]any)
		if p, ok := o["provider"].(string); ok && p != "" && cfg != nil {
			if _, _, err := cfg.Provider(p); err != nil {
				probs = append(probs, fmt.Sprintf("task %s: nodes.%s.provider: %v", tk.Path, id, err))
			}
		}
	}
	return probs
}
