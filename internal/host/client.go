package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/statedir"
)

// Client reaches the host of one work dir over its socket.
type Client struct {
	dir string
	hc  *http.Client
}

// Dial returns a client of dir's host, or ENOTFOUND when none answers.
// The socket's directory, the socket and the process answering on it must
// all be this user's (docs/security.md § The host socket): EFORBIDDEN
// otherwise, naming what was refused; nothing is sent to such a host.
func Dial(dir string) (*Client, error) {
	path := SocketPath(dir)
	if err := checkSocketDir(filepath.Dir(path)); stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "no host serves %s (no %s)", dir, filepath.Dir(path))
	} else if err != nil {
		return nil, err
	}
	if err := checkSocketFile(path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := dialHost(ctx, path)
	if stratus.ErrorCode(err) == stratus.EFORBIDDEN {
		return nil, err
	} else if err != nil {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "no host serves %s (%v)", dir, err)
	}
	c.Close()
	return &Client{dir: dir, hc: &http.Client{Transport: &http.Transport{
		// Every connection is checked: the host that answered Dial may
		// have gone, and its socket been taken since.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dialHost(ctx, path) },
	}}}, nil
}

// LogName is the host's own log, in DIR/.stratus/.
const LogName = "host.log"

// Ensure returns a client of dir's host, starting one when none answers:
// `self host --dir DIR --idle IDLE` in a session of its own (no terminal
// reaches it), its output appended to DIR/.stratus/host.log, waiting at
// most wait for its socket. Two callers racing both start one; the second
// host finds the first's socket and exits, and both callers reach the
// first.
func Ensure(dir, self string, idle, wait time.Duration) (*Client, error) {
	if c, err := Dial(dir); err == nil || stratus.ErrorCode(err) == stratus.EFORBIDDEN {
		return c, err
	}
	logPath := filepath.Join(dir, orchestrator.StateDir, LogName)
	if err := statedir.Secure(filepath.Dir(logPath)); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, statedir.FilePerm)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "host", "--dir", dir, "--idle", idle.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the host: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(wait)
	for {
		if c, err := Dial(dir); err == nil || stratus.ErrorCode(err) == stratus.EFORBIDDEN {
			return c, err
		}
		select {
		case err := <-exited:
			if c, derr := Dial(dir); derr == nil {
				return c, nil // another host won the race
			}
			return nil, fmt.Errorf("the host of %s ended (%v) before it served; see %s", dir, err, logPath)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the host of %s (pid %d) did not serve within %s; see %s", dir, cmd.Process.Pid, wait, logPath)
		}
	}
}

// Start hands a run to the host: it returns once the run is recorded, or
// with the error `stratus run` would have given (a *stratus.Error with its
// code: EINVALID for a bad task or flow, …).
func (c *Client) Start(ctx context.Context, req StartRequest) (string, error) {
	var out struct {
		RunID string `json:"run_id"`
	}
	if err := c.call(ctx, "POST", "/v1/runs", req, &out); err != nil {
		return "", err
	}
	return out.RunID, nil
}

// Resume hands a stopped run's resume to the host: it returns once the
// resume is recorded, or with the error `stratus resume` would have given.
func (c *Client) Resume(ctx context.Context, runID string, req ResumeRequest) error {
	var out struct {
		RunID string `json:"run_id"`
	}
	return c.call(ctx, "POST", "/v1/runs/"+runID+"/resume", req, &out)
}

// Cancel stops a run under way in the host and returns its end (its
// status); ENOTFOUND when the host does not have it.
func (c *Client) Cancel(ctx context.Context, runID string) (string, error) {
	var out struct {
		Status string `json:"status"`
	}
	err := c.call(ctx, "POST", "/v1/runs/"+runID+"/cancel", nil, &out)
	return out.Status, err
}

// Runs returns the host's process id and the ids of the runs under way
// in it.
func (c *Client) Runs(ctx context.Context) (pid int, runs []string, err error) {
	var out struct {
		PID  int      `json:"pid"`
		Runs []string `json:"runs"`
	}
	err = c.call(ctx, "GET", "/v1/runs", nil, &out)
	return out.PID, out.Runs, err
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://host"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("the host of %s: %w", c.dir, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct {
			Error stratus.Error `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("the host of %s: %s %s", c.dir, resp.Status, b)
		}
		return &e.Error
	}
	return json.Unmarshal(b, out)
}
