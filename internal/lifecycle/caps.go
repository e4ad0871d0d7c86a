package lifecycle

import (
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/task"
)

// CapWarnFraction is the share of a cap at which the run says it is near
// (README.md § Cost and token caps: "a warning line at 80 %").
const CapWarnFraction = 0.8

// Caps returns the caps a new run gets: the task's front matter
// max_cost_usd and max_tokens where it sets them, else config.yaml's
// limits (0: no cap).
func Caps(cfg *config.Config, tk *task.Task) (maxCostUSD float64, maxTokens int64) {
	maxCostUSD, maxTokens = cfg.Limits.MaxCostUSD, cfg.Limits.MaxTokens
	taskCost, taskTokens := tk.Caps()
	if _, ok := tk.Front["max_cost_usd"]; ok {
		maxCostUSD = taskCost
	}
	if _, ok := tk.Front["max_tokens"]; ok {
		maxTokens = taskTokens
	}
	return maxCostUSD, maxTokens
}

// CapReached says why run may start no further step, having spent sp: its
// cost or token cap is reached ("cost cap reached: $X of $Y"); "" when
// neither is. Attempts of unknown cost (sp.Unpriced) are not counted in
// the cost, so a cost cap may be passed by what they cost: CapNotes says so.
func CapReached(run stratus.Run, sp Spend) string {
	switch {
	case run.MaxCostUSD > 0 && sp.CostUSD >= run.MaxCostUSD:
		return fmt.Sprintf("cost cap reached: $%.4f of $%.4f", sp.CostUSD, run.MaxCostUSD)
	case run.MaxTokens > 0 && sp.Tokens >= run.MaxTokens:
		return fmt.Sprintf("token cap reached: %d of %d tokens", sp.Tokens, run.MaxTokens)
	}
	return ""
}

// CapNote is one warning about a run's spend under its caps; Kind names
// what it warns of ("cost", "tokens", "unpriced"), so a caller can say
// each once per run.
type CapNote struct{ Kind, Text string }

// CapNotes are the warnings a run's spend calls for under its caps: a cap
// at CapWarnFraction or more, and, under a cost cap, attempts whose cost
// is unknown (never free: the cap cannot see them).
func CapNotes(run stratus.Run, sp Spend) []CapNote {
	var notes []CapNote
	if run.MaxCostUSD > 0 && sp.CostUSD >= CapWarnFraction*run.MaxCostUSD && sp.CostUSD < run.MaxCostUSD {
		notes = append(notes, CapNote{"cost", fmt.Sprintf("run %s has spent $%.4f of its $%.4f cost cap (%.0f%%)", run.ID, sp.CostUSD, run.MaxCostUSD, 100*sp.CostUSD/run.MaxCostUSD)})
	}
	if run.MaxTokens > 0 && float64(sp.Tokens) >= CapWarnFraction*float64(run.MaxTokens) && sp.Tokens < run.MaxTokens {
		notes = append(notes, CapNote{"tokens", fmt.Sprintf("run %s has spent %d of its %d token cap (%.0f%%)", run.ID, sp.Tokens, run.MaxTokens, 100*float64(sp.Tokens)/float64(run.MaxTokens))})
	}
	if run.MaxCostUSD > 0 && sp.Unpriced > 0 {
		notes = append(notes, CapNote{"unpriced", fmt.Sprintf("run %s: %d attempt(s) reported tokens but no cost; the cost cap of $%.4f counts only known costs", run.ID, sp.Unpriced, run.MaxCostUSD)})
	}
	return notes
}
