package lifecycle

import (
	"context"
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/store"
)

// Spend is what a run has spent so far, summed over every attempt of every
// step (supervisor turns included) from the usage its runner relayed
// (docs/contracts.md § The event stream; relayed on every terminal,
// § Terminal classification).
type Spend struct {
	CostUSD float64 `json:"cost_usd"` // the attempts whose cost is known
	Tokens  int64   `json:"tokens"`   // prompt + completion
	// Unpriced counts the attempts that used a provider (tokens reported)
	// without a cost: their cost is unknown, never free
	// (docs/contracts.md § What observe.mode costs), and CostUSD leaves it
	// out.
	Unpriced int `json:"unpriced_attempts,omitempty"`
}

// CostKnown reports whether the run's cost can be given as a figure: not
// when no attempt reported a cost and some used a provider without one
// (Unpriced > 0, CostUSD 0). Such a cost is unknown, never $0
// (docs/contracts.md § What observe.mode costs): `stratus runs`, `status --json` and the viewer all say so. With
// Unpriced > 0 and some cost known, CostUSD is a lower bound.
func (sp Spend) CostKnown() bool { return sp.Unpriced == 0 || sp.CostUSD != 0 }

// Cost is CostUSD, or nil when it is not known (CostKnown): what the
// --json outputs print as cost_usd (null for unknown).
func (sp Spend) Cost() *float64 {
	if !sp.CostKnown() {
		return nil
	}
	c := sp.CostUSD
	return &c
}

// CostText is the cost as `runs`, `status` and the viewer say it
// (README § Cost and token caps), one rule for all three: "$0.0123" when
// every attempt that used tokens reported its cost ("$0.0000" when none
// called a provider); "unknown (N attempts reporting none)" when some used
// tokens and none reported a cost; "$0.0123 + N unpriced" when some did
// and some did not, the figure then a lower bound.
func (sp Spend) CostText() string {
	switch {
	case !sp.CostKnown():
		return fmt.Sprintf("unknown (%s reporting none)", english.Plural(sp.Unpriced, "attempt"))
	case sp.Unpriced > 0:
		return fmt.Sprintf("$%.4f + %d unpriced", sp.CostUSD, sp.Unpriced)
	}
	return fmt.Sprintf("$%.4f", sp.CostUSD)
}

// RunSpend reads run runID's spend from the store: its running totals,
// one read (store.Store.RunTotals), or for a run that keeps none (created
// before they were kept) its steps and every attempt of each, as the
// totals sum them (a run the store does not have is scanned too: it has
// no attempts, and spends nothing). Errors: the store's.
func RunSpend(ctx context.Context, st store.Store, runID string) (Spend, error) {
	t, kept, err := st.RunTotals(ctx, runID)
	if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return Spend{}, err
	} else if err == nil && kept {
		return Spend{CostUSD: t.CostUSD, Tokens: t.Tokens, Unpriced: int(t.Unpriced)}, nil
	}
	return ScanSpend(ctx, st, runID)
}

// ScanSpend is RunSpend summed from the store's attempts: every step of
// the run, and every attempt numbered 1 to the latest of each. It reads
// the whole run; RunSpend reads the totals the store keeps instead.
func ScanSpend(ctx context.Context, st store.Store, runID string) (Spend, error) {
	var sp Spend
	steps, err := st.ListSteps(ctx, runID)
	if err != nil {
		return sp, err
	}
	for _, s := range steps {
		last, err := st.LatestAttempt(ctx, s.TID)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue // a step no worker ran
		} else if err != nil {
			return sp, err
		}
		for n := 1; n <= last.N; n++ {
			a := last
			if n < last.N {
				if a, err = st.GetAttempt(ctx, s.TID, n); stratus.ErrorCode(err) == stratus.ENOTFOUND {
					continue
				} else if err != nil {
					return sp, err
				}
			}
			sp.add(a)
		}
	}
	return sp, nil
}

func (sp *Spend) add(a stratus.Attempt) {
	sp.Tokens += a.PromptTokens + a.CompletionTokens
	switch {
	case a.CostUSD != nil:
		sp.CostUSD += *a.CostUSD
	case a.PromptTokens > 0 || a.CompletionTokens > 0:
		sp.Unpriced++
	}
}
