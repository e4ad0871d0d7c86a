package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/store/storetest"
)

// longRunsDir is a work dir whose store holds done runs "r-short" (10
// steps), "r-page" (two pages) and "r-long" (1,000), review and fixing
// in turn, written through the store's port.
func longRunsDir(t *testing.T) (string, *sqlite.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	t0 := time.Now().Add(-24 * time.Hour)
	for i, r := range []struct {
		id string
		n  int
	}{{"r-short", 10}, {"r-page", 2 * runview.PageSteps}, {"r-long", 1000}} {
		run := stratus.Run{ID: r.id, TaskID: "t" + r.id, TaskTitle: r.id, Flow: "implementation", Status: stratus.RunDone, WorkDir: dir,
			CreatedAt: t0.Add(time.Duration(i) * time.Second), EndedAt: t0.Add(time.Duration(r.n+1) * time.Minute)}
		if err := st.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.FillRun(ctx, st, r.id, "agent", []string{"review", "fixing"}, r.n, t0); err != nil {
			t.Fatal(err)
		}
	}
	return dir, st
}

// status of a 1,000-step run shows its newest 50 steps and says how many
// came before; --all shows every one; a short run shows all, as before.
func TestStatus_ALongRunShowsItsNewestSteps(t *testing.T) {
	t.Parallel()
	dir, _ := longRunsDir(t)
	r := runCLI(t, "status", "r-long", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "… 950 earlier steps not shown (--all shows every step)") ||
		!strings.Contains(r.stdout, "review#476 ") || !strings.Contains(r.stdout, "fixing#500 ") || strings.Contains(r.stdout, "review#475 ") {
		t.Errorf("status r-long: exit %d, want its newest 50 steps and the 950 before said:\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "status", "r-long", "--dir", dir, "--all")
	if r.code != 0 || strings.Contains(r.stdout, "earlier steps") || !strings.Contains(r.stdout, "review#1 ") || strings.Count(r.stdout, "attempt=1") != 1000 {
		t.Errorf("status r-long --all: exit %d, want every step:\n%.2000s", r.code, r.stdout)
	}
	r = runCLI(t, "status", "r-short", "--dir", dir)
	if r.code != 0 || strings.Contains(r.stdout, "earlier steps") || !strings.Contains(r.stdout, "review#1 ") || strings.Count(r.stdout, "attempt=1") != 10 {
		t.Errorf("status r-short: exit %d, want its 10 steps:\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "status", "r-long", "--dir", dir, "--json")
	var res StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Steps) != runview.PageSteps || res.StepsEarlier != 950 || res.Steps[0].StepRef != "review#476" {
		t.Errorf("status r-long --json: %v, %d steps from %v, steps_earlier %d; want the newest 50, 950 earlier", err, len(res.Steps), res.Steps[0].StepRef, res.StepsEarlier)
	}
}

// logs reads the newest page of a run's steps (of NODE's visits), not
// the run: a 1,000-step run as much as one of two pages; it says how many
// steps came before.
func TestLogs_ReadsFlat(t *testing.T) {
	t.Parallel()
	dir, st := longRunsDir(t)
	reads := &storetest.Reads{Store: st}
	ctx := t.Context()
	for _, node := range []string{"", "review"} {
		got := map[string]int64{}
		for _, id := range []string{"r-page", "r-long"} {
			o := &LogsOptions{RunID: id, Node: node, Lines: 40}
			reads.Take()
			v, earlier, err := logsView(ctx, o, reads)
			got[id] = reads.Take()
			if err != nil || len(logSteps(v, node)) != runview.PageSteps {
				t.Fatalf("logsView(%s, node %q) = %d steps, %v; want %d", id, node, len(v.Steps), err, runview.PageSteps)
			}
			if want := map[string]int{"r-page": 2*runview.PageSteps - runview.PageSteps, "r-long": 1000 - runview.PageSteps}[id]; node == "" && earlier != want {
				t.Errorf("logsView(%s) says %d earlier steps; want %d", id, earlier, want)
			} else if want := map[string]int{"r-page": 0, "r-long": 500 - runview.PageSteps}[id]; node != "" && earlier != want {
				t.Errorf("logsView(%s, %s) says %d earlier visits; want %d", id, node, earlier, want)
			}
		}
		if got["r-long"] > got["r-page"] {
			t.Errorf("logs (node %q) read %d records of a 1,000-step run, %d of a %d-step run: it grows with the run", node, got["r-long"], got["r-page"], 2*runview.PageSteps)
		}
	}
	var out strings.Builder
	o := &LogsOptions{IO: IO{Out: &out}, RunID: "r-long", Lines: 40}
	if err := printLogs(ctx, o, st, &sinkLogs{sk: fs.New(dir).Private(orchestrator.StateDir)}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "… the run's 950 earlier steps not shown: --all shows every one\n") || !strings.Contains(out.String(), "== fixing#500") {
		t.Errorf("logs r-long:\n%.600s", out.String())
	}
}
