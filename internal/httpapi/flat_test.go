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

// observeAll turns the supervisor layer on for b's run, observing every
// executed step (config and flow), its observation messages sent to a
// queue of their own, which it returns.
func (b *bundle) observeAll(tb testing.TB) *sentQueue {
	tb.Helper()
	env, err := b.svc.Env(context.Background(), b.run.ID)
	if err != nil {
		tb.Fatal(err)
	}
	on := true
	env.Config.Supervisor.Enabled, env.Config.Supervisor.Observe.Mode = &on, supervisor.ModeAll
	if fs := env.Flow.Supervisor; fs != nil && fs.Observe != nil {
		fs.Observe.Mode = supervisor.ModeAll // the flow's narrowing to events
	}
	q := &sentQueue{}
	b.svc.Queue = q
	return q
}

// stepObserved is one step of the worker's path with the supervisor
// layer observing it: dispatch, prompt fetch and submit (step, counted by
// count, as stepPages or stepAWS count them), then the handling of the
// observation message the submit queued on q — the step found, the turn
// numbered, created and launched. It returns what each of the four read,
// by taken: what was read since it was last called.
func (b *bundle) stepObserved(tb testing.TB, q *sentQueue, step func() [3]int64, taken func() int64) [4]int64 {
	tb.Helper()
	ctx := context.Background()
	p := step()
	b.svc.Drain()
	taken()
	msgs := q.take()
	if len(msgs) != 1 {
		tb.Fatalf("run %s: %d messages queued by a step; want its observation", b.run.ID, len(msgs))
	}
	var m worker.Message
	if err := json.Unmarshal(msgs[0], &m); err != nil || m.Kind != core.KindObserve {
		tb.Fatalf("queued %s (%v); want an observation", msgs[0], err)
	}
	if err := b.svc.Dispatch(ctx, m); err != nil {
		tb.Fatal(err)
	}
	b.svc.Drain()
	b.fresh++ // the turn's launch, which dispatchFresh counts
	return [4]int64{p[0], p[1], p[2], taken()}
}

func total(r [4]int64) int64 { return r[0] + r[1] + r[2] + r[3] }

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
	runs, queues := map[int]*bundle{}, map[int]*sentQueue{}
	for _, n := range []int{5, 500} {
		d := filepath.Join(dir, fmt.Sprint(n))
		b := setupStore(t, d, hitlFlow(t), func(r *stratus.Run) { r.ID, r.MaxCostUSD = fmt.Sprintf("r%d", n), 1e6 }, st, fs.New(d).Private(worker.StateDirName))
		queues[n] = b.observeAll(t)
		b.growTo(t, n)
		b.growTurns(t, n/2)
		runs[n] = b
	}
	client := &http.Client{}
	var last int64
	taken := func() int64 {
		n, err := st.PagesRead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d := n - last
		last = n
		return d
	}
	read := map[int][4]int64{}
	for range 3 { // the last of three: the first reads the schema on new connections
		for _, n := range []int{5, 500} {
			b := runs[n]
			read[n] = b.stepObserved(t, queues[n], func() [3]int64 { return b.stepPages(t, st, client) }, taken)
		}
	}
	early, late := read[5], read[500]
	run := listPages(t, st, runs[500].run.ID) - listPages(t, st, runs[5].run.ID)
	t.Logf("pages read (dispatch, prompt fetch, submit, observation): step 5 %v = %d, step 500 %v = %d; a ListSteps reads %d more at step 500", early, total(early), late, total(late), run)
	if grown := total(late) - total(early); total(late) > total(early)*5/4 || grown >= run/2 {
		t.Errorf("%d pages read at step 500, %d at step 5: %d more, as many as a read of the run's steps (%d more); want at most 1.25× and well under that", total(late), total(early), grown, run)
	}
}

// On the DynamoDB store, with the supervisor layer observing every step,
// a step's dispatch, prompt fetch and submit, and the handling of its
// observation message, read about as many items at step 200 of a run —
// 100 observation turns among its steps — as at step 5 (README.md §
// Performance).
func TestDispatchFetchSubmitObserve_AWS_ItemsReadFlat(t *testing.T) {
	t.Parallel()
	client := &http.Client{}
	measure := func(n int) ([4]int64, map[string]int64) {
		b, c := setupAWS(t)
		q := b.observeAll(t)
		b.growTo(t, n)
		b.growTurns(t, n/2)
		c.big = n / 2
		calls := map[string]int64{}
		taken := func() int64 {
			n, cs := c.take()
			for k, v := range cs {
				calls[k] += v
			}
			return n
		}
		c.take()
		got := b.stepObserved(t, q, func() [3]int64 {
			items, cs, _ := b.stepAWS(t, c, client)
			for k, v := range cs {
				calls[k] += v
			}
			return items
		}, taken)
		return got, calls
	}
	early, _ := measure(5)
	late, calls := measure(200)
	t.Logf("items read (dispatch, prompt fetch, submit, observation): step 5 %v = %d, step 200 %v = %d", early, total(early), late, total(late))
	checkItemsFlat(t, total(early), total(late), calls)
}
