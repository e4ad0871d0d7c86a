package worker

import (
	"encoding/json"
	"fmt"
	"strings"
)

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Severities from least to most severe (worc flow reference: gate_severity).
var severityRank = map[string]int{"low": 1, "medium": 2, "high": 3, "critical": 4, "blocking": 5}

// evaluatorOutcome decides an evaluator's outcome from its folded value
// (worc flow format: an evaluator returns {findings: [{severity, path, what,
// fix}]} and fails closed). A finding at least as severe as gate (default
// "high") makes the outcome "rework"; none makes it "accept"; a value
// without a well-formed findings list is "invalid", which the compiled
// Choice routes to manual_action_required.
func evaluatorOutcome(value json.RawMessage, gate string) (outcome, reason string) {
	if gate == "" {
		gate = "high"
	}
	var wrapped struct {
		Out   json.RawMessage `json:"out"`
		Parts json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(value, &wrapped) == nil && wrapped.Parts != nil {
		value = wrapped.Out
	}
	var v struct {
		Findings *[]map[string]any `json:"findings"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Findings == nil {
		return "invalid", `evaluator report is not {"findings": [...]}`
	}
	gating := 0
	for i, f := range *v.Findings {
		sev, _ := f["severity"].(string)
		rank, ok := severityRank[strings.ToLower(sev)]
		if !ok {
			return "invalid", fmt.Sprintf("findings[%d].severity %q is not one of low, medium, high, critical, blocking", i, sev)
		}
		if rank >= severityRank[gate] {
			gating++
		}
	}
	if gating > 0 {
		return "rework", fmt.Sprintf("%d of %s at or above %s", gating, plural(len(*v.Findings), "finding"), gate)
	}
	return "accept", fmt.Sprintf("%s, none at or above %s", plural(len(*v.Findings), "finding"), gate)
}
