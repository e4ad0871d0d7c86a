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

// hitlExitHelp is the exit-status paragraph of approve, reject and answer:
// one mapping, which runHITL implements.
const hitlExitHelp = `Exit status:
  0  the reply was recorded and the run goes on
  1  the run is not running or cannot be reached: no DIR/.stratus/runs/RUN.json,
     its process is gone, its API does not answer, or the run has ended (or the
     reply failed for a reason of the run's own)
  2  bad input, or NODE does not wait for this reply: an unknown node, a node that
     never asks a human, one that has not asked yet or was already answered, the
     wrong command for what it asks (approve/reject an approval, answer a
     question), an empty answer, a rejection without --reason`

// runHITL replies for a human to a run that waits for one (issue 5 § 4):
// it finds the running run's API in DIR/.stratus/runs/<run>.json, mints an
// operator token with DIR/.stratus/hmac.key and posts the reply to
// /v1/runs/<run>/nodes/<node>/hitl. Exit statuses as hitlExitHelp says: 1
// when the run cannot take a reply at all, 2 when this reply is wrong for
// the node (hitlExit).
func runHITL(o *HITLOptions) error {
	switch {
	case o.Decision == worker.DecisionReject && strings.TrimSpace(o.Text) == "":
		return &exitError{code: ExitUsage, err: fmt.Errorf("reject %s of run %s: a rejection needs its reason: stratus reject %s %s --reason TEXT", o.Node, o.RunID, o.RunID, o.Node)}
	case o.Decision == worker.DecisionAnswer && strings.TrimSpace(o.Text) == "":
		return &exitError{code: ExitUsage, err: fmt.Errorf("answer %s of run %s: the answer is empty; valid: any non-empty text", o.Node, o.RunID)}
	}
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
		return &exitError{code: hitlExit(resp.StatusCode, eb.Error.Field), err: fmt.Errorf("%s %s of run %s: %s", o.Decision, o.Node, o.RunID, msg)}
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

// hitlExit maps the API's refusal of a reply to the exit status
// hitlExitHelp documents (worker.Service.Human says which field is wrong):
// a reply the request does not take (400, 422) or a node that does not
// wait for it (404 or 409 on field node) is 2; anything about the run (404
// or 409 on run_id: no such run, the run has ended) or the server is 1.
func hitlExit(status int, field string) int {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return ExitUsage
	case (status == http.StatusNotFound || status == http.StatusConflict) && field == "node":
		return ExitUsage
	}
	return ExitFailed
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
