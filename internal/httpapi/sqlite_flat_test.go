package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// hitlFlow is the built-in implementation flow with a hitl grant on its
// planning node, so that a planning prompt reads the node's human replies
// (worker core HumanReplySection) as an agent that may ask does.
func hitlFlow(tb testing.TB) map[string]string {
	tb.Helper()
	files := workertest.ImplementationFlow(tb)
	const at = "      output_artifact: plan\n"
	if !strings.Contains(files["implementation.yaml"], at) {
		tb.Fatalf("implementation.yaml has no %q line to add the planning node's hitl grant after", at)
	}
	files["implementation.yaml"] = strings.Replace(files["implementation.yaml"], at, at+"      hitl: { allow_question: true, allow_approval: false }\n", 1)
	return files
}

// stepPages is stepAWS on a SQLite store: the pages st read (sqlite
// Store.PagesRead) by the step's dispatch, prompt fetch and submit.
func (b *bundle) stepPages(tb testing.TB, st *sqlite.Store, client *http.Client) (pages [3]int64) {
	tb.Helper()
	ctx := context.Background()
	last, err := st.PagesRead(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	keep := func(i int) {
		n, err := st.PagesRead(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		pages[i], last = n-last, n
	}
	spec := b.dispatchFresh(tb)
	keep(0)
	auth := "Bearer " + spec.Handle
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/v1/worker/prompt?task_id="+spec.TaskID, nil)
	req.Header.Set("Authorization", auth)
	mustOK(tb, client, req)
	keep(1)
	req, _ = http.NewRequest(http.MethodPost, b.srv.URL+"/v1/worker/submit", strings.NewReader("# Plan\n\nDone.\n"))
	req.Header.Set("Authorization", auth)
	mustOK(tb, client, req)
	keep(2)
	return pages
}

// On the SQLite store a step's dispatch, prompt fetch and submit read
// about as many pages at step 500 of a run as at step 5 of another run in
// the same file (README.md § Performance: the store's B-trees are as deep
// for both, so what grows is what a request reads of its run): each
// per-step query seeks its run's and node's entries, none reads the run.
// The planning node may ask a human (its prompt reads its replies) and the
// run has a cost cap (dispatch reads its spend).
func TestDispatchFetchSubmit_SQLite_PagesReadFlat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runs := map[int]*bundle{}
	for _, n := range []int{5, 500} {
		d := filepath.Join(dir, fmt.Sprint(n))
		runs[n] = setupStore(t, d, hitlFlow(t), func(r *stratus.Run) { r.ID, r.MaxCostUSD = fmt.Sprintf("r%d", n), 1e6 }, st, fs.New(d).Private(worker.StateDirName))
		runs[n].growTo(t, n)
	}
	client := &http.Client{}
	read := map[int][3]int64{}
	for range 3 { // the last of three: the first reads the schema on new connections
		for _, n := range []int{5, 500} {
			read[n] = runs[n].stepPages(t, st, client)
		}
	}
	early, late := read[5], read[500]
	// What reading the run's steps once costs more at step 500 than at
	// step 5: a per-step path that does adds as much.
	whole := func(b *bundle) int64 {
		before, err := st.PagesRead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ListSteps(context.Background(), b.run.ID); err != nil {
			t.Fatal(err)
		}
		after, err := st.PagesRead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	run := whole(runs[500]) - whole(runs[5])
	t.Logf("pages read (dispatch, prompt fetch, submit): step 5 %v = %d, step 500 %v = %d; a ListSteps reads %d more at step 500", early, sum(early), late, sum(late), run)
	if grown := sum(late) - sum(early); sum(late) > sum(early)*5/4 || grown >= run/2 {
		t.Errorf("%d pages read at step 500, %d at step 5: %d more, as many as a read of the run's steps (%d more); want at most 1.25× and well under that", sum(late), sum(early), grown, run)
	}
}
