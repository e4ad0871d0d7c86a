package stats

import (
	"errors"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// A body with several bad counters is refused naming the same field every
// time: the first in the body's order, not one of a map's random order.
func TestCheck_NamesTheFirstBadCounterEveryTime(t *testing.T) {
	t.Parallel()
	p, c := int64(-1), int64(-2)
	for range 50 {
		err := check(core.Stats{PromptTokens: &p, CompletionTokens: &c})
		var e *stratus.Error
		if !errors.As(err, &e) || e.Field != "prompt_tokens" {
			t.Fatalf("check answered %v; want a refusal naming prompt_tokens, the first bad counter", err)
		}
	}
}
