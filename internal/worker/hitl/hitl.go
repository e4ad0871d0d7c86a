package hitl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// CheckReplySize refuses a reply text over MaxReplyBytes: ETOOLARGE on
// field "text", naming its size and the limit.
func CheckReplySize(text string) error {
	if len(text) > core.MaxReplyBytes {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "text", "the reply is %d bytes; at most %d (64 KiB) on every runtime: put a longer text in a file of the repository and name it in the reply", len(text), core.MaxReplyBytes)
	}
	return nil
}

// Invoke applies a human's reply to the step of node that waits for one (worc
// reference.md § hitl node; docs/contracts.md § Request and response bodies):
// node is a hitl node, or an agent whose report asked (its "<node>.hitl" step;
// either name works).
//
// A question needs decision answer and a non-empty text; an approval
// needs approve, or reject with its reason as text. The reply is
// written to <ctx-dir>/<step>.md (a hitl node's <node>.md, an agent's
// <node>.hitl.md, where the next steps' context points), the step
// completes with its outcome — a hitl node: done, route:approve or
// route:deny; an agent's hitl: answered, approve or deny — and the Task
// state gets SendTaskSuccess.
//
// Errors: ENOTFOUND for an unknown run or node, or a node that never waits
// for a human; ECONFLICT when the run is over or nothing waits; EINVALID
// for an unknown decision; EUNPROCESSABLE for a reply that does not fit
// the request (an approval to a question, an empty answer). On any error
// the step keeps waiting: nothing is lost.
func Invoke(ctx context.Context, s *core.Service, runID, node string, r core.Reply) (*core.HITLValue, error) {
	run, err := s.Store.GetRun(ctx, runID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "run_id", "no run %q", runID)
	} else if err != nil {
		return nil, err
	}
	if stratus.RunTerminal(run.Status) {
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "run_id", "run %s is %s; nothing waits for a human", runID, run.Status)
	}
	env, err := s.Env(ctx, runID)
	if err != nil {
		return nil, err
	}
	n := env.Flow.Node(strings.TrimSuffix(node, compiler.HITLSuffix))
	if n == nil || (n.Kind != flow.KindHITL && !(n.Kind == flow.KindAgent && n.HITL != nil)) {
		return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "node", "flow %s has no node %q that waits for a human; those that may: %s",
			env.Flow.Name, node, strings.Join(humanNodes(env.Flow), ", "))
	}
	stepNode := n.ID
	if n.Kind == flow.KindAgent {
		stepNode += compiler.HITLSuffix
	}
	switch r.Decision {
	case core.DecisionApprove, core.DecisionReject, core.DecisionAnswer:
	default:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "decision", "%q; valid: approve, reject, answer", r.Decision)
	}
	if err := CheckReplySize(r.Text); err != nil {
		return nil, err
	}

	defer s.LockGates()()
	// The node's latest step, read without the run's others (README.md §
	// Performance).
	latest, err := s.Store.NodeSteps(ctx, runID, stepNode, 1)
	if err != nil {
		return nil, err
	}
	var st *stratus.Step
	if len(latest) > 0 {
		st = &latest[0]
	}
	if st == nil || st.Status != core.StepWaiting {
		latest := "it has not asked yet"
		if st != nil {
			latest = fmt.Sprintf("its latest request %s is %s", st.StepRef, st.Status)
		}
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "node", "node %s of run %s is not waiting for a human: %s", n.ID, runID, latest)
	}
	var v core.HITLValue
	if err := json.Unmarshal(st.Value, &v); err != nil {
		return nil, fmt.Errorf("%s: pending request: %w", st.StepRef, err)
	}
	outcome, err := judge(runID, n, v.Signal, r)
	if err != nil {
		return nil, err
	}
	now := s.NowUTC()
	v.Outcome, v.Decision, v.Answer, v.RepliedAt, v.RepliedBy = outcome, r.Decision, strings.TrimSpace(r.Text), now, r.By
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// The reply takes the step from waiting to completed in one
	// conditional write, before its file is written: of two replies read
	// waiting in two processes (two Lambda instances on AWS, where hitlMu
	// holds nothing), one wins and the other is refused with nothing of it
	// kept. A reply whose file cannot be written gives the step back.
	step := *st
	step.Status, step.Verdict, step.Value, step.EndedAt = stratus.StepCompleted, outcome, raw, now
	if err := s.Store.UpdateStepFrom(ctx, step, core.StepWaiting); stratus.ErrorCode(err) == stratus.ECONFLICT {
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "node", "node %s of run %s is not waiting for a human: another reply to %s came first", n.ID, runID, st.StepRef)
	} else if err != nil {
		return nil, err
	}
	if err := writeReply(ctx, s, run, env, *st, v); err != nil {
		if rerr := s.Store.UpdateStepFrom(context.WithoutCancel(ctx), *st, stratus.StepCompleted); rerr != nil {
			return nil, fmt.Errorf("%w (and the step could not be given back to its waiting: %v)", err, rerr)
		}
		return nil, err
	}
	reason := core.OneLine(v.Answer, 200)
	if v.RepliedBy != "" {
		reason = strings.TrimSpace(reason + " (replied by " + v.RepliedBy + ")")
	}
	s.Emit(core.Event{Type: core.EventStepEnded, RunID: runID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Outcome: outcome, Reason: reason,
		Duration: now.Sub(step.CreatedAt)})
	small, _ := json.Marshal(core.StepValue{StepRef: step.StepRef, Node: step.Node, Outcome: outcome, SubtaskOrder: v.SubtaskOrder})
	if err := s.Tokens.SendTaskSuccess(ctx, step.TaskToken, small); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "the reply to %s was recorded, but its state no longer waits for it: %v", step.StepRef, err)
	}
	return &v, nil
}

// judge checks a reply against the request and returns the step's outcome.
// A rejection needs its reason: the agent it sends back reads it.
func judge(runID string, n *flow.Node, signal string, r core.Reply) (string, error) {
	agent := n.Kind == flow.KindAgent
	if signal == core.SignalQuestion {
		if r.Decision != core.DecisionAnswer {
			return "", stratus.FieldErrorf(stratus.EUNPROCESSABLE, "decision", "%q: node %s asks a question; answer it with stratus answer %s %s TEXT", r.Decision, n.ID, runID, n.ID)
		}
		if strings.TrimSpace(r.Text) == "" {
			return "", stratus.FieldErrorf(stratus.EUNPROCESSABLE, "text", "the answer to node %s's question is empty; valid: any non-empty text", n.ID)
		}
		if agent {
			return compiler.OutcomeAnswered, nil
		}
		return "done", nil
	}
	switch r.Decision {
	case core.DecisionApprove:
		if agent {
			return compiler.OutcomeApprove, nil
		}
		return core.OutcomeRouteApprove, nil
	case core.DecisionReject:
		if strings.TrimSpace(r.Text) == "" {
			return "", stratus.FieldErrorf(stratus.EUNPROCESSABLE, "text", "a rejection of node %s needs its reason: stratus reject %s %s --reason TEXT", n.ID, runID, n.ID)
		}
		if agent {
			return compiler.OutcomeDeny, nil
		}
		return core.OutcomeRouteDeny, nil
	}
	return "", stratus.FieldErrorf(stratus.EUNPROCESSABLE, "decision", "%q: node %s asks for an approval; approve or reject it with stratus approve %s %s, or stratus reject %s %s --reason TEXT", r.Decision, n.ID, runID, n.ID, runID, n.ID)
}

// humanNodes lists the nodes of a flow that may wait for a human.
func humanNodes(f *flow.Flow) []string {
	var out []string
	for _, n := range f.Nodes {
		if n.Kind == flow.KindHITL || (n.Kind == flow.KindAgent && n.HITL != nil) {
			out = append(out, n.ID)
		}
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

// writeReply writes the request and its reply to <ctx-dir>/<step>.md.
func writeReply(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, st stratus.Step, v core.HITLValue) error {
	if run.WorkDir == "" {
		s.Warnf("%s: no work dir resolves for run %s; the reply is recorded without its file", st.StepRef, run.ID)
		return nil
	}
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Human reply to %s\n\n", st.StepRef)
	fmt.Fprintf(&b, "%s: %s\n\n", v.Signal, v.Request)
	fmt.Fprintf(&b, "decision: %s\n", v.Decision)
	if v.RepliedBy != "" {
		fmt.Fprintf(&b, "replied by: %s\n", v.RepliedBy)
	}
	if v.Answer != "" {
		fmt.Fprintf(&b, "\n%s\n", v.Answer)
	}
	fm := projection.FrontMatter{TaskID: run.TaskID, Step: st.Node, StepRef: st.StepRef, Attempt: 1, Agent: "human", Format: "text", SubmittedAt: v.RepliedAt}
	_, err = projection.Project(ctx, s.Files(run), dir, st.Node, fm, []byte(b.String()), nil)
	return err
}

// AuthorizeOperator checks the credential of a human's reply to run runID
// (POST /v1/runs/{run_id}/nodes/{node}/hitl): an operator capability token
// (captoken.MintOperator with the run's HMAC key) for that run. Nothing is
// read from the store. Errors: EUNAUTHORIZED for a missing, malformed,
// badly signed or expired credential; EFORBIDDEN for a worker handle or
// token, or another run's operator token.
func AuthorizeOperator(s *core.Service, authorization, runID string) error {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case authorization == "":
		return stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "missing; valid: Bearer <operator token> (stratus approve|reject|answer mints one)")
	case !strings.EqualFold(scheme, "Bearer") || cred == "":
		return stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "valid: Bearer <operator token>")
	case strings.HasPrefix(cred, captoken.HandlePrefix):
		return stratus.FieldErrorf(stratus.EFORBIDDEN, "Authorization", "a worker handle cannot reply for a human; valid: an operator token")
	case s.Minter == nil:
		return stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "this server verifies no operator tokens")
	}
	c, err := s.Minter.Verify(cred)
	if err != nil {
		return err
	}
	if c.Role != captoken.RoleOperator || !c.Allows(captoken.ReplyHuman) {
		return stratus.FieldErrorf(stratus.EFORBIDDEN, "Authorization", "token (role %q, verbs %v) does not grant %s; valid: an operator token", c.Role, c.Verbs, captoken.ReplyHuman)
	}
	if c.RunID != runID {
		return stratus.FieldErrorf(stratus.EFORBIDDEN, "run_id", "%q is not the run this operator token was issued for", runID)
	}
	return nil
}
