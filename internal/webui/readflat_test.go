package webui

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/store/storetest"
)

// longRunsViewer is a viewer over runs "short" (10 steps), "page" (two
// pages of steps) and "long" (1,000) of the implementation flow, review
// and fixing in turn, counting what the viewer reads.
func longRunsViewer(tb testing.TB) (*Server, *storetest.Reads) {
	tb.Helper()
	s, st, _ := testViewer(tb)
	fillRuns(tb, st, map[string]int{"short": 10, "page": 2 * runview.PageSteps, "long": 1000})
	reads := &storetest.Reads{Store: st}
	s.src.Store = reads
	return s, reads
}

// fillRuns writes runs of ids with their step counts, each done.
func fillRuns(tb testing.TB, st *sqlite.Store, runs map[string]int) {
	tb.Helper()
	ctx := context.Background()
	t0 := time.Now().Add(-24 * time.Hour)
	for id, n := range runs {
		run := stratus.Run{ID: id, TaskID: "t-" + id, TaskTitle: id, Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(time.Duration(n+1) * time.Minute)}
		if err := st.CreateRun(ctx, run); err != nil {
			tb.Fatal(err)
		}
		if _, err := storetest.FillRun(ctx, st, id, "agent", []string{"review", "fixing"}, n, t0); err != nil {
			tb.Fatal(err)
		}
	}
}

// The run page of a 1,000-step run reads as many records as one of two
// pages of steps: its newest page, each node's latest step and its loop's
// newest visits, not the run (README.md § Performance); it links the
// older steps.
func TestRunPage_ReadsFlat(t *testing.T) {
	t.Parallel()
	s, reads := longRunsViewer(t)
	got := map[string]int64{}
	bodies := map[string]string{}
	for _, id := range []string{"short", "page", "long"} {
		reads.Take()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/"+id, nil)))
		got[id] = reads.Take()
		if rec.Code != 200 {
			t.Fatalf("GET /runs/%s: %d %s", id, rec.Code, rec.Body)
		}
		bodies[id] = rec.Body.String()
	}
	if got["long"] > got["page"] {
		t.Errorf("the run page of a 1,000-step run read %d records, of a %d-step run %d: it grows with the run", got["long"], 2*runview.PageSteps, got["page"])
	}
	if strings.Contains(bodies["short"], `id="pages"`) || !strings.Contains(bodies["short"], "fixing#5") || !strings.Contains(bodies["short"], "review#1<") {
		t.Errorf("a 10-step run's page should show every step and no page links:\n%s", bodies["short"])
	}
	long := bodies["long"]
	earlier := 1000 - runview.PageSteps // review and fixing in turn: step 2k-1 is review#k
	for _, want := range []string{fmt.Sprintf("Steps %d–1000 of 1000", earlier+1), fmt.Sprintf(`href="/runs/long?upto=%d"`, earlier), `data-steps="1000"`,
		"fixing#500<", fmt.Sprintf("review#%d<", earlier/2+1)} {
		if !strings.Contains(long, want) {
			t.Errorf("the 1,000-step run's page lacks %q", want)
		}
	}
	if strings.Contains(long, fmt.Sprintf("fixing#%d<", earlier/2)) || strings.Contains(long, "newer steps") {
		t.Errorf("the 1,000-step run's newest page shows a step before its page, or a newer page")
	}

	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", fmt.Sprintf("/runs/long?upto=%d", earlier), nil)))
	older := earlier - runview.PageSteps
	for _, want := range []string{fmt.Sprintf("Steps %d–%d of 1000", older+1, earlier), fmt.Sprintf(`href="/runs/long?upto=%d"`, older), `href="/runs/long"`,
		fmt.Sprintf("fixing#%d<", earlier/2), fmt.Sprintf("review#%d<", older/2+1)} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET /runs/long?upto=%d lacks %q", earlier, want)
		}
	}
	for _, bad := range []string{"0", "-3", "x", "07"} {
		for _, ref := range []string{"long", "latest"} {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/"+ref+"?upto="+bad, nil)))
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), "upto") {
				t.Errorf("GET /runs/%s?upto=%s: %d; want 400 naming upto", ref, bad, rec.Code)
			}
		}
	}
	// A run named otherwise (latest, a prefix) redirects to its own page,
	// the page asked for with it.
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/lon?upto=5", nil)))
	if loc := rec.Header().Get("Location"); rec.Code != 302 || loc != "/runs/long?upto=5" {
		t.Errorf("GET /runs/lon?upto=5: %d to %q; want 302 to /runs/long?upto=5", rec.Code, loc)
	}
}

// flushCheck is a store whose RecentSteps notes whether the page's head
// had been flushed to rec when the run's steps were first read.
type flushCheck struct {
	*storetest.Reads
	rec     *httptest.ResponseRecorder
	flushed *bool
}

func (f *flushCheck) RecentSteps(ctx context.Context, runID string, upto, limit int) ([]stratus.Step, int, error) {
	if f.flushed != nil {
		*f.flushed = f.rec.Flushed && strings.Contains(f.rec.Body.String(), "<title>long · Stratus</title>")
		f.flushed = nil
	}
	return f.Reads.RecentSteps(ctx, runID, upto, limit)
}

// The run page sends its status and head before it reads the run's
// steps: a browser starts on the page while the run is read.
func TestRunPage_FlushesHeadFirst(t *testing.T) {
	t.Parallel()
	s, reads := longRunsViewer(t)
	rec := httptest.NewRecorder()
	var flushed bool
	s.src.Store = &flushCheck{Reads: reads, rec: rec, flushed: &flushed}
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/long", nil)))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "of 1000 (the timeline") {
		t.Fatalf("GET /runs/long: %d", rec.Code)
	}
	if !flushed {
		t.Errorf("the run's steps were read before the page's head was flushed")
	}
	// An unknown run is still a 404, decided before the head goes out.
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/20261207-000000-nosuch", nil)))
	if rec.Code != 404 {
		t.Errorf("GET an unknown run: %d; want 404", rec.Code)
	}
}

// A loop whose budget ran out shows it spent, not one round more: the
// review's outcome after the last round the budget paid for is not taken
// round the loop (the flow's exhaustion path takes it), as summary.md
// and `stratus run` count it.
func TestRunPage_ASpentLoopShowsItsBudget(t *testing.T) {
	t.Parallel()
	s, st, f := testViewer(t)
	budget := 0
	for _, e := range f.Edges {
		if e.Loop == "review_fix" && f.Budgets[e.Loop] > 0 {
			budget = f.Budgets[e.Loop]
		}
	}
	if budget == 0 {
		t.Fatal("the implementation flow has no review_fix budget")
	}
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	if err := st.CreateRun(ctx, stratus.Run{ID: "over", TaskID: "t", Flow: "implementation", Status: stratus.RunManualActionRequired, CreatedAt: t0, EndedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	steps, err := storetest.FillRun(ctx, st, "over", "agent", []string{"review", "fixing"}, 2*budget+1, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range steps {
		if step.Node == "review" {
			step.Verdict = "rework"
			if err := st.UpdateStep(ctx, step); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/runs/over", nil)))
	if want := fmt.Sprintf("spent %d/%d", budget, budget); rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("GET /runs/over: %d; want the loop labelled %q:\n%s", rec.Code, want, rec.Body)
	}
}
