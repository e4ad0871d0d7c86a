package findings

import "testing"

func TestOutcome_FailsClosedAndGatesBySeverity(t *testing.T) {
	for _, c := range []struct {
		body, gate, want string
		gating           int
	}{
		{`{"findings":[]}`, "", "accept", 0},
		{`{"findings":[{"severity":"medium","what":"nit"}]}`, "", "accept", 0},
		{`{"findings":[{"severity":"medium","what":"nit"}]}`, "medium", "rework", 1},
		{`{"findings":[{"severity":"HIGH","what":"bug"},{"severity":"low","what":"x"}]}`, "high", "rework", 1},
		{`{"out":{"findings":[{"severity":"blocking"}]},"parts":["a.md"]}`, "", "rework", 1},
		{`{"findings":null}`, "", "invalid", 0},
		{`looks good to me`, "", "invalid", 0},
		{`{"findings":[{"severity":"urgent","what":"x"}]}`, "", "invalid", 0},
		{`{"findings":["x"]}`, "", "invalid", 0},
	} {
		got, reason, fs := Outcome([]byte(c.body), c.gate)
		if got != c.want {
			t.Errorf("%s gate %q: %s (%s), want %s", c.body, c.gate, got, reason, c.want)
		}
		n := 0
		for _, f := range fs {
			if f.Gating {
				n++
			}
		}
		if n != c.gating {
			t.Errorf("%s: %d gating, want %d", c.body, n, c.gating)
		}
	}
}
