package lifecycle

import "testing"

// README § Cost and token caps: one rule for the cost runs, status and the
// viewer show — a figure when every attempt that used tokens reported its
// cost ($0.0000 when none called a provider), unknown when attempts used
// tokens and none reported one, a lower bound with the unpriced counted
// when some did.
func TestSpend_CostText_OneRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sp   Spend
		want string
	}{
		{Spend{}, "$0.0000"},
		{Spend{CostUSD: 0.0123, Tokens: 900}, "$0.0123"},
		{Spend{Tokens: 900, Unpriced: 2}, "unknown (2 attempts reporting none)"},
		{Spend{CostUSD: 0.5, Tokens: 900, Unpriced: 1}, "$0.5000 + 1 unpriced"},
	} {
		if got := c.sp.CostText(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.sp, got, c.want)
		}
	}
}
