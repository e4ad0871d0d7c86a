package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"github.com/stratusflow/stratus/internal/flow"
)

// SlotFile returns the sink key an output_artifact slot lands in for a task
// (worc flow-authoring.md § Where a node's output goes, reference.md §
// agent node): enriched_spec → <ctx>/task.enriched.md, plan →
// <ctx>/plan.md, summary → <ctx>/summary.md, report → report.md in the
// flow's report dir (<ctx>/report.md for a policy without one). "" for any
// other slot.
func SlotFile(f *flow.Flow, ctxDir, taskID, slot string) string {
	switch slot {
	case "enriched_spec":
		return path.Join(ctxDir, EnrichedSpecFile)
	case "plan":
		return path.Join(ctxDir, PlanFile)
	case "summary":
		return path.Join(ctxDir, SummaryFile)
	case "report":
		if rd := ReportDir(f, taskID); rd != "" {
			return path.Join(rd, ReportFile)
		}
		return path.Join(ctxDir, ReportFile)
	}
	return ""
}

// ContractObject returns the object a node returned — its folded value, or
// the `out` of a fold wrapper {"out", "parts"} — or nil when it is not a
// JSON object.
func ContractObject(value json.RawMessage) map[string]json.RawMessage {
	// Only an object decodes into either shape; a text body folds to a
	// JSON string, and decoding its 64 KiB just to fail was the largest
	// cost of a submit after the store.
	if !jsonObject(value) {
		return nil
	}
	var w struct {
		Out   json.RawMessage `json:"out"`
		Parts json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(value, &w) == nil && w.Parts != nil {
		value = w.Out
	}
	if !jsonObject(value) {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(value, &obj) != nil {
		return nil
	}
	return obj
}

// jsonObject reports whether b can hold a JSON object: its first byte
// after white space is '{'.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// ContractContent is what a node's output slot holds (worc
// flow-authoring.md § What a node returns): the string `content` of the
// typed result (the planning and human_input contracts), or the whole
// final body when the result is not a JSON object with a string content.
func ContractContent(value json.RawMessage, body []byte) []byte {
	if obj := ContractObject(value); obj != nil {
		var s string
		if raw, ok := obj["content"]; ok && json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
	}
	return body
}

// DecompositionEnabled is the decomposition gate (worc reference.md §
// decomposition; worc-task SKILL.md: the task's `decomposition` wins over
// config agents.decomposition.enabled).
func DecompositionEnabled(env *RunEnv) bool {
	if v, ok := env.Task.Front["decomposition"].(bool); ok {
		return v
	}
	return env.Config.Agents.Decomposition.Enabled
}

// SubtaskKey is the sink key of a file of subtask order under the ctx dir
// dir: <dir>/subtasks/<NN><suffix>, NN the order in two digits at least
// (".md" the subtask's spec, ".start.txt" its start snapshot,
// ".predecessors.md" its predecessor brief).
func SubtaskKey(dir string, order int, suffix string) string {
	return path.Join(dir, SubtasksDir, fmt.Sprintf("%02d%s", order, suffix))
}
