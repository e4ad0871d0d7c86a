package stratus

import (
	"testing"
	"time"
)

// README § Durable runs: a run's duration is the sum of its active spans,
// each from a start or resume to its stop (to now while it runs), never
// the idle time between a stop and a resume.
func TestRun_DurationIsTheSumOfItsActiveSpans(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	now := t0.Add(50 * time.Hour)
	for _, c := range []struct {
		name string
		run  Run
		want time.Duration
	}{
		{"running, never resumed", Run{CreatedAt: t0}, 50 * time.Hour},
		{"ended, never resumed", Run{CreatedAt: t0, EndedAt: t0.Add(5 * time.Minute)}, 5 * time.Minute},
		{"resumed two days later, ended", Run{CreatedAt: t0, ActiveMS: 300_000, ResumedAt: t0.Add(48 * time.Hour), EndedAt: t0.Add(48*time.Hour + 2*time.Minute)}, 7 * time.Minute},
		{"resumed, running", Run{CreatedAt: t0, ActiveMS: 300_000, ResumedAt: now.Add(-time.Minute)}, 6 * time.Minute},
	} {
		if got := c.run.Duration(now); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// Resumed folds the span that stopped into ActiveMS.
	r := Run{CreatedAt: t0, EndedAt: t0.Add(5 * time.Minute)}
	r.Resumed(t0.Add(48 * time.Hour))
	r.EndedAt = r.ResumedAt.Add(2 * time.Minute)
	r.Resumed(r.EndedAt.Add(24 * time.Hour))
	r.EndedAt = r.ResumedAt.Add(time.Minute)
	if got := r.Duration(now); got != 8*time.Minute {
		t.Errorf("three spans of 5m, 2m and 1m: %s, want 8m0s", got)
	}
}
