package webui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// fiftyStepRun is a viewer over a run of the built-in flow with 50 steps
// (review and fixing looping), each with its attempt.
func fiftyStepRun(b *testing.B) (*Server, string) {
	b.Helper()
	s, st, f := testViewer(b)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	run := stratus.Run{ID: "r50", TaskID: "t50", TaskTitle: "Fifty steps", Flow: "implementation", Status: stratus.RunDone, CreatedAt: t0, EndedAt: t0.Add(50 * time.Minute)}
	if err := st.CreateRun(ctx, run); err != nil {
		b.Fatal(err)
	}
	nodes := []string{"planning", "implementation"}
	for i := 0; len(nodes) < 50; i++ {
		nodes = append(nodes, "review", "fixing")
	}
	visits := map[string]int{}
	for i, n := range nodes[:50] {
		visits[n]++
		tid := fmt.Sprintf("r50.%s.%d", n, visits[n])
		kind := f.Node(n).Kind
		verdict := "done"
		if kind == flow.KindEvaluator {
			verdict = "rework"
		}
		s := stratus.Step{TID: tid, RunID: "r50", Node: n, Kind: kind, Visit: visits[n], StepRef: fmt.Sprintf("%s#%d", n, visits[n]), DedupKey: tid,
			Status: stratus.StepCompleted, Verdict: verdict, CreatedAt: t0.Add(time.Duration(i) * time.Minute), EndedAt: t0.Add(time.Duration(i+1) * time.Minute)}
		if _, _, err := st.CreateStep(ctx, s); err != nil {
			b.Fatal(err)
		}
		if err := st.UpdateStep(ctx, s); err != nil {
			b.Fatal(err)
		}
		cost := 0.01
		if err := st.CreateAttempt(ctx, stratus.Attempt{TID: tid, N: 1, Agent: n, Status: stratus.AttemptSubmitted, Terminal: "Captured",
			PromptTokens: 1000, CompletionTokens: 100, CostUSD: &cost, StartedAt: s.CreatedAt, EndedAt: s.EndedAt}); err != nil {
			b.Fatal(err)
		}
	}
	return s, "/runs/r50"
}

// testViewer is a viewer over an empty SQLite store and the built-in
// implementation flow, for a test to fill the store.
func testViewer(tb testing.TB) (*Server, *sqlite.Store, *flow.Flow) {
	tb.Helper()
	dir := tb.TempDir()
	flows := filepath.Join(dir, "flows")
	workertest.WriteFiles(tb, flows, workertest.ImplementationFlow(tb))
	f, err := flow.Load(flows, "implementation")
	if err != nil {
		tb.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	env := &worker.RunEnv{Flow: f, FlowDir: flows, Config: config.Default()}
	s, err := New(Source{Target: "test", Store: st, Sink: fs.New(dir), Env: func(context.Context, string) (*worker.RunEnv, error) { return env, nil }})
	if err != nil {
		tb.Fatal(err)
	}
	return s, st, f
}

// The run page of a 50-step run, served (store reads, graph layout,
// template), next to its anchor: a bare net/http handler writing the same
// bytes. Medians of interleaved rounds: go test -bench RunPage -count 5.
func BenchmarkRunPage_50Steps(b *testing.B) {
	s, path := fiftyStepRun(b)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", path, nil)))
	if rec.Code != 200 {
		b.Fatalf("run page: %d %s", rec.Code, rec.Body)
	}
	page := rec.Body.Bytes()
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) })
	b.Run("viewer", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			s.ServeHTTP(discard{}, authed(s, httptest.NewRequest("GET", path, nil)))
		}
	})
	b.Run("anchor_bare_handler", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			bare.ServeHTTP(discard{}, httptest.NewRequest("GET", path, nil))
		}
	})
}

// authed is r with the viewer's secret as its Bearer credential.
func authed(s *Server, r *http.Request) *http.Request {
	r.Header.Set("Authorization", "Bearer "+s.Secret())
	return r
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (discard) WriteHeader(int)             {}
