package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func facts() *Facts {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cost := 0.25
	return &Facts{
		Run:    stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "Title", Flow: "implementation"},
		Status: "done",
		Steps: []StepLine{
			{Step: stratus.Step{StepRef: "planning#1", Node: "planning", Kind: "agent", Status: "completed", Verdict: "done"},
				Attempts: []stratus.Attempt{{Agent: "planning", PromptTokens: 10, CompletionTokens: 2, StartedAt: t0, EndedAt: t0.Add(time.Second)}}},
			{Step: stratus.Step{StepRef: "review#1", Node: "review", Kind: "evaluator", Status: "completed", Verdict: "accept", Value: json.RawMessage(`{"reason":"0 findings"}`)},
				Attempts: []stratus.Attempt{{Agent: "review", PromptTokens: 5, CompletionTokens: 1, CostUSD: &cost, StartedAt: t0, EndedAt: t0.Add(2 * time.Second), EngineStartedAt: t0.Add(1500 * time.Millisecond)}}},
		},
	}
}

// seed 004 § The summary artifacts: one key set; a pure function of the
// run's facts, so two renders are byte-identical.
func TestRender_KeySetAndDeterminism(t *testing.T) {
	t.Parallel()
	js1, md1 := Render(facts())
	js2, md2 := Render(facts())
	if !bytes.Equal(js1, js2) || !bytes.Equal(md1, md2) {
		t.Fatal("two renders differ")
	}
	var m map[string]any
	if err := json.Unmarshal(js1, &m); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"what": true, "summary": true, "follow_ups": true, "task_usage": true, "supervisor_usage": true, "cost_not_accounted": true, "degraded": true}
	for k := range m {
		if !allowed[k] {
			t.Errorf("summary.json key %q is outside worc's key set", k)
		}
	}
	if m["what"] != "Title" {
		t.Errorf("what = %v", m["what"])
	}
	// cost_not_accounted exactly when some attempt carries no recorded cost.
	cna, _ := m["cost_not_accounted"].([]any)
	if len(cna) != 1 || !strings.Contains(string(js1), `"agent": "planning"`) {
		t.Errorf("cost_not_accounted = %v", m["cost_not_accounted"])
	}
	for _, s := range []string{"# Title", "| planning#1 | done |", "- review#1: **accept** (0 findings)", "$0.25 over 2 provider calls"} {
		if !strings.Contains(string(md1), s) {
			t.Errorf("summary.md lacks %q:\n%s", s, md1)
		}
	}
}

func TestOverhead_ReportToNextEngineStart(t *testing.T) {
	t.Parallel()
	got := Overhead(facts())
	if len(got) != 1 || got[0] != 500*time.Millisecond {
		t.Errorf("Overhead = %v", got)
	}
}

// seed 004: the publish step, which writes the report, is shown pending
// while it does.
func TestRender_PublishPendingWhileItWrites(t *testing.T) {
	t.Parallel()
	f := facts()
	f.Steps = append(f.Steps, StepLine{Step: stratus.Step{StepRef: "publish#1", Node: "publish", Kind: "publish", Status: stratus.StepRunning}})
	_, md := Render(f)
	if !strings.Contains(string(md), "| publish#1 | pending (it writes this report) |") {
		t.Errorf("summary.md:\n%s", md)
	}
}
