package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/trace"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/gate"
	"github.com/stratusflow/stratus/internal/worker/supervise"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// Invoke handles one dispatch message (docs/architecture.md § The path of
// one step, 3): it creates the step (idempotent on the task token, so a
// redelivered message does not create two), then per node kind launches a
// worker (agent, evaluator), writes the summary (publish) or skips the node
// (a `when` fact that is false). It completes the Task state itself for
// every kind but agent/evaluator, whose worker completes it through submit,
// and hitl (a hitl node, or an agent's "<node>.hitl" state: message kind
// hitl), whose step parks (internal/worker/gate) until a human's reply
// (internal/worker/hitl). A "stop" message (kind compiler.KindStop, no task
// token) stops the node's worker instead (stopNode); a supervisor
// observation message (kind core.KindObserve) starts its turn
// (supervise.Observe).
//
// Errors returned are infrastructure errors the queue may redeliver on;
// every failure that belongs to the run is reported to the state machine
// with SendTaskFailure instead.
func Invoke(ctx context.Context, s *core.Service, m core.Message) error {
	defer trace.StartRegion(ctx, "dispatch "+m.Kind).End() // STRATUS_TRACE's dispatch phase
	switch m.Kind {
	case compiler.KindStop:
		return stopNode(ctx, s, m)
	case core.KindObserve:
		return supervise.Observe(ctx, s, m)
	}
	if m.RunID == "" || m.Node == "" || m.TaskToken == "" {
		return stratus.Errorf(stratus.EINVALID, "dispatch message needs run_id, node and task_token; got %+v", m)
	}
	run, err := s.Store.GetRun(ctx, m.RunID)
	if err != nil {
		return err
	}
	env, err := s.Env(ctx, run.ID)
	if err != nil {
		return s.Fail(ctx, m.TaskToken, core.ErrDispatch, err.Error())
	}
	node := env.Flow.Node(m.Node)
	if node == nil {
		return s.Fail(ctx, m.TaskToken, core.ErrDispatch, fmt.Sprintf("flow %s has no node %q", env.Flow.Name, m.Node))
	}
	stepNode, kind := core.HITLStep(m, node) // an agent's "<node>.hitl" waits in a step of its own (core/hitl.go)
	visits, err := s.Store.CountVisits(ctx, run.ID, stepNode)
	if err != nil {
		return err
	}
	if stepNode == node.ID && visits > 0 && (node.Kind == "agent" || node.Kind == "evaluator" || core.IsExec(node.Kind)) {
		if handled, err := reenter(ctx, s, run, env, node, m, visits); handled || err != nil {
			return err
		}
	}
	// The store numbers the visit: dispatch instances creating steps of
	// one node at once each get a visit of their own (CreateNextStep).
	sum := sha256.Sum256([]byte(m.TaskToken))
	dedup := hex.EncodeToString(sum[:])
	step, created, err := s.Store.CreateNextStep(ctx, run.ID, stepNode, dedup, func(visit int) (stratus.Step, error) {
		ref := fmt.Sprintf("%s#%d", stepNode, visit)
		var seed json.RawMessage
		if m.SubtaskOrder > 0 {
			seed, _ = json.Marshal(core.StepValue{StepRef: ref, Node: stepNode, SubtaskOrder: m.SubtaskOrder})
		}
		return stratus.Step{
			TID:       fmt.Sprintf("%s.%s.%d", run.ID, stepNode, visit),
			RunID:     run.ID,
			Node:      stepNode,
			Kind:      kind,
			Visit:     visit,
			StepRef:   ref,
			DedupKey:  dedup,
			TaskToken: m.TaskToken,
			Status:    stratus.StepRunning,
			Value:     seed,
			Input:     m.State,
			CreatedAt: s.NowUTC(),
		}, nil
	})
	if err != nil {
		return err
	}
	if !created {
		// A redelivered message: the first delivery owns the step, unless it
		// failed (transiently, or its Lambda timed out) before the step's
		// first attempt was written — then nobody would ever launch it.
		if stepNode == node.ID && step.Status == stratus.StepRunning && (node.Kind == "agent" || node.Kind == "evaluator" || core.IsExec(node.Kind)) {
			_, err := s.Store.LatestAttempt(ctx, step.TID)
			if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
				return err
			}
			if err == nil {
				return nil
			}
			// No attempt yet: go on as the first delivery would.
		} else {
			return nil
		}
	}
	if stepNode != node.ID {
		return gate.DispatchHITL(ctx, s, run, env, step, node)
	}

	if skip, why := vars.AdmitNode(ctx, s, run, env, node); skip {
		return skipStep(ctx, s, step, node, why)
	}
	if node.Kind == "agent" || node.Kind == "evaluator" || (core.IsExec(node.Kind) && node.Kind != flow.KindPublish) {
		// A publish spends no tokens: a run at its cap still publishes.
		if stopped, err := checkCaps(ctx, s, run, step); stopped || err != nil {
			return err
		}
	}
	switch node.Kind {
	case "agent", "evaluator":
		return attempt.LaunchAttempt(ctx, s, run, env, step, 1)
	case "checks", "tool":
		// Run by the worker too: the runner has the repository (vars.ExecSpec).
		if name, why := core.ExecRefusal(env, node); name != "" {
			return s.FailStep(ctx, step, 0, name, why)
		}
		return attempt.LaunchAttempt(ctx, s, run, env, step, 1)
	case "publish":
		s.Emit(core.Event{Type: core.EventStepStarted, RunID: run.ID, Node: step.Node, StepRef: step.StepRef, TID: step.TID})
		if supervise.StartFinalize(ctx, s, run, env, step) {
			return nil // the finalize turn's end writes the report and completes publish (supervise.StartFinalize)
		}
		return attempt.StartPublish(ctx, s, run, env, step)
	case "hitl":
		return gate.DispatchHITL(ctx, s, run, env, step, node)
	default:
		why := fmt.Sprintf("node %q: kind %q is not supported by this build of Stratus yet; supported: agent, evaluator, checks, tool, hitl, publish", node.ID, node.Kind)
		return s.FailStep(ctx, step, 0, core.ErrUnsupported, why)
	}
}

// reenter continues the node's latest step (visit visits) when the node's
// Task state is entered again for it — by the state's own Retry
// (m.RetryCount > 0: a transient failure the retry policy retries on the
// same or the next provider, or an infrastructure error), or after the
// step parked (its "<node>.wait" ends and enters the node again) — with a
// new attempt under the new task token: the attempt fencing of
// docs/contracts.md § Routes keeps
// the attempts before it from writing, and the step stays one visit, one
// step_ref. handled is false when the entry is a new visit (a rework loop,
// a resume) and Dispatch creates the step as usual.
//
// A redelivered message of an entry already recorded launches nothing,
// unless the delivery that recorded it failed before it launched (the
// latest attempt is still the failed one of the entry before).
func reenter(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, node *flow.Node, m core.Message, visits int) (handled bool, err error) {
	tid := fmt.Sprintf("%s.%s.%d", run.ID, node.ID, visits)
	st, err := s.Store.GetStep(ctx, tid)
	if err != nil {
		return false, err
	}
	if m.RetryCount == 0 && st.Status != stratus.StepParked {
		return false, nil
	}
	if st.Status == stratus.StepCompleted || st.Status == stratus.StepCanceled {
		// Not a step that failed for a retry to take over: a new visit.
		return false, nil
	}
	sum := sha256.Sum256([]byte(m.TaskToken))
	entry := fmt.Sprintf("%x:%d", sum[:12], m.RetryCount)
	st, reentered, err := s.Store.ReenterStep(ctx, tid, m.TaskToken, entry)
	if err != nil {
		return true, err
	}
	n := 1
	latest, err := s.Store.LatestAttempt(ctx, tid)
	switch {
	case err == nil:
		n = latest.N + 1
	case stratus.ErrorCode(err) != stratus.ENOTFOUND:
		return true, err
	}
	if !reentered && (err != nil || latest.Status != stratus.AttemptFailed || st.TaskToken != m.TaskToken || st.Status != stratus.StepRunning) {
		return true, nil // a redelivery; the first delivery launched its attempt
	}
	if stopped, err := checkCaps(ctx, s, run, st); stopped || err != nil {
		return true, err
	}
	return true, attempt.LaunchAttempt(ctx, s, run, env, st, n)
}

// checkCaps enforces the run's cost and token caps (docs/architecture.md §
// The run lifecycle) before a
// worker step starts: a run at or over a cap fails step with
// ErrCapReached, which parks the run at manual_action_required (stopped is
// true); a run near a cap, or whose spend includes attempts of unknown
// cost, is warned about once. A run without caps reads nothing.
func checkCaps(ctx context.Context, s *core.Service, run stratus.Run, step stratus.Step) (stopped bool, err error) {
	if run.MaxCostUSD == 0 && run.MaxTokens == 0 {
		return false, nil
	}
	sp, err := lifecycle.RunSpend(ctx, s.Store, run.ID)
	if err != nil {
		return false, err
	}
	if why := lifecycle.CapReached(run, sp); why != "" {
		return true, s.FailStep(ctx, step, 0, core.ErrCapReached, why)
	}
	for _, n := range lifecycle.CapNotes(run, sp) {
		if s.NoteOnce(run.ID, n.Kind) {
			s.Warnf("%s", n.Text)
		}
	}
	return false, nil
}

// stopNode handles a "stop" message (docs/architecture.md § The path of
// one step, 10:
// a Catch on a timed-out or failed worker state stops its ECS task before
// routing). The node's latest step is the one whose state was caught: a
// step still running (its state timed out, nobody completed it) and its
// running attempt are recorded failed with the caught error as the
// reason, then its worker is stopped. A step already ended (the worker or
// the dispatch failed it) keeps its record; its worker, if any is still
// known, is stopped all the same. Nothing is sent to the state machine.
func stopNode(ctx context.Context, s *core.Service, m core.Message) error {
	if m.RunID == "" || m.Node == "" {
		return stratus.Errorf(stratus.EINVALID, "stop message needs run_id and node; got %+v", m)
	}
	visits, err := s.Store.CountVisits(ctx, m.RunID, m.Node)
	if err != nil || visits == 0 {
		return err // no step: the node's dispatch never ran
	}
	step, err := s.Store.GetStep(ctx, fmt.Sprintf("%s.%s.%d", m.RunID, m.Node, visits))
	if err != nil {
		return err
	}
	if step.Status == stratus.StepRunning {
		reason := "its state was caught"
		if e := m.Error; e != nil {
			reason = fmt.Sprintf("its state was caught with %s", e.Error)
			if e.Cause != "" {
				reason += ": " + e.Cause
			}
		}
		reason += "; the worker was stopped"
		att, aerr := s.Store.LatestAttempt(ctx, step.TID)
		if aerr == nil && att.Status == stratus.AttemptRunning {
			// Recorded before the stop, so the worker's exit is not taken
			// for a crash (workerExited skips an attempt no longer running).
			att.Status, att.Terminal, att.Reason, att.EndedAt = stratus.AttemptFailed, "Failed", reason, s.NowUTC()
			att.Class, att.RetryAt = core.CaughtClass(m.Error), time.Time{}
			if err := s.Store.UpdateAttempt(ctx, att); err != nil {
				return err
			}
		}
		v, _ := json.Marshal(core.StepValue{StepRef: step.StepRef, Node: step.Node, Attempt: att.N, Outcome: "failed", Reason: reason})
		if err := s.FinishStep(ctx, step, stratus.StepFailed, "failed", v); err != nil {
			return err
		}
		s.Emit(core.Event{Type: core.EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Attempt: att.N, Outcome: "failed", Reason: reason})
	}
	why := "its state was caught"
	if e := m.Error; e != nil {
		why = fmt.Sprintf("its state was caught with %s", e.Error)
	}
	if err := s.StopWorker(launch.WithStopCause(ctx, why), step.TID); err != nil {
		return err
	}
	// On AWS another invocation launched the worker: find it by the task id.
	if ts, ok := s.Launcher.(launch.TaskStopper); ok {
		return ts.StopTask(ctx, step.TID)
	}
	return nil
}

// skipStep completes the step of a node the dispatch skips (a task's
// nodes.<id>.enabled: false, or a false `when`; worc reference.md §
// Conditional nodes). Its verdict and progress line say "skipped", and its
// value carries why (the report's Pipeline nodes skipped reads it). The
// outcome the state machine routes on is SkipOutcome: a skipped gate does
// not gate (pinned by TestDispatch_SkippedGateCompletesWithItsPassOutcome),
// where "skipped" would match no edge of a gate and
// park the run.
func skipStep(ctx context.Context, s *core.Service, step stratus.Step, node *flow.Node, why string) error {
	v, _ := json.Marshal(core.StepValue{StepRef: step.StepRef, Node: step.Node, Outcome: core.SkipOutcome(node), Reason: why})
	if err := s.FinishStep(ctx, step, stratus.StepCompleted, core.OutcomeSkipped, v); err != nil {
		return err
	}
	s.Emit(core.Event{Type: core.EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Outcome: core.OutcomeSkipped, Reason: why})
	return s.Tokens.SendTaskSuccess(ctx, step.TaskToken, v)
}
