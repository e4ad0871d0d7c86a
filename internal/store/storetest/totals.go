package storetest

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

// scanTotals sums run runID's usage as lifecycle.RunSpend's scan does:
// every step of the run, and every attempt numbered 1 to its latest.
func (b *bundle) scanTotals(t *testing.T, runID string) store.Totals {
	t.Helper()
	steps, err := b.s.ListSteps(b.ctx, runID)
	if err != nil {
		t.Fatalf("ListSteps(%q): %v", runID, err)
	}
	var sum store.Totals
	for _, st := range steps {
		last, err := b.s.LatestAttempt(b.ctx, st.TID)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue
		} else if err != nil {
			t.Fatalf("LatestAttempt(%q): %v", st.TID, err)
		}
		for n := 1; n <= last.N; n++ {
			a, err := b.s.GetAttempt(b.ctx, st.TID, n)
			if stratus.ErrorCode(err) == stratus.ENOTFOUND {
				continue
			} else if err != nil {
				t.Fatalf("GetAttempt(%q, %d): %v", st.TID, n, err)
			}
			u := store.AttemptUsage(a)
			sum = store.Totals{CostUSD: sum.CostUSD + u.CostUSD, Tokens: sum.Tokens + u.Tokens, Unpriced: sum.Unpriced + u.Unpriced}
		}
	}
	return sum
}

// checkTotals fails the test unless RunTotals of runID is kept and equals
// the scan of its attempts (the cost within 1e-9 USD: the totals add the
// changes in another order than the scan adds the attempts).
func (b *bundle) checkTotals(t *testing.T, when, runID string) store.Totals {
	t.Helper()
	got, kept, err := b.s.RunTotals(b.ctx, runID)
	if err != nil || !kept {
		t.Fatalf("%s: RunTotals(%q) = kept %v, err %v; want kept", when, runID, kept, err)
	}
	want := b.scanTotals(t, runID)
	if got.Tokens != want.Tokens || got.Unpriced != want.Unpriced || math.Abs(got.CostUSD-want.CostUSD) > 1e-9 {
		t.Errorf("%s: RunTotals(%q) = %+v; the scan of its attempts sums %+v", when, runID, got, want)
	}
	return got
}

func (su *suite) testTotals(t *testing.T) {
	t.Parallel()

	final := func(a stratus.Attempt) stratus.OutputEvent {
		return stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputFinal, Body: []byte("done"), OK: true, At: base}
	}

	// store.Store.RunTotals: every write that changes an attempt's usage
	// moves its run's totals, so they equal the sum over its attempts
	// after any sequence of writes.
	t.Run("RunTotals_EqualsTheScan", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		if got := b.checkTotals(t, "new run", r.ID); got != (store.Totals{}) {
			t.Errorf("RunTotals of a new run = %+v; want zero", got)
		}
		other := b.createRun(t)
		ost := b.createStep(t, b.step(other.ID, "impl", 1))
		b.createAttempt(t, b.attempt(ost.TID, 1))

		st1 := b.createStep(t, b.step(r.ID, "impl", 1))
		st2 := b.createStep(t, b.step(r.ID, "review", 1))
		b.checkTotals(t, "steps without attempts", r.ID)

		a1 := b.createAttempt(t, b.attempt(st1.TID, 1)) // priced, 2^40+7 tokens
		b.checkTotals(t, "a priced attempt", r.ID)

		a1.PromptTokens, a1.CompletionTokens, a1.CostUSD = 1200, 300, nil
		if err := b.s.UpdateAttempt(b.ctx, a1); err != nil {
			t.Fatalf("UpdateAttempt: %v", err)
		}
		if got := b.checkTotals(t, "the attempt updated to unpriced", r.ID); got.Unpriced != 1 || got.Tokens != 1500 {
			t.Errorf("RunTotals = %+v; want 1 unpriced, 1500 tokens", got)
		}
		a1.PromptTokens, a1.CompletionTokens, a1.CostUSD = 2000, 500, ptr(0.25)
		if err := b.s.UpdateAttempt(b.ctx, a1); err != nil {
			t.Fatalf("UpdateAttempt: %v", err)
		}
		b.checkTotals(t, "the attempt updated a second time, priced", r.ID)

		// A new attempt of the step: the sum counts both.
		a2 := b.attempt(st1.TID, 2)
		a2.PromptTokens, a2.CompletionTokens, a2.CostUSD = 0, 0, nil
		b.createAttempt(t, a2)
		b.checkTotals(t, "a second attempt without usage", r.ID)
		a2.PromptTokens, a2.CompletionTokens, a2.CostUSD = 10, 5, ptr(0.125)
		a2.Status, a2.Terminal, a2.EndedAt = stratus.AttemptSubmitted, "Captured", base
		st1.Status, st1.EndedAt = stratus.StepCompleted, base
		if _, err := b.s.CompleteAttempt(b.ctx, final(a2), a2, st1); err != nil {
			t.Fatalf("CompleteAttempt: %v", err)
		}
		if got := b.checkTotals(t, "the second attempt completed", r.ID); got.Tokens != 2515 || got.Unpriced != 0 || math.Abs(got.CostUSD-0.375) > 1e-9 {
			t.Errorf("RunTotals = %+v; want 2515 tokens, $0.375, none unpriced", got)
		}

		// A failed CompleteAttempt (a second Final) changes nothing.
		a2.PromptTokens = 99999
		if _, err := b.s.CompleteAttempt(b.ctx, final(a2), a2, st1); stratus.ErrorCode(err) != stratus.ECONFLICT {
			t.Fatalf("second CompleteAttempt: %v; want ECONFLICT", err)
		}
		b.checkTotals(t, "a refused CompleteAttempt", r.ID)

		// An unpriced attempt of another step, an attempt 0 the scan
		// never reads, and one with no tokens and no cost (neither priced
		// nor unpriced).
		a3 := b.attempt(st2.TID, 1)
		a3.CostUSD = nil
		b.createAttempt(t, a3)
		zero := b.attempt(st2.TID, 0)
		b.createAttempt(t, zero)
		none := b.attempt(st2.TID, 2)
		none.PromptTokens, none.CompletionTokens, none.CostUSD = 0, 0, nil
		b.createAttempt(t, none)
		if got := b.checkTotals(t, "an unpriced attempt, an attempt 0, an attempt without usage", r.ID); got.Unpriced != 1 {
			t.Errorf("RunTotals = %+v; want 1 unpriced", got)
		}

		// Refused writes change nothing.
		if err := b.s.CreateAttempt(b.ctx, a3); stratus.ErrorCode(err) != stratus.ECONFLICT {
			t.Fatalf("CreateAttempt of an existing attempt: %v; want ECONFLICT", err)
		}
		missing := b.attempt(st2.TID, 9)
		if err := b.s.UpdateAttempt(b.ctx, missing); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Fatalf("UpdateAttempt of a missing attempt: %v; want ENOTFOUND", err)
		}
		b.checkTotals(t, "refused writes", r.ID)
		b.checkTotals(t, "the other run", other.ID)

		// Pruning removes the attempts, and what the totals summed.
		r.Status, r.EndedAt = stratus.RunDone, base.Add(time.Hour)
		if err := b.s.UpdateRun(b.ctx, r); err != nil {
			t.Fatalf("UpdateRun: %v", err)
		}
		if err := b.s.PruneRun(b.ctx, r.ID, base.Add(48*time.Hour)); err != nil {
			t.Fatalf("PruneRun: %v", err)
		}
		if got := b.checkTotals(t, "pruned", r.ID); got != (store.Totals{}) {
			t.Errorf("RunTotals of a pruned run = %+v; want zero", got)
		}
	})

	// Writers racing on one run's attempts (other goroutines here; other
	// Lambda instances on one table) never lose a change of the totals.
	t.Run("RunTotals_ConcurrentWriters", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		st := b.createStep(t, b.step(r.ID, "impl", 1))
		shared := b.createAttempt(t, b.attempt(st.TID, 1))
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 4 {
			wg.Go(func() {
				for j := range 3 {
					a := shared
					a.PromptTokens, a.CompletionTokens = int64(100*i+j), int64(i)
					if (i+j)%2 == 0 {
						a.CostUSD = nil
					} else {
						a.CostUSD = ptr(float64(i+j) / 8)
					}
					if err := b.s.UpdateAttempt(b.ctx, a); err != nil {
						errs <- fmt.Errorf("UpdateAttempt %d/%d: %w", i, j, err)
					}
				}
				a := b.attempt(st.TID, 2+i)
				a.PromptTokens = int64(1000 * (i + 1))
				if err := b.s.CreateAttempt(b.ctx, a); err != nil {
					errs <- fmt.Errorf("CreateAttempt %d: %w", 2+i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		b.checkTotals(t, "concurrent writers", r.ID)
	})

	t.Run("RunTotals_UnknownRun_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, _, err := b.s.RunTotals(b.ctx, b.key("run"))
		wantCode(t, "RunTotals of an unknown run", err, stratus.ENOTFOUND)
	})
}
