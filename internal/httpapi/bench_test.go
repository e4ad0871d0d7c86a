package httpapi_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/benchfig"
	_ "modernc.org/sqlite"
)

// submitBody returns n bytes of Markdown prose: it folds as a string (the
// fold still scans it) and is projected as <ctx-dir>/planning.md.
func submitBody(n int) []byte {
	line := "- step: read the task, plan the lanes, write the notes; keep the API stable.\n"
	b := []byte("# Plan\n\n" + strings.Repeat(line, n/len(line)+1))
	return b[:n]
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted durations, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)]) / float64(time.Millisecond)
}

// BenchmarkSubmit64KiB measures POST /v1/worker/submit of a 64 KiB body
// through the real handler — handle auth, fencing, tail append, fold,
// projection to the fs sink, task-token completion to a fake — against a
// bare net/http handler that reads the body and writes the same bytes to a
// file. Both are httptest servers in this process, driven by one client
// loop that alternates them, so load drift hits both alike. Each submit
// completes its attempt, so b.N running attempts are dispatched before the
// timer starts. ns/op is one submit plus one bare request; the custom
// metrics split them: ops/s of each, the ratio submit/bare (target >= 0.5)
// and p50/p99 latencies in ms.
func BenchmarkSubmit64KiB(b *testing.B) {
	body := submitBody(64 << 10)
	h := setup(b)
	api := h.srv

	bare := bareServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	post := poster(client, body)

	// One running attempt per submit, plus one to warm both servers up.
	handles := make([]string, b.N+1)
	for i := range handles {
		handles[i] = "Bearer " + h.dispatchFresh(b).Handle
	}
	if _, err := post(api.URL+"/v1/worker/submit", handles[b.N]); err != nil {
		b.Fatal(err)
	}
	if _, err := post(bare.URL+"/bare", handles[b.N]); err != nil {
		b.Fatal(err)
	}

	submitLat := make([]time.Duration, b.N)
	bareLat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := post(api.URL+"/v1/worker/submit", handles[i])
		if err != nil {
			b.Fatal(err)
		}
		submitLat[i] = d
		if d, err = post(bare.URL+"/bare", handles[i]); err != nil {
			b.Fatal(err)
		}
		bareLat[i] = d
	}
	b.StopTimer()

	if successes, failures := h.tokens.Counts(); successes != b.N+1 || failures != 0 {
		b.Fatalf("task tokens: %d successes, %d failures; want %d successes", successes, failures, b.N+1)
	}
	var submitSum, bareSum time.Duration
	for i := range b.N {
		submitSum += submitLat[i]
		bareSum += bareLat[i]
	}
	submitOps := float64(b.N) / submitSum.Seconds()
	bareOps := float64(b.N) / bareSum.Seconds()
	slices.Sort(submitLat)
	slices.Sort(bareLat)
	b.ReportMetric(submitOps, "submit_ops/s")
	b.ReportMetric(bareOps, "bare_ops/s")
	b.ReportMetric(submitOps/bareOps, "submit/bare")
	b.ReportMetric(percentile(submitLat, 50), "submit_p50_ms")
	b.ReportMetric(percentile(submitLat, 99), "submit_p99_ms")
	b.ReportMetric(percentile(bareLat, 50), "bare_p50_ms")
	b.ReportMetric(percentile(bareLat, 99), "bare_p99_ms")
}

// bareServer is the anchor of the submit figures: a bare net/http handler
// that reads the body and writes the same bytes to a file of its own.
// Like submit it does not fsync (README.md § Performance: the anchor does
// what submit does for durability): the SQLite store commits with
// synchronous=NORMAL in WAL mode and neither its blob files nor the
// projection are synced, so an acknowledged submit, like this file, survives
// a process crash but not a power loss (internal/store/sqlite § Durability).
func bareServer(b *testing.B) *httptest.Server {
	dir := b.TempDir()
	var seq atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name := filepath.Join(dir, fmt.Sprintf("body-%d.md", seq.Add(1)))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"bytes\":%d}\n", len(data))
	}))
	b.Cleanup(srv.Close)
	return srv
}

// floorServer is the submit figure's floor (README.md § Performance): a bare
// net/http handler that does only what a durable submit must do — read the
// body, insert it into SQLite in one transaction and write its projection
// file. The benchmark's submits are visits of one node, whose projection is
// one file: each replaces it the one way a reader never sees it torn, a
// temporary file renamed over it (docs/contracts.md § Files are the
// server's job). The database is opened as internal/store/sqlite
// opens its writer: WAL, synchronous=NORMAL, BEGIN IMMEDIATE, one connection
// (one writer); like bareServer it does not fsync the file.
func floorServer(b *testing.B) *httptest.Server {
	dir := b.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "floor.db")+
		"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_size_limit(16777216)"+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE outputs (id INTEGER PRIMARY KEY, auth TEXT NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		res, err := tx.Exec(`INSERT INTO outputs (auth, body, created_at) VALUES (?, ?, ?)`, r.Header.Get("Authorization"), data, time.Now().UnixNano())
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		tmp := filepath.Join(dir, fmt.Sprintf(".planning.md.%d", id))
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := os.Rename(tmp, filepath.Join(dir, "planning.md")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"bytes\":%d}\n", len(data))
	}))
	b.Cleanup(srv.Close)
	return srv
}

// poster POSTs body to a URL with an Authorization value and returns how
// long the answer took; an answer other than 200 is an error.
func poster(client *http.Client, body []byte) func(url, auth string) (time.Duration, error) {
	return func(url, auth string) (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", auth)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, out)
		}
		return took, nil
	}
}

// BenchmarkFigure_Submit prints `make bench`'s submit figures (README.md §
// Performance): 64 KiB submits from 8 concurrent loopback clients, ms per
// submit of a round's wall time, from rounds that each drive, one after the
// other, the real handler (auth, fencing, tail, fold, projection, task
// token), the floor (floorServer: one SQLite insert and a projection file per
// body, one writer) and the bare handler (bareServer) with the same bodies
// from the same 8 clients; each figure is the medians of 7 rounds:
//
//   - submit: the real handler's throughput next to the floor's; goal: at
//     least 0.8 of it.
//   - submit-bare: the real handler's next to the bare handler's; goal: at
//     least half of it.
//   - submit-floor: the floor's next to the bare handler's, with
//     submit-bare's goal: where that goal stands against what durability
//     costs on this machine.
func BenchmarkFigure_Submit(b *testing.B) {
	const clients, perRound, rounds = 8, 64, 7
	body := submitBody(64 << 10)
	h := setup(b)
	bare := bareServer(b)
	floor := floorServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	post := poster(client, body)
	round := func(url string, auths []string) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(auths)); i = next.Add(1) - 1 {
					if _, err := post(url, auths[i]); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(time.Since(start).Microseconds()) / 1e3 / float64(len(auths))
	}
	fresh := func() []string {
		auths := make([]string, perRound)
		for i := range auths {
			auths[i] = "Bearer " + h.dispatchFresh(b).Handle
		}
		return auths
	}
	anon := make([]string, perRound)
	for i := range anon {
		anon[i] = fmt.Sprintf("Bearer anchor-%d", i)
	}
	printed := false
	for b.Loop() {
		if printed {
			continue
		}
		var submit, durable, bareMS []float64
		for range rounds {
			submit = append(submit, round(h.srv.URL+"/v1/worker/submit", fresh()))
			durable = append(durable, round(floor.URL+"/floor", anon))
			bareMS = append(bareMS, round(bare.URL+"/bare", anon))
		}
		benchfig.FromSamples(benchfig.Figure{Name: "submit", Unit: "ms/submit", Goal: 0.8, AtLeast: true, Invert: true}, submit, durable).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "submit-bare", Unit: "ms/submit", Goal: 0.5, AtLeast: true, Invert: true}, submit, bareMS).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "submit-floor", Unit: "ms/submit", Goal: 0.5, AtLeast: true, Invert: true}, durable, bareMS).Print(os.Stdout)
		printed = true
	}
}

// BenchmarkFigure_SubmitFlat prints `make bench`'s submit-flat and
// dispatch-flat figures (README.md § Performance): one client's 64 KiB
// submit, and the dispatch (prompt render included) before it, at about step
// 1,000 of a run, next to the same at about step 10 of another run of the
// same flow in a work dir of its own; the samples alternate between the two
// runs, so drift (the machine's load, the file system's state) hits both
// alike (medians of 41 each); goal: at most 1.25× — a step's cost does not
// grow with the run.
func BenchmarkFigure_SubmitFlat(b *testing.B) {
	const samples = 41
	body := submitBody(64 << 10)
	early, late := setup(b), setup(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	post := poster(client, body)
	sample := func(h *bundle) (submit, dispatch float64) {
		start := time.Now()
		auth := "Bearer " + h.dispatchFresh(b).Handle
		dispatch = float64(time.Since(start).Microseconds()) / 1e3
		d, err := post(h.srv.URL+"/v1/worker/submit", auth)
		if err != nil {
			b.Fatal(err)
		}
		return float64(d.Microseconds()) / 1e3, dispatch
	}
	printed := false
	for b.Loop() {
		if printed {
			continue
		}
		for early.fresh < 10 {
			early.dispatchFresh(b) // the early run starts its samples at step 10
		}
		for late.fresh < 1000 {
			late.dispatchFresh(b) // the late run grows to 1,000 steps (left running)
		}
		var earlyS, earlyD, lateS, lateD []float64
		for range samples {
			s, d := sample(early)
			earlyS, earlyD = append(earlyS, s), append(earlyD, d)
			s, d = sample(late)
			lateS, lateD = append(lateS, s), append(lateD, d)
		}
		benchfig.FromSamples(benchfig.Figure{Name: "submit-flat", Unit: "ms/submit", Goal: 1.25}, lateS, earlyS).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "dispatch-flat", Unit: "ms/dispatch", Goal: 1.25}, lateD, earlyD).Print(os.Stdout)
		printed = true
	}
}
