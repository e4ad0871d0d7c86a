// Package findings is the evaluator output contract (worc flow-authoring.md §
// What a node returns: an evaluator returns {findings: [{severity, path,
// what, fix}]} and fails closed) and the gate that turns findings into an
// outcome (reference.md § evaluator node: gate_severity). The worker uses it
// to route; the report uses it to list follow-ups
// (docs/contracts.md § The summary artifacts).
package findings

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
)

// Severities from least to most severe (reference.md § evaluator node).
var Severities = []string{"low", "medium", "high", "critical", "blocking"}

// JSONSchema is the JSON Schema of an evaluator's report, sent as the
// envelope's `schema` (docs/contracts.md § The request line) so that an
// engine knows what it must return: {"findings": [{severity, what, path?,
// fix?}]}. Severity is a string (Parse takes the Severities in any letter
// case).
const JSONSchema = `{"type":"object","required":["findings"],"properties":{"findings":{"type":"array","items":{"type":"object","required":["severity","what"],"properties":{"severity":{"type":"string","description":"one of low, medium, high, critical, blocking"},"path":{"type":"string"},"what":{"type":"string"},"fix":{"type":"string"}}}}}}`

// DefaultGate is the gate_severity of an evaluator that sets none.
const DefaultGate = "high"

var rank = map[string]int{"low": 1, "medium": 2, "high": 3, "critical": 4, "blocking": 5}

// Finding is one evaluator finding. Gating is set by Mark: the finding is at
// least as severe as the node's gate_severity.
type Finding struct {
	Severity string `json:"severity"`
	Path     string `json:"path,omitempty"`
	What     string `json:"what"`
	Fix      string `json:"fix,omitempty"`
	Gating   bool   `json:"gating"`
}

// Parse reads an evaluator's folded value: the JSON object {"findings":
// [...]}, or a fold wrapper {"out": {...}, "parts": [...]} around it. Each
// finding needs a severity from Severities (any letter case; returned lower
// case) and a non-empty `what`; path and fix are optional strings.
//
// Errors (*stratus.Error EINVALID, message naming the index and field):
// not a JSON object, no findings array (missing or null), a finding that is
// not an object, an unknown or missing severity. An empty array is a
// real clean pass, not an error.
func Parse(value []byte) ([]Finding, error) {
	var wrapped struct {
		Out   json.RawMessage `json:"out"`
		Parts json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(value, &wrapped) == nil && wrapped.Parts != nil {
		value = wrapped.Out
	}
	var v struct {
		Findings *[]json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Findings == nil {
		return nil, stratus.Errorf(stratus.EINVALID, `evaluator report is not {"findings": [...]}`)
	}
	out := make([]Finding, 0, len(*v.Findings))
	for i, raw := range *v.Findings {
		var f struct {
			Severity *string `json:"severity"`
			Path     any     `json:"path"`
			What     any     `json:"what"`
			Fix      any     `json:"fix"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, stratus.FieldErrorf(stratus.EINVALID, fmt.Sprintf("findings[%d]", i), "findings[%d] is not an object {severity, path, what, fix}", i)
		}
		sev := ""
		if f.Severity != nil {
			sev = strings.ToLower(*f.Severity)
		}
		if _, ok := rank[sev]; !ok {
			got := "missing"
			if f.Severity != nil {
				got = fmt.Sprintf("%q", *f.Severity)
			}
			return nil, stratus.FieldErrorf(stratus.EINVALID, fmt.Sprintf("findings[%d].severity", i), "findings[%d].severity %s is not one of %s", i, got, strings.Join(Severities, ", "))
		}
		out = append(out, Finding{Severity: sev, Path: text(f.Path), What: text(f.What), Fix: text(f.Fix)})
	}
	return out, nil
}

func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// Mark sets Gating on each finding at least as severe as gate ("" =
// DefaultGate) and returns how many gate. An unknown gate is treated as
// DefaultGate (flow validation rejects it before a run).
func Mark(fs []Finding, gate string) int {
	g, ok := rank[strings.ToLower(gate)]
	if !ok {
		g = rank[DefaultGate]
	}
	n := 0
	for i := range fs {
		fs[i].Gating = rank[fs[i].Severity] >= g
		if fs[i].Gating {
			n++
		}
	}
	return n
}

// Outcome is the evaluator's outcome from its folded value: "rework" when a
// finding gates, "accept" when none does, "invalid" (with the reason) when
// the value breaks the contract — the compiled Choice routes "invalid" to
// manual_action_required (fail closed). The reason says how many findings
// gate at which severity.
func Outcome(value []byte, gate string) (outcome, reason string, fs []Finding) {
	if gate == "" {
		gate = DefaultGate
	}
	fs, err := Parse(value)
	if err != nil {
		return "invalid", stratus.ErrorMessage(err), nil
	}
	n := Mark(fs, gate)
	if n > 0 {
		return "rework", fmt.Sprintf("%d of %s at or above %s", n, english.Plural(len(fs), "finding"), gate), fs
	}
	return "accept", fmt.Sprintf("%s, none at or above %s", english.Plural(len(fs), "finding"), gate), fs
}
