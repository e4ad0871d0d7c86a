package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/stratusflow/stratus"
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
	Target   string
	AWS      AWSOptions
}

// hitlAskHelp says how RUN is named and where a waiting node's question
// is read.
const hitlAskHelp = runArgHelp + `
What NODE asks — a hitl node's question: (rendered with the run's
variables), or the request of an agent that asked — is in the run's wait line
("stratus: wait …"), in stratus status RUN and on the run's page in stratus ui.

`

// hitlAWSHelp says how a reply reaches a run on a deployed stack.
const hitlAWSHelp = `With --target aws the run is on a deployed stack: the reply goes to the stack's
worker API (its ApiUrl output), signed with your AWS credentials (SigV4) — the
ones every --target aws command uses — on a route API Gateway lets through
only for an identity allowed execute-api:Invoke on it: the stack's operator
policy (output OperatorPolicyArn) grants it. The step records who replied (your
ARN). No key of the stack is read.

`

// hitlExitHelp is the exit-status paragraph of approve, reject and answer:
// one mapping, which runHITL implements.
const hitlExitHelp = `Exit status:
  0  the reply was recorded and the run goes on
  1  the run is not running or cannot be reached: no DIR/.stratus/runs/RUN.json,
     its process is gone, its API does not answer, or the run has ended (or the
     reply failed for a reason of the run's own); on AWS, also a reply API
     Gateway refused (credentials it does not take, or not allowed the route)
  2  bad input, or NODE does not wait for this reply: an unknown node, a node that
     never asks a human, one that has not asked yet or was already answered, the
     wrong command for what it asks (approve/reject an approval, answer a
     question), an empty answer, a reply over 64 KiB, a rejection without
     --reason, an unknown run`

// runHITL replies for a human to a run that waits for one
// (README.md § A human gate, step by step). Embedded, it finds the running
// run's API in DIR/.stratus/runs/<run>.json, mints an operator token with
// DIR/.stratus/hmac.key and posts the reply to
// /v1/runs/<run>/nodes/<node>/hitl; with --target aws it posts it to the
// stack's IAM-authorised route, signed with the operator's AWS credentials
// (replyAWS: awsrun.Target.Reply). Exit statuses as hitlExitHelp says, the
// same on both: 1 when the run cannot take a reply at all, 2 when this reply
// is wrong for the node (hitlExit) or the run is unknown.
func runHITL(o *HITLOptions) error {
	switch {
	case o.Decision == worker.DecisionReject && strings.TrimSpace(o.Text) == "":
		return &exitError{code: ExitUsage, err: fmt.Errorf("reject %s of run %s: a rejection needs its reason: stratus reject %s %s --reason TEXT", o.Node, o.RunID, o.RunID, o.Node)}
	case o.Decision == worker.DecisionAnswer && strings.TrimSpace(o.Text) == "":
		return &exitError{code: ExitUsage, err: fmt.Errorf("answer %s of run %s: the answer is empty; valid: any non-empty text", o.Node, o.RunID)}
	}
	if err := worker.CheckReplySize(o.Text); err != nil {
		return &exitError{code: ExitUsage, err: fmt.Errorf("%s %s of run %s: %w", o.Decision, o.Node, o.RunID, err)}
	}
	ctx := context.Background()
	if o.Target == TargetAWS {
		ctx = awsContext()
	}
	id, err := resolveRunArg(ctx, o.Target, o.Dir, &o.AWS, o.RunID)
	if err != nil {
		return usageOr(err)
	}
	o.RunID = id
	reply := worker.Reply{Decision: o.Decision, Text: o.Text}
	var v *worker.HITLValue
	if o.Target == TargetAWS {
		v, err = replyAWS(ctx, o, reply)
	} else {
		v, err = orchestrator.Reply(ctx, o.Dir, o.RunID, o.Node, reply, runProcessAlive)
	}
	var re *orchestrator.ReplyError
	var ue usageError
	switch {
	case errors.As(err, &re):
		return &exitError{code: hitlExit(re.Status, re.Field), err: err}
	case errors.As(err, &ue), stratus.ErrorCode(err) == stratus.EINVALID:
		return &exitError{code: ExitUsage, err: err}
	case o.Target == TargetAWS && stratus.ErrorCode(err) == stratus.ENOTFOUND:
		// The stack's store has no such run (awsrun.Target.Reply reads it
		// first): unknown, exit 2, as embedded.
		return &exitError{code: ExitUsage, err: err}
	case o.Target != TargetAWS && stratus.ErrorCode(err) == stratus.ENOTFOUND && !recorded(o.Dir, o.RunID):
		// An unknown run is a usage error, as for every command (exit 2);
		// a known one that is not running is the run's state (exit 1).
		return &exitError{code: ExitUsage, err: stratus.Errorf(stratus.ENOTFOUND, "run %q not found under %s", o.RunID, o.Dir)}
	case err != nil:
		return &exitError{code: ExitFailed, err: err}
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
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity, status == http.StatusRequestEntityTooLarge:
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
