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

// A file an engine wrote is shown, never run: raw HTML in Markdown is
// escaped (goldmark without WithUnsafe), JSON is pretty-printed, a
// projection's front matter is kept apart from its body.
func TestDoc_EscapesHTMLAndShapesJSONAndFrontMatter(t *testing.T) {
	s, err := New(Source{})
	if err != nil {
		t.Fatal(err)
	}
	d := s.doc("out.md", []byte("# Title\n\n<script>alert(1)</script>\n\nDone <img src=x onerror=alert(2)> with List<String>.\n"))
	h := string(d.HTML)
	if strings.Contains(h, "<script>") || strings.Contains(h, "<img") || !strings.Contains(h, "<h1>Title</h1>") {
		t.Errorf("markdown rendered to %q; want the heading and no live HTML", h)
	}
	// What looked like HTML is shown as text, never dropped.
	if !strings.Contains(h, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(h, "&lt;img src=x onerror=alert(2)&gt;") || !strings.Contains(h, "List&lt;String&gt;") {
		t.Errorf("raw HTML was not shown as text: %q", h)
	}
	if d := s.doc("review.md", []byte("---\nstep: r\n---\n{\"findings\":[]}\n")); d.Text != "{\n  \"findings\": []\n}" || d.Front != "step: r" {
		t.Errorf("a JSON report in a .md: front %q, text %q; want it pretty-printed", d.Front, d.Text)
	}
	if d := s.doc("v.json", []byte(`{"a":[1,2]}`)); d.Text != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("json shown as %q", d.Text)
	}
	d = s.doc("p.md", []byte("---\ntask_id: t1\nstep: a\n---\nBody *here*.\n"))
	if d.Front != "task_id: t1\nstep: a" || !strings.Contains(string(d.HTML), "<em>here</em>") || strings.Contains(string(d.HTML), "task_id") {
		t.Errorf("projection: front %q, body %q", d.Front, d.HTML)
	}
}

// The token of a reply form names its run and node: one run's token does
// not answer another run's gate.
func TestCSRFToken_PerRunAndNode(t *testing.T) {
	s, _ := New(Source{})
	if a, b := s.csrfToken("r1", "gate"), s.csrfToken("r2", "gate"); a == b || len(a) != 64 {
		t.Errorf("tokens %q and %q", a, b)
	}
	if other, _ := New(Source{}); other.csrfToken("r1", "gate") == s.csrfToken("r1", "gate") {
		t.Error("two viewers share a token: the key is not per process")
	}
}

// A running step's node says how far it is — elapsed, steps, tokens — and
// the event stream carries it as it moves (it showed 0/0 until the step
// ended).
func TestRunPage_RunningNodeShowsProgress(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	start := time.Now().Add(-90 * time.Second)
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: start})
	st.CreateStep(ctx, stratus.Step{TID: "r1.planning.1", RunID: "r1", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1", Status: stratus.StepRunning, CreatedAt: start})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptRunning, Steps: 3, PromptTokens: 1200, CompletionTokens: 34, StartedAt: start})
	sn, err := s.snapshot(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if sn.Nodes["planning"] != "running" || !strings.Contains(sn.Labels["planning"], "3 st · 1.2k tok") || !strings.HasPrefix(sn.Labels["planning"], "1m3") {
		t.Errorf("planning: %s %q; want running with its elapsed time, steps and tokens", sn.Nodes["planning"], sn.Labels["planning"])
	}
}

// docs/security.md § Retention: the run page of a pruned run says it was
// pruned and when, not why a step failed (its steps are gone).
func TestWhy_APrunedRunSaysSo(t *testing.T) {
	t.Parallel()
	ended := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	run := stratus.Run{ID: "r-20250101T000000-abcdef", Status: stratus.RunFailed, EndedAt: ended, PrunedAt: ended.Add(31 * 24 * time.Hour)}
	if got := why(run, nil); !strings.Contains(got, "pruned 2025-02-01") || !strings.Contains(got, "retention_days") || !strings.Contains(got, "ended 2025-01-01") {
		t.Errorf("why = %q; want it to say the run was pruned, when, and when it ended", got)
	}
}

// The step table, the timeline and `stratus status` show one duration for
// a step (runview.StepView.Span): planning#1, created 55 ms before its
// attempt started, read 112 ms in the table (created to ended) and 57 ms
// on the timeline and in status.
func TestRunPage_StepTableAndTimelineShowOneDuration(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(333 * time.Millisecond)})
	st.CreateStep(ctx, stratus.Step{TID: "r1.planning.1", RunID: "r1", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1",
		Status: stratus.StepCompleted, Verdict: "done", CreatedAt: t0, EndedAt: t0.Add(112 * time.Millisecond)})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptSubmitted, Terminal: "Captured",
		StartedAt: t0.Add(55 * time.Millisecond), EndedAt: t0.Add(112 * time.Millisecond)})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/r1", nil)))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("run page: %d %s", rec.Code, body)
	}
	_, row, _ := strings.Cut(body, `<tr><td><a href="/runs/r1/steps/planning/1">`)
	table, _, _ := strings.Cut(row, "</tr>")
	if !strings.Contains(table, "<td>57ms</td>") || !strings.Contains(body, `<span class="dur">57ms`) || strings.Contains(body, "112ms") {
		t.Errorf("planning#1 does not read 57ms in both the table and the timeline:\ntable row: %s\npage: %s", table, body)
	}
	if !strings.Contains(body, "· 333ms ·") {
		t.Errorf("the run's 333 ms do not read 333ms:\n%s", body)
	}
}

// README § Publishing: the run page names the pushed branch and links the
// pull request; a URL the host answered that is no http(s) link is not one.
func TestRunPage_ShowsTheBranchAndThePullRequest(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for id, url := range map[string]string{"r1": "https://github.com/acme/app/pull/7", "r2": "javascript:alert(1)"} {
		st.CreateRun(ctx, stratus.Run{ID: id, TaskID: "t1", Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(time.Second)})
		if err := st.SetPublication(ctx, id, stratus.Publication{Remote: "origin", URL: "https://github.com/acme/app.git", Branch: "stratus/t1", Head: strings.Repeat("a", 40),
			PullRequest: &stratus.PullRequest{Number: 7, URL: url, State: "open"}}); err != nil {
			t.Fatal(err)
		}
	}
	page := func(id string) string {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/"+id, nil)))
		if rec.Code != 200 {
			t.Fatalf("run page %s: %d", id, rec.Code)
		}
		return rec.Body.String()
	}
	if body := page("r1"); !strings.Contains(body, `branch <b>stratus/t1</b> pushed to origin (https://github.com/acme/app.git) · pull request <a href="https://github.com/acme/app/pull/7">#7</a> (open)`) {
		t.Errorf("run page lacks the publication:\n%s", body)
	}
	if body := page("r2"); strings.Contains(body, `href="javascript:`) {
		t.Errorf("a javascript: URL became a link")
	}
}

// README § Transient failures: a step's page lists each attempt with its
// failure class, the reset its provider named, and the provider it ran
// on, so a retried or parked step shows how it got where it is.
func TestStepPage_AttemptsShowTheirFailureClassAndProvider(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	reset := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: t0})
	st.CreateStep(ctx, stratus.Step{TID: "r1.planning.1", RunID: "r1", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1",
		Status: stratus.StepParked, CreatedAt: t0})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptFailed, Terminal: "Failed", Class: "provider_unavailable",
		Resolved: stratus.Resolved{Provider: "claude"}, StartedAt: t0, EndedAt: t0.Add(time.Minute)})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 2, Agent: "planning", Status: stratus.AttemptFailed, Terminal: "Failed", Class: "rate_limited", RetryAt: reset,
		Resolved: stratus.Resolved{Provider: "codex"}, StartedAt: t0.Add(2 * time.Minute), EndedAt: t0.Add(3 * time.Minute)})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/r1/steps/planning/1", nil)))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("step page: %d %s", rec.Code, body)
	}
	_, table, _ := strings.Cut(body, "<h2>Attempts</h2>")
	table, _, _ = strings.Cut(table, "</table>")
	for _, want := range []string{"<td>provider_unavailable</td><td>claude</td>", "<td>rate_limited <span class=\"dim\">until ", "</span></td><td>codex</td>"} {
		if !strings.Contains(table, want) {
			t.Errorf("the attempts table lacks %q:\n%s", want, table)
		}
	}
}
