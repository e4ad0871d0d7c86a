package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// The runs of longRunsDir.
const (
	shortRun = "r-20261207T100000-00000a"
	pageRun  = "r-20261207T100000-00000b"
	longRun  = "r-20261207T100000-00000c"
	oneRun   = "r-20261207T100000-00000d" // one page: runview.PageSteps steps
)

// longRunsDir is a work dir whose store holds done runs shortRun (10
// steps), pageRun (two pages) and longRun (1,000), review and fixing
// in turn, written through the store's port.
func longRunsDir(t testing.TB) (string, *sqlite.Store) {
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
	}{{shortRun, 10}, {pageRun, 2 * runview.PageSteps}, {longRun, 1000}, {oneRun, runview.PageSteps}} {
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

// status of a 1,000-step run shows its newest runview.PageSteps steps
// and says how many came before; --all shows every one; a short run shows
// all, as before.
func TestStatus_ALongRunShowsItsNewestSteps(t *testing.T) {
	t.Parallel()
	dir, _ := longRunsDir(t)
	earlier := 1000 - runview.PageSteps
	first, before := fmt.Sprintf("review#%d", earlier/2+1), fmt.Sprintf("fixing#%d ", earlier/2) // review and fixing in turn
	r := runCLI(t, "status", longRun, "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("… %d earlier steps not shown (--all shows every step)", earlier)) ||
		!strings.Contains(r.stdout, first+" ") || !strings.Contains(r.stdout, "fixing#500 ") || strings.Contains(r.stdout, before) {
		t.Errorf("status of a 1,000-step run: exit %d, want its newest %d steps (%s on) and the %d before said:\n%s", r.code, runview.PageSteps, first, earlier, r.stdout)
	}
	r = runCLI(t, "status", longRun, "--dir", dir, "--all")
	if r.code != 0 || strings.Contains(r.stdout, "earlier steps") || !strings.Contains(r.stdout, "review#1 ") || strings.Count(r.stdout, "attempt=1") != 1000 {
		t.Errorf("status --all: exit %d, want every step:\n%.2000s", r.code, r.stdout)
	}
	r = runCLI(t, "status", shortRun, "--dir", dir)
	if r.code != 0 || strings.Contains(r.stdout, "earlier steps") || !strings.Contains(r.stdout, "review#1 ") || strings.Count(r.stdout, "attempt=1") != 10 {
		t.Errorf("status of a 10-step run: exit %d, want its 10 steps:\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "status", longRun, "--dir", dir, "--json")
	var res StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Steps) != runview.PageSteps || res.StepsEarlier != earlier || res.Steps[0].StepRef != first {
		t.Fatalf("status --json: %v, %d steps, steps_earlier %d; want the newest %d from %s, %d earlier", err, len(res.Steps), res.StepsEarlier, runview.PageSteps, first, earlier)
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
		for _, id := range []string{pageRun, longRun} {
			o := &LogsOptions{RunID: id, Node: node, Lines: 40}
			reads.Take()
			v, earlier, err := logsView(ctx, o, reads)
			got[id] = reads.Take()
			if err != nil || len(logSteps(v, node)) != runview.PageSteps {
				t.Fatalf("logsView(%s, node %q) = %d steps, %v; want %d", id, node, len(v.Steps), err, runview.PageSteps)
			}
			if want := map[string]int{pageRun: 2*runview.PageSteps - runview.PageSteps, longRun: 1000 - runview.PageSteps}[id]; node == "" && earlier != want {
				t.Errorf("logsView(%s) says %d earlier steps; want %d", id, earlier, want)
			} else if want := map[string]int{pageRun: 0, longRun: 500 - runview.PageSteps}[id]; node != "" && earlier != want {
				t.Errorf("logsView(%s, %s) says %d earlier visits; want %d", id, node, earlier, want)
			}
		}
		if got[longRun] > got[pageRun] {
			t.Errorf("logs (node %q) read %d records of a 1,000-step run, %d of a %d-step run: it grows with the run", node, got[longRun], got[pageRun], 2*runview.PageSteps)
		}
	}
	var out strings.Builder
	o := &LogsOptions{IO: IO{Out: &out}, RunID: longRun, Lines: 40}
	if err := printLogs(ctx, o, st, &sinkLogs{sk: fs.New(dir).Private(orchestrator.StateDir)}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), fmt.Sprintf("… the run's %d earlier steps not shown: --all shows every one\n", 1000-runview.PageSteps)) || !strings.Contains(out.String(), "== fixing#500") {
		t.Errorf("logs r-long:\n%.600s", out.String())
	}
}
