package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/webui"
	"github.com/stratusflow/stratus/internal/worker"
)

// UIOptions are the flags of `stratus ui`.
type UIOptions struct {
	IO     IO
	Dir    string
	Addr   string
	Target string
	AWS    AWSOptions
	// ready, when set (tests), gets the address the viewer listens on.
	ready func(addr string)
}

// DefaultUIAddr is where `stratus ui` listens unless told otherwise:
// loopback only.
const DefaultUIAddr = "127.0.0.1:7777"

func newUICmd(io IO) *cobra.Command {
	o := &UIOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "ui [--dir DIR | --target aws ...] [--addr 127.0.0.1:7777]",
		Short: "Serve the run viewer: runs, each run's graph and timeline, steps, gates",
		Long: `ui serves a web viewer of the runs made in DIR (or on a deployed stack with
--target aws) at http://ADDR: the runs, newest first and filtered by status;
each run's flow drawn as a graph coloured by its steps and updated live while
it runs, a timeline of its visits, its cost and summary; each step's rendered
prompt beside its outputs, its findings, attempts, degradations and runner log.
A node waiting for a human shows its upstream output and approve / reject /
answer forms (embedded runs; on AWS the viewer is read-only). It listens on
loopback unless --addr says otherwise; the pages work without JavaScript.

Exit status: 0 stopped (Ctrl-C), 1 the address is taken, 2 bad flags or DIR has
no .stratus/ (stratus install first; an installed DIR with no run yet starts
empty).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return runUI(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().StringVar(&o.Addr, "addr", DefaultUIAddr, "host:port to listen on")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runUI(ctx context.Context, o *UIOptions) error {
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return usageError{fmt.Errorf("--addr %q: want host:port such as %s", o.Addr, DefaultUIAddr)}
	}
	var src webui.Source
	if o.Target == TargetAWS {
		tg, err := o.AWS.open(awsContext())
		if err != nil {
			return usageOr(err)
		}
		src = webui.Source{Target: "aws " + tg.Sink.Bucket(), Store: tg.Store, Sink: tg.Sink, Env: runenv.EnvFunc(tg.Sink)}
	} else {
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return err
		}
		st, err := openRuns(dir)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			// Installed but no run yet: the viewer starts empty and shows
			// the first run as it starts.
			if _, serr := os.Stat(filepath.Join(dir, orchestrator.StateDir)); serr == nil {
				st, err = sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
			}
		}
		if err != nil {
			return err
		}
		defer st.Close()
		src = webui.Source{Target: "embedded " + dir, Store: st, Sink: fs.New(dir).Private(orchestrator.StateDir),
			Env: runenv.EnvFunc(fs.New(filepath.Join(dir, orchestrator.StateDir))),
			Reply: func(ctx context.Context, runID, node string, r worker.Reply) (*worker.HITLValue, error) {
				return orchestrator.Reply(ctx, dir, runID, node, r, runProcessAlive)
			}}
	}
	h, err := webui.New(src)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (another stratus ui? give --addr)", o.Addr, err)
	}
	h.AllowHosts(ln.Addr().String())
	srv := httpapi.NewServer(h)
	srv.WriteTimeout = 0 // event streams stay open
	fmt.Fprintf(o.IO.Err, "stratus: run viewer at http://%s (%s); Ctrl-C stops it\n", ln.Addr(), src.Target)
	if o.ready != nil {
		o.ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
