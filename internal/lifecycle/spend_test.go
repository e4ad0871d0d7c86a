package lifecycle

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// scanCounter counts the reads of a run's steps and attempts; untracked
// makes the store's RunTotals say the run keeps no totals (a run created
// before they were kept).
type scanCounter struct {
	store.Store
	untracked bool
	scans     int
}

func (c *scanCounter) ListSteps(ctx context.Context, runID string) ([]stratus.Step, error) {
	c.scans++
	return c.Store.ListSteps(ctx, runID)
}

func (c *scanCounter) LatestAttempt(ctx context.Context, tid string) (stratus.Attempt, error) {
	c.scans++
	return c.Store.LatestAttempt(ctx, tid)
}

func (c *scanCounter) GetAttempt(ctx context.Context, tid string, n int) (stratus.Attempt, error) {
	c.scans++
	return c.Store.GetAttempt(ctx, tid, n)
}

func (c *scanCounter) RunTotals(ctx context.Context, runID string) (store.Totals, bool, error) {
	if c.untracked {
		return store.Totals{}, false, nil
	}
	return c.Store.RunTotals(ctx, runID)
}

// README § Cost and token caps are checked on every dispatch: RunSpend
// reads the run's totals, never its steps and attempts, unless the run
// keeps none; either way it says what the attempts spent.
func TestRunSpend_ReadsTotalsNotSteps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateRun(ctx, stratus.Run{ID: "r", Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	cost := 0.25
	for i, node := range []string{"plan", "impl", "review"} {
		tid := "r." + node + ".1"
		if _, _, err := st.CreateStep(ctx, stratus.Step{TID: tid, RunID: "r", Node: node, Visit: 1, Status: stratus.StepRunning}); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 2; n++ {
			a := stratus.Attempt{TID: tid, N: n, PromptTokens: int64(100 * (i + 1)), CompletionTokens: 5}
			if n == 2 {
				a.CostUSD = &cost
			}
			if err := st.CreateAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := Spend{CostUSD: 0.75, Tokens: 2 * (600 + 15), Unpriced: 3}

	c := &scanCounter{Store: st}
	if sp, err := RunSpend(ctx, c, "r"); err != nil || sp != want {
		t.Errorf("RunSpend = %+v, %v; want %+v", sp, err, want)
	}
	if c.scans != 0 {
		t.Errorf("RunSpend of a run with totals read steps or attempts %d times; want none", c.scans)
	}

	c = &scanCounter{Store: st, untracked: true}
	if sp, err := RunSpend(ctx, c, "r"); err != nil || sp != want {
		t.Errorf("RunSpend of a run without totals = %+v, %v; want %+v", sp, err, want)
	}
	if c.scans == 0 {
		t.Error("RunSpend of a run without totals read no steps; want the scan")
	}
	if sp, err := RunSpend(ctx, st, "no-such-run"); err != nil || sp != (Spend{}) {
		t.Errorf("RunSpend of an unknown run = %+v, %v; want nothing spent", sp, err)
	}
}
