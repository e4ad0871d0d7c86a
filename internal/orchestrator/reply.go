package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/worker"
)

// ReplyError is a reply the run's API refused: its status and field.
type ReplyError struct {
	Status int
	Field  string
	Err    error
}

func (e *ReplyError) Error() string { return e.Err.Error() }
func (e *ReplyError) Unwrap() error { return e.Err }

// Reply answers node of a running embedded run for a human
// (README.md § A human gate, step by step): it finds the run's API in
// DIR/.stratus/runs/<run>.json, mints an operator token with
// DIR/.stratus/hmac.key and posts r to /v1/runs/<run>/nodes/<node>/hitl.
// alive says whether the run's process still lives. Errors: ReadRunAddress's
// (EINVALID for a bad run id, ENOTFOUND when the run is not running here);
// ECONFLICT when its process is gone or its API does not answer; *ReplyError
// for a refusal.
func Reply(ctx context.Context, dir, runID, node string, r worker.Reply, alive func(pid int) bool) (*worker.HITLValue, error) {
	state := filepath.Join(dir, StateDir)
	addr, err := ReadRunAddress(state, runID)
	if err != nil {
		return nil, err
	}
	if alive != nil && !alive(addr.PID) {
		return nil, stratus.Errorf(stratus.ECONFLICT, "run %s is not running: its process %d is gone (stale %s)", runID, addr.PID, filepath.Join(state, RunsDir, runID+".json"))
	}
	keyPath := filepath.Join(state, KeyFile)
	if _, err := os.Stat(keyPath); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "no HMAC key to mint an operator token with: %v", err)
	}
	key, err := captoken.LoadOrCreateKey(keyPath)
	if err != nil {
		return nil, err
	}
	tok, _, err := (&captoken.Minter{Key: key}).MintOperator(runID)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(r)
	target := strings.TrimSuffix(addr.APIURL, "/") + "/v1/runs/" + url.PathEscape(runID) + "/nodes/" + url.PathEscape(node) + "/hitl"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "run %s is not running: its API at %s does not answer (%v)", runID, addr.APIURL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return DecodeReply(resp.StatusCode, data, runID, node, r)
}

// DecodeReply reads the worker API's answer to reply r to node of run
// runID: status and body data. A 2xx is the step's value; anything else
// is a *ReplyError with the status and the field the API named, its
// message saying what was replied to and why it was refused — the JSON
// error shape's message, API Gateway's own {"message": …} (an
// IAM-authorised route it refused), or the body as sent.
func DecodeReply(status int, data []byte, runID, node string, r worker.Reply) (*worker.HITLValue, error) {
	if status/100 != 2 {
		var eb httpapi.ErrorBody
		msg := strings.TrimSpace(string(data))
		var gw struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(data, &eb) == nil && eb.Error.Message != "":
			msg = eb.Error.Message
			// The field leads unless the message already starts with what
			// it names ("node gate of run …", "run R is …").
			if f := eb.Error.Field; f != "" && !strings.HasPrefix(msg, strings.TrimSuffix(f, "_id")+" ") {
				msg = f + ": " + msg
			}
		case json.Unmarshal(data, &gw) == nil && gw.Message != "":
			msg = fmt.Sprintf("API Gateway refused the request (%d %s): %s", status, http.StatusText(status), gw.Message)
			if eb.Error.Code = stratus.EINTERNAL; status == http.StatusForbidden {
				eb.Error.Code = stratus.EFORBIDDEN
			}
		}
		return nil, &ReplyError{Status: status, Field: eb.Error.Field, Err: stratus.Errorf(eb.Error.Code, "%s %s of run %s: %s", r.Decision, node, runID, msg)}
	}
	var v worker.HITLValue
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("reply recorded, but the answer is unreadable: %v", err)
	}
	return &v, nil
}
