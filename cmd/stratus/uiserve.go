//go:build !slim

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

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/webui"
	"github.com/stratusflow/stratus/internal/worker"
)

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
		var err error
		if src, err = o.AWS.uiSource(awsContext()); err != nil {
			return usageOr(err)
		}
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
