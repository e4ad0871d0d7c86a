package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// runs --status S lists only the runs of status S; a status that is no
// run status is refused (exit 2) naming the valid ones.
func TestRuns_StatusFilter(t *testing.T) {
	t.Parallel()
	dir, ids := namedRuns(t)
	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	failed := stratus.Run{ID: "r-20261204T160003-fff444", TaskID: "add-retry", Flow: "implementation", Status: stratus.RunFailed, WorkDir: dir,
		CreatedAt: time.Date(2026, 12, 4, 16, 0, 3, 0, time.UTC), EndedAt: time.Date(2026, 12, 4, 16, 1, 3, 0, time.UTC)}
	if err := st.CreateRun(context.Background(), failed); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out, errb bytes.Buffer
	if code := Main([]string{"runs", "--dir", dir, "--status", "failed"}, IO{Out: &out, Err: &errb}); code != 0 || !strings.Contains(out.String(), failed.ID) || strings.Contains(out.String(), ids[0]) {
		t.Errorf("runs --status failed: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Main([]string{"runs", "--dir", dir, "--status", "done", "--limit", "2"}, IO{Out: &out, Err: &errb}); code != 0 || !strings.Contains(out.String(), ids[2]) || !strings.Contains(out.String(), ids[1]) || strings.Contains(out.String(), ids[0]) || strings.Contains(out.String(), failed.ID) {
		t.Errorf("runs --status done --limit 2: exit %d, want the two newest done runs\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Main([]string{"runs", "--dir", dir, "--status", "interrupted"}, IO{Out: &out, Err: &errb}); code != 0 || out.String() != "no run is interrupted\n" {
		t.Errorf("runs --status interrupted: exit %d %q", code, out.String())
	}
	errb.Reset()
	if code := Main([]string{"runs", "--dir", dir, "--status", "finished"}, IO{Out: &out, Err: &errb}); code != ExitUsage ||
		!strings.Contains(errb.String(), `--status "finished" is no run status; valid: running, waiting, done, failed, manual_action_required, interrupted`) {
		t.Errorf("runs --status finished: exit %d\n%s", code, errb.String())
	}
}

// README § Cost and token caps: status shows the run's cost and tokens, by
// the rule runs and the viewer follow.
func TestStatus_ShowsTheRunsCostAndTokens(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	cost := 0.0123
	for _, c := range []struct {
		res  StatusResult
		want string
	}{
		{StatusResult{CostUSD: &cost, Tokens: 1500}, "  cost:     $0.0123, 1500 tokens\n"},
		{StatusResult{Tokens: 1500, UnpricedAttempts: 3}, "  cost:     unknown (3 attempts reporting none), 1500 tokens\n"},
		{StatusResult{CostUSD: new(float64)}, "  cost:     $0.0000, 0 tokens\n"},
	} {
		c.res.RunID, c.res.Status, c.res.CreatedAt, c.res.EndedAt = "r-1", stratus.RunDone, t0, t0.Add(time.Minute)
		var out bytes.Buffer
		printStatus(IO{Out: &out}, c.res)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("status lacks %q:\n%s", c.want, out.String())
		}
	}
}
