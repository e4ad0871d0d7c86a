package hitl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/hitl"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

const hitlFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: draft, kind: agent, role_file: f/draft.md, hitl: { allow_question: true, allow_approval: false } }
    - { id: signoff, kind: agent, role_file: f/signoff.md, hitl: { allow_question: false, allow_approval: true } }
    - { id: plain, kind: agent, role_file: f/plain.md }
    - { id: ask, kind: hitl, signal: question }
    - { id: gate, kind: hitl, signal: approval, timeout_s: TIMEOUT }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: draft, to: signoff }
    - { from: signoff, to: plain }
    - { from: plain, to: ask }
    - { from: ask, to: gate }
    - { from: gate, to: publish, outcome: route:approve }
    - { from: gate, to: publish, outcome: route:deny }
`

// hitlRig is a rig over hitlFlow that records progress events.
type hitlRig struct {
	*workertest.Rig
	mu     sync.Mutex
	events []core.Event
}

func newHITLRig(t *testing.T, gateTimeout string) *hitlRig {
	t.Helper()
	if gateTimeout == "" {
		gateTimeout = "3600"
	}
	h := &hitlRig{Rig: workertest.NewRig(t, workertest.RigOptions{Flow: strings.Replace(hitlFlow, "TIMEOUT", gateTimeout, 1)})}
	h.Svc.OnEvent = func(e core.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	}
	return h
}

// waitFor dispatches the hitl state of node: a hitl node's own Task, or an
// agent's "<node>.hitl" (kind hitl on the agent); it returns the step.
func (h *hitlRig) waitFor(t *testing.T, node string) stratus.Step {
	t.Helper()
	h.N++
	tok := fmt.Sprintf("tok-%d", h.N)
	if err := h.Svc.Dispatch(context.Background(), core.Message{RunID: "r1", Node: node, Kind: "hitl", TaskToken: tok}); err != nil {
		t.Fatal(err)
	}
	steps, _ := h.Svc.Store.ListSteps(context.Background(), "r1")
	return steps[len(steps)-1]
}

func (h *hitlRig) step(t *testing.T, tid string) stratus.Step {
	t.Helper()
	st, err := h.Svc.Store.GetStep(context.Background(), tid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (h *hitlRig) outcome(t *testing.T, tok string) string {
	t.Helper()
	var sv core.StepValue
	if raw, ok := h.Tokens.Successes()[tok]; ok {
		json.Unmarshal(raw, &sv)
		return sv.Outcome
	}
	if f, ok := h.Tokens.Failures()[tok]; ok {
		return "failure " + f
	}
	return ""
}

// A hitl step records the pending request (status waiting, the signal and the
// text), says on the progress line how to resume, and leaves its task token
// open (docs/architecture.md § The path of one step; worc reference.md § hitl
// node).
func TestDispatchHITL_RecordsTheWaitingRequest(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	st := h.waitFor(t, "gate")
	if st.Node != "gate" || st.Kind != "hitl" || st.Status != core.StepWaiting || st.StepRef != "gate#1" {
		t.Fatalf("step %+v", st)
	}
	var v core.HITLValue
	if err := json.Unmarshal(st.Value, &v); err != nil || v.Signal != core.SignalApproval || !strings.Contains(v.Request, "approve or reject") || v.Deadline.IsZero() {
		t.Errorf("value %s", st.Value)
	}
	if got := h.outcome(t, st.TaskToken); got != "" {
		t.Errorf("the task token completed (%s) before any human replied", got)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	last := h.events[len(h.events)-1]
	if last.Type != core.EventStepWaiting || !strings.Contains(last.Reason, "stratus approve r1 gate") || !strings.Contains(last.Reason, "stratus reject r1 gate --reason TEXT") {
		t.Errorf("waiting event %+v", last)
	}
}

// Human validates a reply against the waiting request: every refusal
// names its field and leaves the step waiting, so nothing is lost.
func TestHuman_RefusalsLeaveTheStepWaiting(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	ask := h.waitFor(t, "ask")
	gate := h.waitFor(t, "gate")
	cases := []struct {
		name, run, node string
		reply           core.Reply
		code, field     string
	}{
		{"an approval to a question", "r1", "ask", core.Reply{Decision: core.DecisionApprove}, stratus.EUNPROCESSABLE, "decision"},
		{"an empty answer", "r1", "ask", core.Reply{Decision: core.DecisionAnswer, Text: "  \n"}, stratus.EUNPROCESSABLE, "text"},
		// A step's value keeps the reply; a DynamoDB item holds 400 KB.
		{"an answer over 64 KiB", "r1", "ask", core.Reply{Decision: core.DecisionAnswer, Text: strings.Repeat("a", core.MaxReplyBytes+1)}, stratus.ETOOLARGE, "text"},
		{"a reason over 64 KiB", "r1", "gate", core.Reply{Decision: core.DecisionReject, Text: strings.Repeat("r", core.MaxReplyBytes+1)}, stratus.ETOOLARGE, "text"},
		{"an answer to an approval", "r1", "gate", core.Reply{Decision: core.DecisionAnswer, Text: "yes"}, stratus.EUNPROCESSABLE, "decision"},
		{"an unknown decision", "r1", "gate", core.Reply{Decision: "maybe"}, stratus.EINVALID, "decision"},
		{"an unknown run", "r9", "gate", core.Reply{Decision: core.DecisionApprove}, stratus.ENOTFOUND, "run_id"},
		{"an unknown node", "r1", "nope", core.Reply{Decision: core.DecisionApprove}, stratus.ENOTFOUND, "node"},
		{"a node that never waits", "r1", "plain", core.Reply{Decision: core.DecisionApprove}, stratus.ENOTFOUND, "node"},
		{"a node that may ask but waits for nothing", "r1", "draft", core.Reply{Decision: core.DecisionAnswer, Text: "x"}, stratus.ECONFLICT, "node"},
	}
	for _, c := range cases {
		_, err := hitl.Invoke(context.Background(), h.Svc.Service, c.run, c.node, c.reply)
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != c.code || se.Field != c.field {
			t.Errorf("%s: %v, want %s on field %s", c.name, err, c.code, c.field)
		}
	}
	for _, st := range []stratus.Step{ask, gate} {
		if got := h.step(t, st.TID); got.Status != core.StepWaiting || h.outcome(t, st.TaskToken) != "" {
			t.Errorf("%s after refused replies: status %s, token %q", st.StepRef, got.Status, h.outcome(t, st.TaskToken))
		}
	}
}

// The reply completes the step with the outcome its node kind routes on (worc
// reference.md § hitl node: a question proceeds on "done", an approval
// branches on route:approve / route:deny), lands in <ctx>/<node>.md, and a
// second reply finds nothing waiting.
func TestHuman_ReplyCompletesTheStep(t *testing.T) {
	t.Parallel()
	cases := []struct {
		node    string
		reply   core.Reply
		outcome string
		file    string
	}{
		{"ask", core.Reply{Decision: core.DecisionAnswer, Text: "Use Postgres."}, "done", "Use Postgres."},
		{"gate", core.Reply{Decision: core.DecisionApprove}, core.OutcomeRouteApprove, "decision: approve"},
		{"gate", core.Reply{Decision: core.DecisionReject, Text: "the tests are missing"}, core.OutcomeRouteDeny, "the tests are missing"},
	}
	for _, c := range cases {
		t.Run(c.node+" "+c.reply.Decision, func(t *testing.T) {
			t.Parallel()
			h := newHITLRig(t, "")
			st := h.waitFor(t, c.node)
			v, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", c.node, c.reply)
			if err != nil {
				t.Fatal(err)
			}
			if v.Outcome != c.outcome || h.outcome(t, st.TaskToken) != c.outcome {
				t.Errorf("outcome %q, token %q; want %q", v.Outcome, h.outcome(t, st.TaskToken), c.outcome)
			}
			if got := h.step(t, st.TID); got.Status != stratus.StepCompleted || got.Verdict != c.outcome {
				t.Errorf("step %+v", got)
			}
			if body := workertest.Read(t, h.Ctx(c.node+".md")); !strings.Contains(body, c.file) || !strings.Contains(body, `step_ref: "`+c.node+`#1"`) {
				t.Errorf("%s.md:\n%s", c.node, body)
			}
			if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", c.node, c.reply); stratus.ErrorCode(err) != stratus.ECONFLICT {
				t.Errorf("second reply: %v, want conflict", err)
			}
		})
	}
}

// An agent with a hitl grant asks through its typed result (worc
// flow-authoring.md § What a node returns: human_input): the step's outcome
// is human_input; a kind its grant does not allow, or a malformed request, is
// refused (422) and nothing is recorded; an agent without a grant is not
// asking, whatever its report says.
func TestHumanInput_AgentContract(t *testing.T) {
	t.Parallel()
	question := `{"content": "need input", "human_input": {"kind": "question", "text": "Which database?"}}`
	approval := `{"content": "ready", "human_input": {"kind": "approval", "text": "Drop the legacy table?"}}`
	cases := []struct {
		node, body string
		outcome    string // "" = refused
		field      string
	}{
		{"draft", question, compiler.OutcomeHumanInput, ""},
		{"draft", `{"content": "x", "human_input": null}`, "done", ""},
		{"draft", "plain prose", "done", ""},
		{"draft", approval, "", "human_input.kind"},
		{"draft", `{"human_input": {"kind": "poll", "text": "?"}}`, "", "human_input.kind"},
		{"draft", `{"human_input": {"kind": "question", "text": " "}}`, "", "human_input.text"},
		{"draft", `{"human_input": "which?"}`, "", "human_input"},
		{"signoff", approval, compiler.OutcomeHumanInput, ""},
		{"signoff", question, "", "human_input.kind"},
		{"plain", question, "done", ""},
	}
	for _, c := range cases {
		h := newHITLRig(t, "")
		h.Dispatch(t, c.node)
		sv, err := h.Submit(t, c.body)
		if c.outcome == "" {
			var se *stratus.Error
			if !errors.As(err, &se) || se.Code != stratus.EUNPROCESSABLE || se.Field != c.field {
				t.Errorf("%s %s: %v, want unprocessable on %s", c.node, c.body, err, c.field)
			}
			continue
		}
		if err != nil || sv.Outcome != c.outcome {
			t.Errorf("%s %s: %+v %v, want outcome %s", c.node, c.body, sv, err, c.outcome)
		}
	}
}

// The agent's request waits in "<node>.hitl#<visit>" with the agent's own
// text; the answer (or the denial's reason) reaches the agent's next prompt
// as a "## Human answer" ("## Approval denied: <reason>") section.
func TestHumanReplySection_ReRunAgentSeesTheReply(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	h.Visit(t, "draft", `{"human_input": {"kind": "question", "text": "Which database?"}}`)
	st := h.waitFor(t, "draft")
	var v core.HITLValue
	json.Unmarshal(st.Value, &v)
	if st.Node != "draft.hitl" || st.StepRef != "draft.hitl#1" || st.Status != core.StepWaiting || v.Request != "Which database?" || v.Asker != "draft" || v.Signal != core.SignalQuestion {
		t.Fatalf("agent hitl step %+v value %s", st, st.Value)
	}
	if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "draft", core.Reply{Decision: core.DecisionAnswer, Text: "Postgres 16."}); err != nil {
		t.Fatal(err)
	}
	if got := h.outcome(t, st.TaskToken); got != compiler.OutcomeAnswered {
		t.Errorf("agent hitl outcome %q, want %q", got, compiler.OutcomeAnswered)
	}
	if !strings.Contains(workertest.Read(t, h.Ctx("draft.hitl.md")), "Postgres 16.") {
		t.Errorf("draft.hitl.md lacks the answer")
	}
	again := h.Dispatch(t, "draft")
	if again.StepRef != "draft#2" {
		t.Errorf("the re-run is %s, want draft#2 (hitl steps do not count as the agent's visits)", again.StepRef)
	}
	p := h.LastPrompt(t)
	if !strings.Contains(p, "## Human answer") || !strings.Contains(p, "Which database?") || !strings.Contains(p, "Postgres 16.") {
		t.Errorf("re-run prompt lacks the answer:\n%s", p)
	}
	// Once the agent completes without asking, later visits start clean.
	if _, err := h.Submit(t, "done"); err != nil {
		t.Fatal(err)
	}
	h.Dispatch(t, "draft")
	if p := h.LastPrompt(t); strings.Contains(p, "## Human answer") {
		t.Errorf("a later visit still carries an answered round:\n%s", p)
	}

	// A denial: approve → "approve"; reject → "deny" and the reason.
	h.Visit(t, "signoff", `{"human_input": {"kind": "approval", "text": "Drop the legacy table?"}}`)
	st = h.waitFor(t, "signoff")
	if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "signoff.hitl", core.Reply{Decision: core.DecisionReject, Text: "keep it one more release"}); err != nil {
		t.Fatal(err)
	}
	if got := h.outcome(t, st.TaskToken); got != compiler.OutcomeDeny {
		t.Errorf("denied: outcome %q", got)
	}
	h.Dispatch(t, "signoff")
	if p := h.LastPrompt(t); !strings.Contains(p, "## Approval denied: keep it one more release") || !strings.Contains(p, "Drop the legacy table?") {
		t.Errorf("re-run prompt lacks the denial:\n%s", p)
	}
	h.Submit(t, `{"human_input": {"kind": "approval", "text": "Drop it next release?"}}`)
	st = h.waitFor(t, "signoff")
	if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "signoff", core.Reply{Decision: core.DecisionApprove}); err != nil || h.outcome(t, st.TaskToken) != compiler.OutcomeApprove {
		t.Errorf("approved: %v, outcome %q", err, h.outcome(t, st.TaskToken))
	}
}

// A hitl wait is fail-closed (worc reference.md § hitl node: a timeout parks
// the task): at its deadline the step fails with ErrHITLTimeout, which the
// compiled Catch sends to manual_action_required, and a late reply finds
// nothing waiting.
func TestHITL_DeadlineFailsTheWaitingStep(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "1")
	st := h.waitFor(t, "gate")
	deadline := time.Now().Add(30 * time.Second)
	for h.outcome(t, st.TaskToken) == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := h.outcome(t, st.TaskToken); !strings.HasPrefix(got, "failure "+core.ErrHITLTimeout) {
		t.Fatalf("token after the deadline: %q, want %s", got, core.ErrHITLTimeout)
	}
	if got := h.step(t, st.TID); got.Status != stratus.StepFailed {
		t.Errorf("step status %s, want failed", got.Status)
	}
	if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "gate", core.Reply{Decision: core.DecisionApprove}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("late reply: %v, want conflict", err)
	}
}

// A terminal run takes no reply.
func TestHuman_TerminalRunConflicts(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	h.waitFor(t, "gate")
	run := h.Run
	run.Status = stratus.RunFailed
	if err := h.Svc.Store.UpdateRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	_, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "gate", core.Reply{Decision: core.DecisionApprove})
	var se *stratus.Error
	if !errors.As(err, &se) || se.Code != stratus.ECONFLICT || se.Field != "run_id" {
		t.Errorf("%v, want conflict on run_id", err)
	}
}

// A reply finds its step among the node's steps (store.Store NodeSteps),
// without reading the run's whole step list (README.md § Performance).
func TestHuman_ReplyReadsOnlyTheNodesSteps(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	h.waitFor(t, "ask")
	st := h.waitFor(t, "gate")
	h.Svc.Store = workertest.ListlessStore{Store: h.Svc.Store}
	v, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "gate", core.Reply{Decision: core.DecisionApprove})
	if err != nil || v.Outcome != core.OutcomeRouteApprove {
		t.Fatalf("Invoke = %+v, %v; want %s", v, err, core.OutcomeRouteApprove)
	}
	if got := h.step(t, st.TID); got.Status != stratus.StepCompleted {
		t.Errorf("%s: status %s; want completed", got.StepRef, got.Status)
	}
}

// An agent's "<node>.hitl" step reads the agent's request from the node's
// latest completed step (store.Store NodeSteps), without reading the
// run's whole step list (README.md § Performance).
func TestAgentHITL_RequestReadsOnlyTheNodesSteps(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	h.Visit(t, "plain", "done")
	h.Visit(t, "draft", `{"human_input": {"kind": "question", "text": "Which database?"}}`)
	h.Visit(t, "plain", "done")
	h.Svc.Store = workertest.ListlessStore{Store: h.Svc.Store}
	if err := h.Svc.Dispatch(context.Background(), core.Message{RunID: "r1", Node: "draft", Kind: "hitl", TaskToken: "tok-ask"}); err != nil {
		t.Fatal(err)
	}
	got, err := h.Svc.Store.NodeSteps(context.Background(), "r1", "draft.hitl", 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("draft.hitl steps: %v, %v", got, err)
	}
	var v core.HITLValue
	json.Unmarshal(got[0].Value, &v)
	if got[0].Status != core.StepWaiting || v.Request != "Which database?" {
		t.Errorf("draft.hitl#1: status %s, request %q; want waiting, the agent's question", got[0].Status, v.Request)
	}
}

// The re-run agent's prompt reads its rounds from the agent's and its
// hitl node's steps (store.Before), without reading the run's whole step
// list (README.md § Performance): two rounds answered, both in the prompt,
// oldest first, with other nodes' steps between.
func TestHumanReplySection_ReadsOnlyTheAgentsSteps(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	h.Visit(t, "plain", "done")
	h.Visit(t, "draft", "done") // completed without asking: no round before it counts
	for i, q := range []string{"Which database?", "Which version?"} {
		if i == 0 {
			h.Visit(t, "draft", `{"human_input": {"kind": "question", "text": "`+q+`"}}`)
		} else {
			h.Submit(t, `{"human_input": {"kind": "question", "text": "`+q+`"}}`)
		}
		h.waitFor(t, "draft")
		if _, err := hitl.Invoke(context.Background(), h.Svc.Service, "r1", "draft", core.Reply{Decision: core.DecisionAnswer, Text: fmt.Sprintf("answer %d", i+1)}); err != nil {
			t.Fatal(err)
		}
		h.Visit(t, "plain", "done")
		if i == 0 {
			h.Dispatch(t, "draft")
		}
	}
	h.Svc.Store = workertest.ListlessStore{Store: h.Svc.Store}
	if err := h.Svc.Dispatch(context.Background(), core.Message{RunID: "r1", Node: "draft", Kind: "agent", TaskToken: "tok-listless"}); err != nil {
		t.Fatal(err)
	}
	p := h.LastPrompt(t)
	first, second := strings.Index(p, "answer 1"), strings.Index(p, "answer 2")
	if strings.Count(p, "## Human answer") != 2 || first < 0 || second < first {
		t.Errorf("re-run prompt: want two answered rounds, oldest first:\n%s", p)
	}
}
