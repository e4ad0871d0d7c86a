package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/host"
	"github.com/stratusflow/stratus/internal/logging"
)

// HostOptions are the flags of `stratus host`.
type HostOptions struct {
	IO   IO
	Dir  string
	Idle time.Duration
	Self string // the stratus binary runs use ("" = this one)
}

// DefaultHostIdle is how long a host started by `run --detach` stays up
// with no run under way.
const DefaultHostIdle = 30 * time.Second

func newHostCmd(io IO) *cobra.Command {
	o := &HostOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "host [--dir DIR] [--idle 30s]",
		Short: "Host the detached runs of a work dir in one process",
		Long: `host runs the embedded runs that ` + "`stratus run --detach`" + ` hands it, many at
once, in one process: they share its store, its engine slots
(worker.max_concurrent_engines: engines beyond it wait their turn, first come
first served) and its reaper. ` + "`run --detach`" + ` starts a host when none serves the
work dir, so you seldom start one yourself.

The host listens on DIR/.stratus/host/host.sock (its directory yours alone,
mode 0700; in $XDG_RUNTIME_DIR or in a directory of yours in the temporary
directory when that path is too long for a Unix socket), answers no process
of another user, writes each run's lines to DIR/.stratus/runs/<run_id>/run.log,
and ends once it has had no run under way for --idle (0: never). SIGTERM or Ctrl-C interrupts the runs under
way (each is recorded interrupted; ` + "`stratus resume`" + ` goes on) and ends it;
` + "`stratus cancel RUN`" + ` stops one run and leaves the others running.

Exit status: 0 ended, 1 failed, 2 bad flags or another host already serves DIR.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Idle < 0 {
				return usageError{fmt.Errorf("--idle %s: want a duration >= 0", o.Idle)}
			}
			return runHost(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().DurationVar(&o.Idle, "idle", DefaultHostIdle, "end after this long with no run under way (0: never)")
	return cmd
}

func runHost(o *HostOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	self, err := selfOr(o.Self)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &host.Host{Dir: dir, Self: self, Idle: o.Idle, Log: logging.New(o.IO.Err, "host")}
	return usageOr(h.Serve(ctx))
}
