package runner

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// A runner stopped before its result says what stopped it — the cause
// its context was cancelled with — never a bare "context canceled"; a
// stop still reads as context.Canceled to a caller that asks.
func TestStopped_SaysWhatStoppedTheRunner(t *testing.T) {
	t.Parallel()
	withCause := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"the run's end", withCause(errors.New("the run ended: its execution ended FAILED")), "stopped before its result: the run ended: its execution ended FAILED"},
		{"the step gone", withCause(errStepGone), "stopped before its result: the step is gone"},
		{"no cause", plain, "stopped before its result: its runner was stopped (no reason was given)"},
	} {
		err := stopped(c.ctx)
		if !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %q (is Canceled: %v); want it to open %q", c.name, err, errors.Is(err, context.Canceled), c.want)
		}
	}
}

// SIGTERM, as a launcher stops a runner process: the signal is named
// (os/signal.NotifyContext's cause), with what sends one.
func TestStopped_ASignalIsNamed(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGUSR1)
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	<-ctx.Done()
	if err := stopped(ctx).Error(); !strings.Contains(err, "the runner was told to stop (user defined signal 1 signal received)") {
		t.Errorf("%q", err)
	}
}
