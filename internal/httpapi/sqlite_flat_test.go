package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
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

// listPages returns the pages one ListSteps of run runID reads.
func listPages(tb testing.TB, st *sqlite.Store, runID string) int64 {
	tb.Helper()
	ctx := context.Background()
	before, err := st.PagesRead(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.ListSteps(ctx, runID); err != nil {
		tb.Fatal(err)
	}
	after, err := st.PagesRead(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return after - before
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
	whole := func(b *bundle) int64 { return listPages(t, st, b.run.ID) }
	run := whole(runs[500]) - whole(runs[5])
	t.Logf("pages read (dispatch, prompt fetch, submit): step 5 %v = %d, step 500 %v = %d; a ListSteps reads %d more at step 500", early, sum(early), late, sum(late), run)
	if grown := sum(late) - sum(early); sum(late) > sum(early)*5/4 || grown >= run/2 {
		t.Errorf("%d pages read at step 500, %d at step 5: %d more, as many as a read of the run's steps (%d more); want at most 1.25× and well under that", sum(late), sum(early), grown, run)
	}
}

// sentQueue keeps the messages sent to it.
type sentQueue struct {
	mu   sync.Mutex
	sent [][]byte
}

func (q *sentQueue) Send(_ context.Context, body []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, append([]byte(nil), body...))
	return nil
}

// take returns the messages sent since the last take.
func (q *sentQueue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.sent
	q.sent = nil
	return out
}

// growTurns writes n completed observation turns of the supervisor layer
// into the run, as its earlier steps would have earned.
func (b *bundle) growTurns(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		step, _, err := b.svc.Store.CreateNextStep(ctx, b.run.ID, core.SupervisorNode, fmt.Sprintf("turn-%s-%d", b.run.ID, i), func(v int) (stratus.Step, error) {
			ref := fmt.Sprintf("supervisor#%d", v)
			val, _ := json.Marshal(report.SupervisorValue{StepRef: ref, Node: core.SupervisorNode, Job: report.JobObserve, JobVisit: v, Outcome: "done"})
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", b.run.ID, core.SupervisorNode, v), RunID: b.run.ID, Node: core.SupervisorNode, Kind: report.Kind,
				Visit: v, StepRef: ref, DedupKey: fmt.Sprintf("turn-%s-%d", b.run.ID, i), Status: stratus.StepCompleted, Verdict: "done", Value: val,
				CreatedAt: time.Now().UTC(), EndedAt: time.Now().UTC()}, nil
		})
		if err != nil || step.Visit != i {
			tb.Fatalf("turn %d: %+v, %v", i, step, err)
		}
	}
}

// With the supervisor layer observing every step, a step's dispatch,
// prompt fetch and submit, and the handling of the observation message
// the submit queues (the turn found, numbered and launched), read about
// as many SQLite pages at step 500 of a run — 250 observation turns
// among its steps — as at step 5 (README.md § Performance).
func TestDispatchFetchSubmitObserve_SQLite_PagesReadFlat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	runs, queues := map[int]*bundle{}, map[int]*sentQueue{}
	for _, n := range []int{5, 500} {
		d := filepath.Join(dir, fmt.Sprint(n))
		b := setupStore(t, d, hitlFlow(t), func(r *stratus.Run) { r.ID, r.MaxCostUSD = fmt.Sprintf("r%d", n), 1e6 }, st, fs.New(d).Private(worker.StateDirName))
		env, err := b.svc.Env(ctx, b.run.ID)
		if err != nil {
			t.Fatal(err)
		}
		on := true
		env.Config.Supervisor.Enabled, env.Config.Supervisor.Observe.Mode = &on, supervisor.ModeAll
		if fs := env.Flow.Supervisor; fs != nil && fs.Observe != nil {
			fs.Observe.Mode = supervisor.ModeAll // the flow's narrowing to events
		}
		queues[n] = &sentQueue{}
		b.svc.Queue = queues[n]
		b.growTo(t, n)
		b.growTurns(t, n/2)
		runs[n] = b
	}
	client := &http.Client{}
	read := map[int][4]int64{}
	for range 3 { // the last of three: the first reads the schema on new connections
		for _, n := range []int{5, 500} {
			b := runs[n]
			p := b.stepPages(t, st, client)
			b.svc.Drain()
			before, err := st.PagesRead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			msgs := queues[n].take()
			if len(msgs) != 1 {
				t.Fatalf("run %s: %d messages queued by a step; want its observation", b.run.ID, len(msgs))
			}
			var m worker.Message
			if err := json.Unmarshal(msgs[0], &m); err != nil || m.Kind != core.KindObserve {
				t.Fatalf("queued %s (%v); want an observation", msgs[0], err)
			}
			if err := b.svc.Dispatch(ctx, m); err != nil {
				t.Fatal(err)
			}
			b.svc.Drain()
			b.fresh++ // the turn's launch, which dispatchFresh counts
			after, err := st.PagesRead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read[n] = [4]int64{p[0], p[1], p[2], after - before}
		}
	}
	total := func(r [4]int64) int64 { return r[0] + r[1] + r[2] + r[3] }
	early, late := read[5], read[500]
	run := listPages(t, st, runs[500].run.ID) - listPages(t, st, runs[5].run.ID)
	t.Logf("pages read (dispatch, prompt fetch, submit, observation): step 5 %v = %d, step 500 %v = %d; a ListSteps reads %d more at step 500", early, total(early), late, total(late), run)
	if grown := total(late) - total(early); total(late) > total(early)*5/4 || grown >= run/2 {
		t.Errorf("%d pages read at step 500, %d at step 5: %d more, as many as a read of the run's steps (%d more); want at most 1.25× and well under that", total(late), total(early), grown, run)
	}
}
