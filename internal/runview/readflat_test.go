package runview_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/store/storetest"
)

// longRuns is a store holding runs "short" (10 steps), "page" (2 pages
// of steps) and "long" (1,000), each running, and what it reads.
func longRuns(t *testing.T) *storetest.Reads {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Now().Add(-48 * time.Hour)
	for i, r := range []struct {
		id string
		n  int
	}{{"short", 10}, {"page", 2 * runview.PageSteps}, {"long", 1000}} {
		run := stratus.Run{ID: r.id, TaskID: "t-" + r.id, Flow: "implementation", Status: stratus.RunRunning, CreatedAt: t0.Add(time.Duration(i) * time.Hour)}
		if err := st.CreateRun(t.Context(), run); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.FillRun(t.Context(), st, r.id, "agent", []string{"review", "fixing"}, r.n, t0); err != nil {
			t.Fatal(err)
		}
	}
	return &storetest.Reads{Store: st}
}

// What status and the run page read of a run (its newest page) and what
// runs reads of a running run do not grow with the run: a 1,000-step run
// reads as many records as one of two pages (README.md § Performance).
func TestLoadPage_ReadsFlat(t *testing.T) {
	t.Parallel()
	st := longRuns(t)
	ctx := t.Context()
	reads := map[string]int64{}
	for _, id := range []string{"short", "page", "long"} {
		st.Take()
		v, err := runview.LoadReconciled(ctx, st, id, runview.Newest)
		if err != nil {
			t.Fatal(err)
		}
		reads[id] = st.Take()
		want := min(map[string]int{"short": 10, "page": 2 * runview.PageSteps, "long": 1000}[id], runview.PageSteps)
		if len(v.Steps) != want || v.Total != map[string]int{"short": 10, "page": 2 * runview.PageSteps, "long": 1000}[id] || v.Later() != 0 || len(v.Heads) != 2 {
			t.Errorf("%s: %d steps of %d (%d later), %d heads; want the newest %d, 2 heads", id, len(v.Steps), v.Total, v.Later(), len(v.Heads), want)
		}
	}
	if reads["long"] > reads["page"] {
		t.Errorf("the newest page of a 1,000-step run read %d records, of a %d-step run %d: it grows with the run", reads["long"], 2*runview.PageSteps, reads["page"])
	}
	if reads["short"] >= reads["page"] {
		t.Errorf("a 10-step run read %d records, more than a page's %d", reads["short"], reads["page"])
	}

	// The newest step of the long run is its 1,000th; its first page ends
	// at step 50.
	v, err := runview.LoadPage(ctx, st, "long", runview.Page{Upto: runview.PageSteps, Limit: runview.PageSteps})
	if err != nil || v.First != 1 || v.Earlier() != 0 || v.Later() != 1000-runview.PageSteps || v.Steps[0].Step.StepRef != "review#1" {
		t.Fatalf("LoadPage(upto %d) = first %d, %d earlier, %d later, %v; want steps 1..%d", runview.PageSteps, v.First, v.Earlier(), v.Later(), err, runview.PageSteps)
	}

	lines := map[int]int64{}
	for _, limit := range []int{1, 2, 3} {
		st.Take()
		if _, err := runview.List(ctx, st, limit); err != nil {
			t.Fatal(err)
		}
		lines[limit] = st.Take()
	}
	// The list is newest first: long, page, short. Adding the 1,000-step
	// run to the list adds what adding the 10-step one does.
	if long, short := lines[1], lines[3]-lines[2]; long > short {
		t.Errorf("runs read %d records for a 1,000-step running run, %d for a 10-step one: it grows with the run", long, short)
	}
}
