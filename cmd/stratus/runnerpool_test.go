//go:build !slim

package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stratusflow/stratus/internal/runner"
)

// README § Exit status: `stratus runner pool` exits 5 once a report could
// not be delivered (kept in a spool file the error names, the pool
// stopped), as `stratus runner` does; 2 for a setup it cannot run with.
func TestRunnerPool_ExitsFiveWhenAReportWasSpooled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("stopped taking steps: r1.plan.1's %w to /w/stratus-spool-r1.plan.1-1.report: connection refused", runner.ErrSpooled), ExitSpooled},
		{fmt.Errorf("%w: the work root /x cannot hold a step's directory", runner.ErrPoolSetup), ExitUsage},
		{errors.New("receive from the pool's queue: the queue does not exist"), ExitFailed},
	} {
		got, report := exitStatus(poolExit(c.err))
		if got != c.want || report == nil || report.Error() != c.err.Error() {
			t.Errorf("%v: exit %d, reported %v; want %d and the error said", c.err, got, report, c.want)
		}
	}
	if poolExit(nil) != nil {
		t.Error("a pool stopped by its signal exits 0")
	}
}
