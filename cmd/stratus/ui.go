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
	// Remote allows a non-loopback Addr; the viewer is then read-only.
	Remote bool
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
answer forms (embedded runs; on AWS the viewer is read-only). The pages work
without JavaScript.

It listens on loopback only. A non-loopback --addr (0.0.0.0:7777) needs
--remote, and the viewer is then read-only: anyone who can reach it reads every
run's prompts and outputs, and nobody answers a gate through it. To answer gates
from another machine, tunnel instead: ssh -L 7777:127.0.0.1:7777 HOST.

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
	cmd.Flags().StringVar(&o.Addr, "addr", DefaultUIAddr, "host:port to listen on (loopback, unless --remote)")
	cmd.Flags().BoolVar(&o.Remote, "remote", false, "allow a non-loopback --addr; the viewer is then read-only (no gate forms)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runUI(ctx context.Context, o *UIOptions) error {
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return usageError{fmt.Errorf("--addr %q: want host:port such as %s", o.Addr, DefaultUIAddr)}
	}
	if !webui.Loopback(o.Addr) && !o.Remote {
		return usageError{fmt.Errorf("--addr %q is not a loopback address: anyone who can reach it would read every run and answer its gates; "+
			"give --remote to serve it read-only, or keep the default and tunnel (ssh -L 7777:127.0.0.1:7777 HOST)", o.Addr)}
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
		src = webui.Source{Target: "embedded " + dir, Store: st, Sink: fs.New(dir).Private(orchestrator.StateDir), ShellReplies: true, ReplyFlags: orchestrator.DirFlag(dir),
			Env: runenv.EnvFunc(fs.New(filepath.Join(dir, orchestrator.StateDir))),
			Reply: func(ctx context.Context, runID, node string, r worker.Reply) (*worker.HITLValue, error) {
				return orchestrator.Reply(ctx, dir, runID, node, r, runProcessAlive)
			}}
	}
	if !webui.Loopback(o.Addr) {
		src.Reply = nil // read-only: no gate forms for whoever reaches it
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
	fmt.Fprintf(o.IO.Err, "stratus: run viewer at %s (%s); Ctrl-C stops it\n", viewerURL(ln.Addr().String()), src.Target)
	if !webui.Loopback(o.Addr) {
		fmt.Fprintf(o.IO.Err, "stratus: warning: listening on %s, not loopback: anyone who can reach it reads every run's prompts and outputs; it answers no gate\n", ln.Addr())
	}
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

// viewerURL is the URL to open for a viewer listening on addr: an
// unspecified host (0.0.0.0, [::]) is reached as localhost from here.
func viewerURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
