package supervisor

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"sync"

	"github.com/stratusflow/stratus/internal/report"
)

// machineTag matches an opening or closing tag of the structured fields a
// finalize turn may leak into its prose
// (docs/contracts.md § What the supervisor layer does:
// "<summary>…</summary><follow_ups>…<memory_delta>…").
var machineTag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)<\s*/?\s*(summary|follow_ups|follow-ups|followups|memory_delta|memory|lessons|caveats|advisory_caveats|handoff|new_surface_area|locked_decisions|open_edges)\s*/?\s*>`)
})

// leadingSummary matches an opening <summary> tag at the very start.
var leadingSummary = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^<\s*summary\s*>`) })

// Sanitize returns the human prose of a finalize turn's text, as it may
// reach summary.md (docs/contracts.md § What the supervisor layer does):
//
//   - a whole-text code fence is unwrapped, and a leading <summary> tag
//     dropped (its content is the prose);
//   - the text is cut at the first machine tag (<follow_ups>, </summary>,
//     <memory_delta>, <lessons>, …), so raw structured fields never reach
//     the PR body;
//   - a leading top-level "# " heading is dropped: the report prefixes the
//     task title as the H1;
//   - the text is cut at a heading the report writes itself ("##
//     Follow-ups" and the three fact sections), so a section is never
//     duplicated.
//
// The result is trimmed of surrounding white space.
func Sanitize(text string) string {
	s := strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	s = unfence(s)
	s = strings.TrimSpace(leadingSummary().ReplaceAllString(s, ""))
	if loc := machineTag().FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "# ") {
		_, rest, _ := strings.Cut(s, "\n")
		s = strings.TrimSpace(rest)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if reportHeading(l) {
			lines = lines[:i]
			break
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func reportHeading(line string) bool {
	l := strings.ToLower(strings.Join(strings.Fields(line), " "))
	for _, h := range append([]string{report.FollowUpsHeading}, report.FactHeadings...) {
		if l == strings.ToLower(h) {
			return true
		}
	}
	return false
}

// unfence returns the inside of a text that is one whole fenced block.
func unfence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	first, rest, ok := strings.Cut(s, "\n")
	if !ok || strings.Contains(first[3:], "`") {
		return s
	}
	inner := strings.TrimSuffix(rest, "```")
	if strings.Contains(inner, "\n```") {
		return s // more than one block
	}
	return strings.TrimSpace(inner)
}

// maxDiscarded bounds the discarded text a collapse record keeps.
const maxDiscarded = 2000

// ParseFinal turns a finalize turn's final body into the supervisor_final
// record of what reaches disk (docs/contracts.md § The summary artifacts).
// The body is the prose itself, or a JSON object {"summary": "<prose>",
// "follow_ups": [{title, rationale, action_hint}]} (fenced or not). The prose
// is sanitized; below report.CollapseFloor characters it is collapsed —
// discarded, with the text kept for the warning. The turn's own follow-ups
// are kept only when the flow sets emit_follow_ups.
func ParseFinal(body []byte, emitFollowUps bool) report.Synthesis {
	text, own := decodeFinal(body)
	prose := Sanitize(text)
	if n := len([]rune(prose)); n < report.CollapseFloor {
		return report.Synthesis{Outcome: report.SynthesisCollapsed, Discarded: cut(strings.TrimSpace(string(body)), maxDiscarded)}
	}
	syn := report.Synthesis{Outcome: report.SynthesisWritten, Prose: prose}
	if emitFollowUps {
		syn.FollowUps = own
	}
	return syn
}

func decodeFinal(body []byte) (string, []report.FollowUp) {
	raw := bytes.TrimSpace(body)
	candidates := [][]byte{raw}
	if u := unfence(string(raw)); u != string(raw) {
		candidates = append(candidates, []byte(u))
	}
	for _, c := range candidates {
		var str string
		if json.Unmarshal(c, &str) == nil {
			return str, nil
		}
		var obj struct {
			Summary   *string           `json:"summary"`
			FollowUps []json.RawMessage `json:"follow_ups"`
		}
		if json.Unmarshal(c, &obj) == nil && obj.Summary != nil {
			var fus []report.FollowUp
			for _, r := range obj.FollowUps {
				var fu struct {
					Title      string `json:"title"`
					Rationale  string `json:"rationale"`
					ActionHint string `json:"action_hint"`
					Severity   string `json:"severity"`
				}
				if json.Unmarshal(r, &fu) == nil && strings.TrimSpace(fu.Title) != "" {
					fus = append(fus, report.FollowUp{Title: strings.TrimSpace(fu.Title), Rationale: strings.TrimSpace(fu.Rationale),
						ActionHint: strings.TrimSpace(fu.ActionHint), Severity: fu.Severity, Source: "supervisor"})
				}
			}
			return *obj.Summary, fus
		}
	}
	return string(body), nil
}

// cut bounds s to n characters, ending a cut text with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
