package lifecycle

import (
	"testing"

	"github.com/stratusflow/stratus/internal/config"
)

// worc configuration.md § agents.retry: a run is compiled with the
// config's retry policy, so the Retry of its worker states carries the
// config's numbers.
func TestCompileOptions_CarryTheConfigsRetryPolicy(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Agents.Retry.BaseDelayS = new(4.5)
	cfg.Agents.Retry.MaxAttempts = new(1)
	cfg.Agents.MaxStageAttempts = new(2)
	opt := CompileOptions(cfg)
	if opt.Retry == nil {
		t.Fatal("no retry policy")
	}
	if r := opt.Retry.TransientRetrier(); r.IntervalSeconds != 5 || r.MaxAttempts != 3 || r.MaxDelaySeconds != 30 {
		t.Errorf("transient Retrier %+v, want IntervalSeconds 5, MaxAttempts 2 × 2 − 1 = 3, MaxDelaySeconds 30", r)
	}
}
