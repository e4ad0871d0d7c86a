package report

import (
	"strings"
	"unicode"

	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
)

// Follow-up statuses.
const (
	FollowUpAccepted  = "accepted"   // below the gate: the gate let it past
	FollowUpStillOpen = "still_open" // gating, left open when a non-blocking evaluator spent its budget
)

// FollowUp is one follow-up record of summary.json and summary.md
// (docs/contracts.md § The summary artifacts).
type FollowUp struct {
	Title      string   `json:"title"`
	Rationale  string   `json:"rationale,omitempty"`
	ActionHint string   `json:"action_hint,omitempty"`
	Severity   string   `json:"severity,omitempty"`
	Paths      []string `json:"paths,omitempty"`
	Source     string   `json:"source,omitempty"` // the step_ref whose verdict let it past, or "supervisor"
	Status     string   `json:"status,omitempty"` // FollowUpAccepted, FollowUpStillOpen; "" for the supervisor's own
}

// FollowUps composes the follow-ups mechanically from the evaluators' final
// verdicts (docs/contracts.md § The summary artifacts): for each
// evaluator node, the findings of its latest pass when that pass accepted —
// each non-gating finding (the gate let it past), and each gating finding a
// non-blocking evaluator left open when it spent max_rework_per_stage,
// worded as still open. A pass that sent work back, or a report that broke
// the contract, contributes nothing: no gate let those past. Each record's
// title is the finding's first sentence, its rationale the rest and its
// action_hint the evaluator's fix. Nodes come in the order of their latest
// pass; findings in report order.
func FollowUps(steps []StepLine) []FollowUp {
	latest := map[string]int{}
	var order []string
	for i, l := range steps {
		if l.Step.Kind != flow.KindEvaluator || l.Step.Verdict == "skipped" {
			continue
		}
		if _, ok := latest[l.Step.Node]; !ok {
			order = append(order, l.Step.Node)
		}
		latest[l.Step.Node] = i
	}
	// Order by the latest pass's position, so the list reads chronologically.
	sortByIndex(order, latest)
	var out []FollowUp
	for _, node := range order {
		l := steps[latest[node]]
		if l.Step.Verdict != "accept" || l.FindingsErr != "" {
			continue
		}
		for _, f := range l.Findings {
			out = append(out, followUp(f, l.Step.StepRef))
		}
	}
	return out
}

func sortByIndex(ids []string, idx map[string]int) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && idx[ids[j]] < idx[ids[j-1]]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

func followUp(f findings.Finding, source string) FollowUp {
	title, rest := FirstSentence(f.What)
	fu := FollowUp{Title: title, Rationale: rest, ActionHint: strings.TrimSpace(f.Fix), Severity: f.Severity, Source: source, Status: FollowUpAccepted}
	if f.Path != "" {
		fu.Paths = []string{f.Path}
	}
	if f.Gating {
		fu.Status = FollowUpStillOpen
		fu.Title = "Still open: " + fu.Title
	}
	return fu
}

// FirstSentence splits text into its first sentence and the rest, both
// trimmed: the first sentence ends at a '.', '!' or '?' followed by white
// space or the end, or at a line break. A period after a one-letter word or
// inside an abbreviation ("e.g.") does not end it, nor does one inside a
// word ("main.go"). Text with no sentence end is all title.
func FirstSentence(text string) (first, rest string) {
	s := strings.TrimSpace(text)
	rs := []rune(s)
	for i, r := range rs {
		if r == '\n' {
			return strings.TrimSpace(string(rs[:i])), strings.TrimSpace(string(rs[i+1:]))
		}
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		if i+1 < len(rs) && !unicode.IsSpace(rs[i+1]) {
			continue
		}
		if r == '.' && abbreviation(rs[:i]) {
			continue
		}
		return strings.TrimSpace(string(rs[:i+1])), strings.TrimSpace(string(rs[i+1:]))
	}
	return s, ""
}

// abbreviation reports whether the word ending before a period is a single
// letter or already holds a period (e.g, i.e, U.S).
func abbreviation(before []rune) bool {
	start := len(before)
	for start > 0 && !unicode.IsSpace(before[start-1]) {
		start--
	}
	word := before[start:]
	if len(word) == 1 && unicode.IsLetter(word[0]) {
		return true
	}
	for _, r := range word {
		if r == '.' {
			return true
		}
	}
	return false
}

// mergeFollowUps appends the supervisor's own follow-ups to the mechanical
// ones, dropping any whose title (case and space folded) is already listed
// (worc flow-authoring.md § Node kinds: "deduped against the supervisor's
// own list").
func mergeFollowUps(mechanical, own []FollowUp) []FollowUp {
	out := append([]FollowUp(nil), mechanical...)
	seen := map[string]bool{}
	for _, f := range mechanical {
		seen[foldTitle(f.Title)] = true
		seen[foldTitle(strings.TrimPrefix(f.Title, "Still open: "))] = true
	}
	for _, f := range own {
		if strings.TrimSpace(f.Title) == "" || seen[foldTitle(f.Title)] {
			continue
		}
		seen[foldTitle(f.Title)] = true
		if f.Source == "" {
			f.Source = "supervisor"
		}
		out = append(out, f)
	}
	return out
}

func foldTitle(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }
