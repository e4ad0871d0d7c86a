package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// ParentPoll is how often WatchParent looks at the runner's parent: a
// runner outlives the process that owns its run by at most this (plus its
// engine's cancel grace).
const ParentPoll = 500 * time.Millisecond

// WatchParent returns a context cancelled once this process's parent is no
// longer pid (the owner of the run died and the runner was re-parented),
// checked every poll; cancelling it stops the engine as SIGTERM would
// (killing the process that owns a run ends its runners and engines). It
// says so on log.
func WatchParent(ctx context.Context, pid int, poll time.Duration, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			if os.Getppid() != pid {
				why := fmt.Errorf("the process that owns this run (pid %d) is gone: the run was interrupted", pid)
				log.Warn(why.Error() + "; stopping")
				cancel(why)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}
