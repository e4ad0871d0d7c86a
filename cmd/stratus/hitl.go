package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/worker"
)

// HITLOptions are what `stratus approve`, `reject` and `answer` share: the
// run and node a human replies to, and the reply.
type HITLOptions struct {
	IO       IO
	Dir      string
	RunID    string
	Node     string
	Decision string // worker.DecisionApprove, DecisionReject or DecisionAnswer
	Text     string // the answer, or the rejection's reason
	JSON     bool
}

// runHITL replies for a human to a run that waits for one (issue 5 § 4):
// it finds the running run's API in DIR/.stratus/runs/<run>.json, mints an
// operator token with DIR/.stratus/hmac.key and posts the reply to
// /v1/runs/<run>/nodes/<node>/hitl. A run that is not running is an error
// (exit 1); a reply the request does not take is a usage error (exit 2).
func runHITL(o *HITLOptions) error {
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	addr, err := orchestrator.ReadRunAddress(state, o.RunID)
	switch stratus.ErrorCode(err) {
	case "":
	case stratus.EINVALID:
		return &exitError{code: ExitUsage, err: err}
	default:
		return &exitError{code: ExitFailed, err: err}
	}
	if !runProcessAlive(addr.PID) {
		return &exitError{code: ExitFailed, err: fmt.Errorf("run %s is not running: its process %d is gone (stale %s)",
			o.RunID, addr.PID, filepath.Join(state, orchestrator.RunsDir, o.RunID+".json"))}
	}
	keyPath := filepath.Join(state, orchestrator.KeyFile)
	if _, err := os.Stat(keyPath); err != nil {
		return &exitError{code: ExitFailed, err: fmt.Errorf("no HMAC key to mint an operator token with: %w", err)}
	}
	key, err := captoken.LoadOrCreateKey(keyPath)
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	tok, _, err := (&captoken.Minter{Key: key}).MintOperator(o.RunID)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(worker.Reply{Decision: o.Decision, Text: o.Text})
	target := strings.TrimSuffix(addr.APIURL, "/") + "/v1/runs/" + url.PathEscape(o.RunID) + "/nodes/" + url.PathEscape(o.Node) + "/hitl"
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return &exitError{code: ExitFailed, err: fmt.Errorf("run %s is not running: its API at %s does not answer (%v)", o.RunID, addr.APIURL, err)}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var eb httpapi.ErrorBody
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
			msg = eb.Error.Message
			if eb.Error.Field != "" {
				msg = eb.Error.Field + ": " + msg
			}
		}
		code := ExitFailed
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity {
			code = ExitUsage
		}
		return &exitError{code: code, err: fmt.Errorf("%s %s of run %s: %s", o.Decision, o.Node, o.RunID, msg)}
	}
	var v worker.HITLValue
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("reply recorded, but the answer is unreadable: %v", err)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintf(o.IO.Out, "run %s: %s → %s\n", o.RunID, v.StepRef, v.Outcome)
	return nil
}

// runProcessAlive reports whether process pid still runs (on Windows, where
// signal 0 is not available, it is assumed to: the API call then tells).
func runProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if runtime.GOOS == "windows" {
		return true
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, os.ErrPermission)
}
