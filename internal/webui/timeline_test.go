package webui

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// A checks step whose verdict is fail, and an evaluator's rework, are drawn
// on the timeline and the graph in the failure colour, never done's; a
// passing check keeps done's.
func TestRunPage_AFailedCheckTakesTheFailureColour(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(3 * time.Second)})
	for i, c := range []struct{ node, kind, verdict string }{
		{"checks", flow.KindChecks, "fail"},
		{"review", flow.KindEvaluator, "rework"},
		{"checks", flow.KindChecks, "pass"},
	} {
		at := t0.Add(time.Duration(i) * time.Second)
		visit := 1 + i/2
		ref := c.node + "#" + string(rune('0'+visit))
		st.CreateStep(ctx, stratus.Step{TID: "r1." + c.node + "." + string(rune('0'+visit)), RunID: "r1", Node: c.node, Kind: c.kind, Visit: visit, StepRef: ref,
			DedupKey: ref, Status: stratus.StepCompleted, Verdict: c.verdict, CreatedAt: at, EndedAt: at.Add(500 * time.Millisecond)})
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/r1", nil)))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("run page: %d %s", rec.Code, body)
	}
	for ref, want := range map[string]string{"checks#1": "st-failed", "review#1": "st-failed", "checks#2": "st-done"} {
		_, bar, _ := strings.Cut(body, `<span class="ref">`+ref+`</span>`)
		bar, _, _ = strings.Cut(bar, "</li>")
		if !strings.Contains(bar, `class="bar `+want+`"`) {
			t.Errorf("%s on the timeline: want %s:\n%s", ref, want, bar)
		}
	}
}

// README § Naming a run: /runs/RUN takes what the command line takes (a
// prefix of a run id, a task id, latest) and redirects to the run's own
// page; a name of no run is the 404 page naming it.
func TestRunPage_NamedByPrefixTaskOrLatest(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	id := "r-20260301T090000-abcdef"
	st.CreateRun(ctx, stratus.Run{ID: id, TaskID: "fix-login", Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(time.Second)})
	for _, ref := range []string{"r-20260301T09", "fix-login", "latest"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/"+ref, nil)))
		if rec.Code != 302 || rec.Header().Get("Location") != "/runs/"+id {
			t.Errorf("/runs/%s: %d to %q; want 302 to /runs/%s", ref, rec.Code, rec.Header().Get("Location"), id)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/no-such", nil)))
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "no-such") {
		t.Errorf("/runs/no-such: %d %s; want 404 naming it", rec.Code, rec.Body.String())
	}
}

// A step not ended reads its time so far in the step table ("running
// 1m30s"), never a bare "running" or 0s.
func TestRunPage_ARunningStepReadsItsTimeSoFar(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	start := time.Now().Add(-90 * time.Second)
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: start})
	st.CreateStep(ctx, stratus.Step{TID: "r1.planning.1", RunID: "r1", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1", Status: stratus.StepRunning, CreatedAt: start})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptRunning, StartedAt: start})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/r1", nil)))
	_, row, _ := strings.Cut(rec.Body.String(), `<tr><td><a href="/runs/r1/steps/planning/1">`)
	row, _, _ = strings.Cut(row, "</tr>")
	if !strings.Contains(row, "<td>running 1m3") {
		t.Errorf("planning#1's row does not read its time so far: %s", row)
	}
}
