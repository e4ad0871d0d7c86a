package supervisor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

const long = "The run added the flag and its test; review sent the first change back for the empty-name case, and the fix rejects it now."

// docs/contracts.md § What the supervisor layer does: a leaked structured
// dump is sanitized — cut at the first machine tag — so raw
// follow_ups/memory_delta/lessons never reach the PR body; the report's own
// H1 and fact sections are not duplicated.
func TestSanitize_CutAtFirstMachineTag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"clean prose", "Lead.\n\n## What changed\n\nA flag.", "Lead.\n\n## What changed\n\nA flag."},
		{"follow_ups tag", "Lead paragraph.\n<follow_ups>[{\"title\":\"x\"}]</follow_ups>", "Lead paragraph."},
		{"summary dump", "<summary>The prose.</summary><follow_ups>[]</follow_ups><memory_delta>{}</memory_delta>", "The prose."},
		{"memory_delta first", "Prose <memory_delta>{}</memory_delta> more", "Prose"},
		{"lessons with spaces and case", "Prose\n< LESSONS >x", "Prose"},
		{"own H1 dropped", "# My title\n\nProse.", "Prose."},
		{"whole fence unwrapped", "```markdown\nProse in a fence.\n```", "Prose in a fence."},
		{"fact section cut", "Prose.\n\n## Run cost\n\n$1", "Prose."},
		{"follow-ups section cut", "Prose.\n\n## Follow-ups\n- a", "Prose."},
		{"an inner fence is kept", "Prose:\n```go\nx := 1\n```\nmore", "Prose:\n```go\nx := 1\n```\nmore"},
		{"html that is no machine tag stays", "Use <br> here.", "Use <br> here."},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("%s: Sanitize(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// docs/contracts.md § The summary artifacts, situation 4: prose below a
// 120-character floor is collapsed — no summary reaches disk and the
// discarded text is kept for the warning.
func TestParseFinal_CollapseFloor120(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       string
	}{
		{"119 characters", strings.Repeat("a", 119), report.SynthesisCollapsed},
		{"120 characters", strings.Repeat("a", 120), report.SynthesisWritten},
		{"a probe", "ok", report.SynthesisCollapsed},
		{"long, but mostly a machine dump", "Short.<follow_ups>" + strings.Repeat("x", 300) + "</follow_ups>", report.SynthesisCollapsed},
		{"JSON summary object", fmt.Sprintf(`{"summary": %q, "follow_ups": [{"title": "Add a changelog entry", "action_hint": "Write it."}]}`, long), report.SynthesisWritten},
		{"fenced JSON", "```json\n" + fmt.Sprintf(`{"summary": %q}`, long) + "\n```", report.SynthesisWritten},
	} {
		syn := ParseFinal([]byte(tc.body), true)
		if syn.Outcome != tc.want {
			t.Errorf("%s: outcome %q, want %q", tc.name, syn.Outcome, tc.want)
		}
		if syn.Outcome == report.SynthesisCollapsed && (syn.Prose != "" || syn.Discarded != strings.TrimSpace(tc.body)) {
			t.Errorf("%s: collapsed record = %+v", tc.name, syn)
		}
	}
	syn := ParseFinal([]byte(fmt.Sprintf(`{"summary": %q, "follow_ups": [{"title": "Add a changelog entry"}]}`, long)), true)
	if syn.Prose != long || len(syn.FollowUps) != 1 || syn.FollowUps[0].Source != "supervisor" {
		t.Errorf("JSON final = %+v", syn)
	}
	// emit_follow_ups governs only the supervisor-authored half.
	if syn := ParseFinal([]byte(fmt.Sprintf(`{"summary": %q, "follow_ups": [{"title": "x"}]}`, long)), false); len(syn.FollowUps) != 0 {
		t.Errorf("follow-ups kept without emit_follow_ups: %+v", syn.FollowUps)
	}
}

// docs/contracts.md § What observe.mode costs: the decision table — mode ×
// trigger × kind; tool, checks and publish are never observed.
func TestDecide_ObserveTable(t *testing.T) {
	t.Parallel()
	all3 := []string{"rework", "failure", "fallback"}
	rework := StepEnd{Node: "review", Kind: "evaluator", Outcome: "rework"}
	exhausted := StepEnd{Node: "review", Kind: "evaluator", Outcome: "accept", AcceptedOpen: true}
	cleanAccept := StepEnd{Node: "review", Kind: "evaluator", Outcome: "accept"}
	failed := StepEnd{Node: "implementation", Kind: "agent", Outcome: "failed", Failed: true}
	fallback := StepEnd{Node: "implementation", Kind: "agent", Outcome: "done", Fallback: true}
	plain := StepEnd{Node: "planning", Kind: "agent", Outcome: "done"}
	for _, tc := range []struct {
		name     string
		mode     string
		triggers []string
		include  []string
		e        StepEnd
		want     bool
	}{
		{"none observes nothing", "none", all3, nil, failed, false},
		{"events: rework", "events", all3, nil, rework, true},
		{"events: accept after an exhausted budget", "events", all3, nil, exhausted, true},
		{"events: a clean accept is no deviation", "events", all3, nil, cleanAccept, false},
		{"events: failure", "events", all3, nil, failed, true},
		{"events: fallback", "events", all3, nil, fallback, true},
		{"events: an ordinary step", "events", all3, nil, plain, false},
		{"events [failure]: rework not a trigger", "events", []string{"failure"}, nil, rework, false},
		{"events [failure]: exhausted not a trigger", "events", []string{"failure"}, nil, exhausted, false},
		{"events [failure]: failure", "events", []string{"failure"}, nil, failed, true},
		{"events [rework]: fallback not a trigger", "events", []string{"rework"}, nil, fallback, false},
		{"selected: listed node", "selected", all3, []string{"planning"}, plain, true},
		{"selected: unlisted node, even failed", "selected", all3, []string{"planning"}, failed, false},
		{"all: an ordinary step", "all", nil, nil, plain, true},
		{"all: a skipped step did not execute", "all", nil, nil, StepEnd{Node: "docs", Kind: "agent", Outcome: "skipped"}, false},
		{"all: tool never", "all", all3, nil, StepEnd{Node: "lint", Kind: "tool", Outcome: "fail", Failed: true}, false},
		{"all: checks never", "all", all3, nil, StepEnd{Node: "testing", Kind: "checks", Outcome: "fail", Failed: true}, false},
		{"events: failed checks never", "events", all3, nil, StepEnd{Node: "testing", Kind: "checks", Outcome: "failed", Failed: true}, false},
		{"selected: publish never", "selected", all3, []string{"publish"}, StepEnd{Node: "publish", Kind: "publish", Outcome: "done"}, false},
		{"all: a supervisor turn never", "all", all3, nil, StepEnd{Node: "_supervisor", Kind: report.Kind, Outcome: "done"}, false},
	} {
		got, why := Decide(tc.mode, tc.triggers, tc.include, tc.e)
		if got != tc.want || got == (why == "") {
			t.Errorf("%s: Decide = %v (%q), want %v", tc.name, got, why, tc.want)
		}
	}
}

// docs/contracts.md § What observe.mode costs: a flow may only narrow the
// cadence; the narrower of the two modes applies.
func TestEffectiveMode_FlowOnlyNarrows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cfg, fl, want string }{
		{"all", "events", "events"},
		{"events", "none", "none"},
		{"events", "all", "events"},
		{"selected", "", "selected"},
		{"none", "events", "none"},
		{"", "", "events"},
		{"all", "bogus", "all"},
	} {
		if got := EffectiveMode(tc.cfg, tc.fl); got != tc.want {
			t.Errorf("EffectiveMode(%q, %q) = %q, want %q", tc.cfg, tc.fl, got, tc.want)
		}
	}
}

func flowWithMode(mode string) *flow.Flow {
	fl := &flow.Flow{TaskType: "blog"}
	if mode != "" {
		fl.Supervisor = &flow.Supervisor{Observe: &flow.Observe{Mode: mode}}
	}
	return fl
}

// docs/contracts.md § What observe.mode costs: when a flow narrows the
// config's mode the run warns once at the start, naming both modes and, on
// none, the triggers that stop applying; a layer that is off has no cadence
// to narrow.
func TestNarrowingWarning_NamesBothModes(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Supervisor
	cfg.Observe.Mode = "all"
	if w := NarrowingWarning(cfg, flowWithMode("events")); !strings.Contains(w, "from all") || !strings.Contains(w, "to events") {
		t.Errorf("all → events: %q", w)
	}
	cfg.Observe.Mode = "events"
	w := NarrowingWarning(cfg, flowWithMode("none"))
	if !strings.Contains(w, "from events") || !strings.Contains(w, "to none") || !strings.Contains(w, "rework, failure, fallback stop applying") {
		t.Errorf("events → none: %q", w)
	}
	if w := NarrowingWarning(cfg, flowWithMode("events")); w != "" {
		t.Errorf("same mode warns: %q", w)
	}
	if w := NarrowingWarning(cfg, flowWithMode("")); w != "" {
		t.Errorf("flow without a mode warns: %q", w)
	}
	off := false
	cfg.Enabled = &off
	if w := NarrowingWarning(cfg, flowWithMode("none")); w != "" {
		t.Errorf("layer off warns: %q", w)
	}
}

// docs/contracts.md § What the supervisor layer does: the packet carries
// every verdict on its step with whole findings (free text bounded 1200 /
// 300, step budgets 40000 / 8000, superseded verdicts sharing 24000,
// findings_total and findings_omitted), a tool step's data and stdout_head
// (1000 / 800), the publish step pending with a note, and a digest bounded to
// 8000.
func TestBuildPacket_BudgetsAndPending(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("w", 5000)
	many := func(n int) []findings.Finding {
		var fs []findings.Finding
		for i := 0; i < n; i++ {
			fs = append(fs, findings.Finding{Severity: "low", What: big, Fix: big})
		}
		return fs
	}
	eval := func(visit int, verdict string, fs []findings.Finding) report.StepLine {
		return report.StepLine{Step: stratus.Step{StepRef: fmt.Sprintf("review#%d", visit), Node: "review", Kind: "evaluator", Status: "completed", Verdict: verdict}, Gate: "high", Findings: fs}
	}
	var steps []report.StepLine
	for i := 1; i <= 12; i++ {
		steps = append(steps, report.StepLine{Step: stratus.Step{StepRef: fmt.Sprintf("fixing#%d", i), Node: "fixing", Kind: "agent", Status: "completed", Verdict: "done"}, Final: []byte(big)})
		steps = append(steps, eval(i, "rework", many(20)))
	}
	steps = append(steps, eval(13, "accept", many(40)))
	toolOut, _ := json.Marshal(map[string]any{"tool": map[string]any{"stdout": `{"outcome":"pass","data":{"words":1234,"blob":"` + strings.Repeat("d", 2000) + `"}}` + strings.Repeat(" ", 900)}})
	steps = append(steps, report.StepLine{Step: stratus.Step{StepRef: "count#1", Node: "count", Kind: "tool", Status: "completed", Verdict: "pass"}, Final: toolOut})
	steps = append(steps, report.StepLine{Step: stratus.Step{StepRef: "publish#1", Node: "publish", Kind: "publish", Status: stratus.StepRunning}})
	p := BuildPacket(&report.Facts{Run: stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "T"}, Status: "done", Steps: steps})

	superseded := 0
	for _, s := range p.Steps {
		if s.Kind != "evaluator" {
			continue
		}
		size := 0
		for _, f := range s.Findings {
			limit := FinalFindingText
			if s.Superseded {
				limit = SupersededFindingText
			}
			if n := len([]rune(f.What)); n > limit+1 {
				t.Fatalf("%s: a finding's what is %d characters, over %d", s.StepRef, n, limit)
			}
			b, _ := json.Marshal(f)
			size += len(b)
		}
		if s.FindingsTotal != len(s.Findings)+s.FindingsOmitted {
			t.Errorf("%s: total %d != %d kept + %d omitted", s.StepRef, s.FindingsTotal, len(s.Findings), s.FindingsOmitted)
		}
		if s.Superseded {
			superseded += size
			if size > SupersededStepBudget {
				t.Errorf("%s: %d characters of findings, over the superseded step budget", s.StepRef, size)
			}
		} else {
			if s.StepRef != "review#13" || size > FinalStepBudget || s.FindingsOmitted == 0 || len(s.Findings) == 0 {
				t.Errorf("final verdict %s: %d characters, %d kept, %d omitted", s.StepRef, size, len(s.Findings), s.FindingsOmitted)
			}
		}
	}
	if superseded > SupersededTotalBudget || superseded == 0 {
		t.Errorf("superseded verdicts share %d characters, budget %d", superseded, SupersededTotalBudget)
	}
	tool := p.Steps[len(p.Steps)-2]
	if data, _ := tool.Data.(string); !strings.HasSuffix(data, "…") || len([]rune(data)) != ToolDataBudget+1 {
		t.Errorf("tool data = %v, want cut at %d with …", tool.Data, ToolDataBudget)
	}
	if n := len([]rune(tool.StdoutHead)); n != StdoutHeadBudget+1 || !strings.HasSuffix(tool.StdoutHead, "…") {
		t.Errorf("stdout_head is %d characters", n)
	}
	pub := p.Steps[len(p.Steps)-1]
	if pub.Status != "pending" || !strings.Contains(pub.Note, "expected") {
		t.Errorf("publish step = %+v", pub)
	}
	if n := len([]rune(p.Digest)); n > DigestBudget+1 || n < DigestBudget {
		t.Errorf("digest is %d characters, want the %d budget", n, DigestBudget)
	}
	// Deterministic: the same facts, the same bytes.
	if a, b := BuildPacket(&report.Facts{Steps: steps}).Marshal(), BuildPacket(&report.Facts{Steps: steps}).Marshal(); string(a) != string(b) {
		t.Error("two packets of the same facts differ")
	}
}

// docs/contracts.md § What the supervisor layer does: the finalize prompt
// names the packet and says what to return, over the flow's role and finalize
// emphasis, or the built-in instruction when those are missing.
func TestFinalizePrompt_NamesPacketAndFallsBack(t *testing.T) {
	t.Parallel()
	got := FinalizePrompt(FinalizeInput{TaskTitle: "T", PacketPath: "/w/.stratus/logs/t1/supervisor/packet.json"})
	for _, s := range []string{BuiltinRole, BuiltinFinalize, "/w/.stratus/logs/t1/supervisor/packet.json", "under 120 characters", "do not restate them"} {
		if !strings.Contains(got, s) {
			t.Errorf("finalize prompt lacks %q:\n%s", s, got)
		}
	}
	got = FinalizePrompt(FinalizeInput{Role: "ROLE", Emphasis: "EMPHASIS", EmitFollowUps: true})
	if strings.Contains(got, BuiltinRole) || !strings.HasPrefix(got, "ROLE\n\nEMPHASIS\n") || !strings.Contains(got, `"follow_ups"`) {
		t.Errorf("finalize prompt with role files:\n%s", got)
	}
	cfg := config.Default().Supervisor
	fl := &flow.Flow{Supervisor: &flow.Supervisor{RoleFile: "implementation/supervisor.md", FinalizeRoleFile: "implementation/summary.md"}}
	if r, f := RoleFiles(cfg, fl); r != "implementation/supervisor.md" || f != "implementation/summary.md" {
		t.Errorf("RoleFiles = %q, %q", r, f)
	}
	if r, f := RoleFiles(cfg, &flow.Flow{}); r != "roles/supervisor.md" || f != "" {
		t.Errorf("RoleFiles without a flow block = %q, %q", r, f)
	}
}
