package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// DispatchHITL parks a hitl step: it records the pending request (status
// StepWaiting), says on the progress line how to answer it, and arms the
// deadline. The task token is completed by the human's reply
// (internal/worker/hitl), or by the deadline with ErrHITLTimeout. An
// agent's request that cannot be read fails the step (ErrDispatch) instead.
// Errors: the store's, recording the waiting step.
func DispatchHITL(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, node *flow.Node) error {
	v := core.HITLValue{StepRef: step.StepRef, Node: step.Node, Signal: node.Signal}
	if prev, err := core.DecodeStepValue(step.Value); err == nil {
		v.SubtaskOrder = prev.SubtaskOrder
	}
	timeout := env.Config.HITL.TimeoutSeconds
	if node.Kind == flow.KindHITL {
		if node.TimeoutS != nil {
			timeout = *node.TimeoutS
		}
		v.Request = nodeRequest(ctx, s, run, env, step, node)
	} else {
		hi, err := agentRequest(ctx, s, env, step, node)
		if err != nil {
			return s.FailStep(ctx, step, 0, core.ErrDispatch, err.Error())
		}
		v.Signal, v.Request, v.Asker = hi.Kind, hi.Text, node.ID
	}
	if timeout <= 0 {
		timeout = compiler.DefaultHITLTimeoutSeconds
	}
	if len(v.Request) > core.MaxRequestBytes {
		v.Request = v.Request[:core.MaxRequestBytes] + "…"
	}
	v.Deadline = s.NowUTC().Add(time.Duration(timeout) * time.Second)
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	step.Status, step.Value = core.StepWaiting, raw
	if err := s.Store.UpdateStep(ctx, step); err != nil {
		return err
	}
	s.Emit(core.Event{Type: core.EventStepWaiting, RunID: run.ID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Outcome: v.Signal,
		Reason: waitingReason(run.ID, node.ID, s.ReplyFlags, v)})
	tid := step.TID
	time.AfterFunc(time.Duration(timeout)*time.Second, func() { hitlExpired(s, tid, timeout) })
	return nil
}

// waitingReason is the request and the commands that answer it.
func waitingReason(runID, node, flags string, v core.HITLValue) string {
	var how string
	if flags != "" {
		flags = " " + flags
	}
	if v.Signal == core.SignalQuestion {
		how = fmt.Sprintf("stratus answer %s %s%s TEXT", runID, node, flags)
	} else {
		how = fmt.Sprintf("stratus approve %s %s%s | stratus reject %s %s%s --reason TEXT", runID, node, flags, runID, node, flags)
	}
	return fmt.Sprintf("%s: %s — reply with: %s (before %s)", v.Signal, core.OneLine(v.Request, 300), how, v.Deadline.Format(time.RFC3339))
}

// nodeRequest words a hitl node's request: the node carries no text of its
// own, so it points at the latest output the human is to judge.
func nodeRequest(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, node *flow.Node) string {
	what := "answer the question of node " + node.ID
	if node.Signal == core.SignalApproval {
		what = "approve or reject the work so far at node " + node.ID
	}
	if q := strings.TrimSpace(node.Question); q != "" {
		// The node's own question (docs/contracts.md § Template variables),
		// rendered like a role
		// file with the step's variables.
		if vars, err := vars.TemplateVars(ctx, s, run, env, step); err == nil {
			q = prompt.Render(q, vars, core.OutputNodes(env.Flow))
		}
		what = strings.TrimSpace(q)
	}
	req := fmt.Sprintf("task %s (%s): %s", run.TaskID, run.TaskTitle, what)
	prior, err := s.LatestSteps(ctx, run.ID, step.TID)
	if err == nil && len(prior) > 0 && run.WorkDir != "" {
		if dir, err := core.CtxDir(env, run); err == nil {
			last := prior[len(prior)-1]
			req += fmt.Sprintf("; latest output: %s (%s)", core.Abs(run, dir+"/"+last.Node+".md"), last.StepRef)
		}
	}
	return req
}

// agentRequest reads the human_input request of the agent step that led
// to this "<node>.hitl" step: the node's latest completed step — typically
// its latest step, read without the run's others (README.md § Performance).
func agentRequest(ctx context.Context, s *core.Service, env *core.RunEnv, step stratus.Step, node *flow.Node) (*core.HumanInput, error) {
	st, found, err := store.NewestWhere(ctx, s.Store, step.RunID, node.ID, 2, func(st stratus.Step) bool {
		return st.Status == stratus.StepCompleted
	})
	if err != nil {
		return nil, err
	}
	if !found || st.Verdict != compiler.OutcomeHumanInput {
		return nil, fmt.Errorf("%s: node %s has no completed step asking for human input", step.StepRef, node.ID)
	}
	att, err := s.Store.LatestAttempt(ctx, st.TID)
	if err != nil {
		return nil, err
	}
	tail, err := s.Store.ListOutput(ctx, st.TID, att.N)
	if err != nil {
		return nil, err
	}
	value, err := fold.Fold(att.Agent, tail, s.SubmitFormat(env, node.ID))
	if err != nil {
		return nil, err
	}
	hi, err := core.HumanInputRequest(node, value)
	if err == nil && hi == nil {
		err = fmt.Errorf("%s asked for human input, but its report holds no human_input", st.StepRef)
	}
	return hi, err
}

// hitlExpired fails a hitl step still waiting at its deadline.
func hitlExpired(s *core.Service, tid string, seconds int) {
	ctx := context.Background()
	defer s.LockGates()()
	st, err := s.Store.GetStep(ctx, tid)
	if err != nil || st.Status != core.StepWaiting {
		return
	}
	s.FailStep(ctx, st, 0, core.ErrHITLTimeout, fmt.Sprintf("no human reply within %d s (hitl timeout)", seconds))
}
