package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/store"
)

// Human-in-the-loop (worc reference.md § hitl node and § agent node: hitl;
// docs/contracts.md § Flows and task types): a hitl node, or an agent whose
// report asks a human, parks its Task state on a task token that only a human's
// reply completes — `stratus approve|reject|answer RUN NODE` or POST
// /v1/runs/{run_id}/nodes/{node}/hitl (on a stack, its IAM-authorised twin POST
// /v1/operator/runs/{run_id}/nodes/{node}/hitl), all ending in Service.Human.

// StepWaiting is the status of a hitl step while it waits for its human.
const StepWaiting = stratus.StepWaiting

// EventStepWaiting is the progress event of a step that waits for a human:
// Reason holds the request and the commands that answer it.
const EventStepWaiting = "step_waiting"

// ErrHITLTimeout completes a hitl Task state whose human did not reply in
// time; the compiled Catch parks the run at manual_action_required
// (reference.md § hitl node: a timeout is fail-closed).
const ErrHITLTimeout = "stratus.HITLTimeout"

// Signals of a hitl request.
const (
	SignalQuestion = "question"
	SignalApproval = "approval"
)

// Decisions of a human's reply.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionAnswer  = "answer"
)

// Outcomes a hitl node's step completes with (reference.md § hitl node: a
// question proceeds on its unconditional edge; an approval branches on
// route:approve / route:deny). An agent's "<node>.hitl" step completes
// with compiler.OutcomeAnswered, OutcomeApprove or OutcomeDeny instead.
const (
	OutcomeRouteApprove = "route:approve"
	OutcomeRouteDeny    = "route:deny"
)

// Reply is a human's reply to a waiting hitl step: the body of POST
// /v1/runs/{run_id}/nodes/{node}/hitl (and of its IAM-authorised twin
// under /v1/operator/). Decision is approve, reject or answer; Text is the
// answer to a question, or the reason of a rejection. By is who replied,
// as the server verified it (the ARN of the operator's AWS identity on
// the IAM-authorised route; "" for an operator token's holder): never
// read from the body.
type Reply struct {
	Decision string `json:"decision"`
	Text     string `json:"text,omitempty"`
	By       string `json:"-"`
}

// MaxReplyBytes bounds a reply's text (an answer, a rejection's reason),
// bytes, on every runtime: the step's value keeps it, and a DynamoDB item
// holds at most 400 KB; the reply file and the next prompts carry it too.
// A longer text belongs in a file of the repository, named in the reply.
const MaxReplyBytes = 64 << 10

// HITLValue is the value of a hitl step: while it waits (status
// StepWaiting) the pending request, once answered the reply too. Its
// step_ref, node, outcome, reason and subtask_order read as a StepValue.
type HITLValue struct {
	StepRef      string    `json:"step_ref"`
	Node         string    `json:"node"`
	Outcome      string    `json:"outcome"` // "" while waiting
	Reason       string    `json:"reason,omitempty"`
	SubtaskOrder int       `json:"subtask_order,omitempty"`
	Signal       string    `json:"signal"`          // question | approval
	Request      string    `json:"request"`         // the question, or what is to be approved
	Asker        string    `json:"asker,omitempty"` // the agent whose report asked (an agent's hitl)
	Deadline     time.Time `json:"deadline"`
	Decision     string    `json:"decision,omitempty"`
	Answer       string    `json:"answer,omitempty"` // the answer, or the rejection's reason
	RepliedAt    time.Time `json:"replied_at,omitzero"`
	RepliedBy    string    `json:"replied_by,omitempty"` // Reply.By: the AWS identity (ARN) that replied on a stack
}

// HumanInput is the human_input object of an agent's typed result
// (flow-authoring.md § What a node returns: an agent with hitl declared
// returns `content` + an optional question/approval object).
type HumanInput struct {
	Kind string `json:"kind"` // question | approval
	Text string `json:"text"`
}

// MaxRequestBytes bounds the request text a step value keeps.
const MaxRequestBytes = 8 << 10

// HumanInputRequest returns the human_input request of an agent's typed
// result, or nil when the node declares no hitl grant or the result asks
// nothing (no human_input, or null). Errors: EUNPROCESSABLE (Field
// "human_input") for a malformed request or a kind the grant does not
// allow — the core re-validates every typed result and fails the node
// rather than trust it (flow-authoring.md § What a node returns).
func HumanInputRequest(node *flow.Node, value json.RawMessage) (*HumanInput, error) {
	if node.Kind != flow.KindAgent || node.HITL == nil {
		return nil, nil
	}
	raw, ok := ContractObject(value)["human_input"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var hi HumanInput
	if err := json.Unmarshal(raw, &hi); err != nil {
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "human_input", "node %s: human_input is not an object {kind, text}: %v", node.ID, err)
	}
	switch {
	case hi.Kind != SignalQuestion && hi.Kind != SignalApproval:
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "human_input.kind", "node %s: human_input.kind %q; valid: question, approval", node.ID, hi.Kind)
	case strings.TrimSpace(hi.Text) == "":
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "human_input.text", "node %s: human_input.text is empty; a %s needs its text", node.ID, hi.Kind)
	case hi.Kind == SignalQuestion && !node.HITL.AllowQuestion:
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "human_input.kind", "node %s asked a question, but its hitl grant does not allow questions (hitl.allow_question is false)", node.ID)
	case hi.Kind == SignalApproval && !node.HITL.AllowApproval:
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "human_input.kind", "node %s asked for an approval, but its hitl grant does not allow approvals (hitl.allow_approval is false)", node.ID)
	}
	return &hi, nil
}

// HITLStep names the step a dispatch message creates: an agent's
// "<node>.hitl" state (kind hitl on an agent node) waits in a step of its
// own, "<node>.hitl#<visit>", so the agent's own visits count on.
func HITLStep(m Message, node *flow.Node) (stepNode, kind string) {
	if m.Kind == compiler.KindHITL && node.Kind != flow.KindHITL {
		return node.ID + compiler.HITLSuffix, flow.KindHITL
	}
	return node.ID, node.Kind
}

// OneLine collapses every run of white space of s into one space and cuts
// the result at n bytes (Truncate), for a progress line.
func OneLine(s string, n int) string {
	return Truncate(strings.Join(strings.Fields(s), " "), n)
}

// HumanReplySection is what an agent's prompt gains after it asked a
// human: one "## Human answer" (a question answered) or "## Approval
// denied: <reason>" section per hitl round since the agent last completed
// without asking, oldest first; "" when there is none. step is the
// agent's step being rendered. The prompt renderer appends it to the
// rendered role file. It reads the agent's and its hitl node's steps back
// from step to that completion (store.Before), not the run's (README.md §
// Performance).
func (s *Service) HumanReplySection(ctx context.Context, runID string, step stratus.Step) (string, error) {
	reset := func(st stratus.Step) bool { // the agent completed without asking
		return st.Node == step.Node && st.Status == stratus.StepCompleted && st.Verdict != compiler.OutcomeHumanInput
	}
	steps, err := store.Before(ctx, s.Store, runID, []string{step.Node, step.Node + compiler.HITLSuffix}, step.TID, 8, reset)
	if err != nil {
		return "", err
	}
	var rounds []HITLValue
	for i := len(steps) - 1; i >= 0; i-- { // oldest first
		st := steps[i]
		switch {
		case st.TID == step.TID:
		case reset(st):
			rounds = nil
		case st.Node == step.Node+compiler.HITLSuffix && st.Status == stratus.StepCompleted &&
			(st.Verdict == compiler.OutcomeAnswered || st.Verdict == compiler.OutcomeDeny):
			var v HITLValue
			if json.Unmarshal(st.Value, &v) == nil {
				rounds = append(rounds, v)
			}
		}
	}
	var b strings.Builder
	for _, v := range rounds {
		if v.Outcome == compiler.OutcomeAnswered {
			fmt.Fprintf(&b, "\n\n## Human answer\n\nYou asked (%s): %s\n\n%s\n", v.StepRef, v.Request, v.Answer)
			continue
		}
		reason := OneLine(v.Answer, 500)
		if reason == "" {
			reason = "no reason given"
		}
		fmt.Fprintf(&b, "\n\n## Approval denied: %s\n\nYou asked for approval (%s) of: %s\n", reason, v.StepRef, v.Request)
	}
	return b.String(), nil
}
