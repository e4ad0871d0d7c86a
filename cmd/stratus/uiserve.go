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
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/private"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/taskpool"
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
	secret, err := uiSecret(o.TokenFile)
	if err != nil {
		return err
	}
	var src webui.Source
	if o.Target == TargetAWS {
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
			},
			// The pool as `stratus tasks` lists it, read at each request
			// (the config too: a watcher's queue may change).
			Tasks: func(ctx context.Context) ([]taskpool.Listed, error) {
				cfg, pool, err := openPool(dir)
				if err != nil {
					return nil, err
				}
				return pool.Queued(ctx, cfg.Orchestrator.QueueName(), cfg.Orchestrator.MaxTasks(), st)
			}}
	}
	if !webui.Loopback(o.Addr) {
		src.Reply = nil // read-only: no gate forms for whoever reaches it
	}
	src.Secret = secret
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
	// The URL carries the secret (docs/security.md § The run viewer's
	// secret): it goes to this user's terminal only, never to a log.
	fmt.Fprintf(o.IO.Err, "stratus: run viewer at %s (%s); Ctrl-C stops it\n", h.LoginURL(viewerURL(ln.Addr().String())), src.Target)
	if !webui.Loopback(o.Addr) {
		fmt.Fprintf(o.IO.Err, "stratus: warning: listening on %s, not loopback: whoever has the URL reads every run's prompts and outputs, and the secret crosses the network in clear over http; it answers no gate\n", ln.Addr())
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

// maxTokenFileBytes bounds what --token-file reads: a secret is one line.
const maxTokenFileBytes = 4096

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

// uiSecret is the viewer's secret: read from path when given, else "" (New
// draws one). Errors (usage, exit 2, naming the file and the rule): a file
// that cannot be read, that is a symbolic link, that is not the user's
// own, that its group or others may read or write, in a directory that is
// neither the user's nor root's or that others may write
// (private.ReadFile, as ssh checks a key file), or whose secret is too
// short (docs/security.md § The run viewer's secret).
func uiSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := private.ReadFile("--token-file", path, maxTokenFileBytes)
	if err != nil {
		return "", usageError{err}
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < webui.MinSecretLen || strings.ContainsAny(secret, " \t\r\n") {
		return "", usageError{fmt.Errorf("--token-file %s holds %d characters; valid: one line of at least %d characters without spaces (openssl rand -hex 32 makes one)", path, len(secret), webui.MinSecretLen)}
	}
	return secret, nil
}
