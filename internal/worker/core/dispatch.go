package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/prompt"
)

// Message is the body a compiled Task state sends to the dispatch queue
// (internal/compiler: Parameters.MessageBody).
type Message struct {
	RunID     string `json:"run_id"`
	Node      string `json:"node"`
	Kind      string `json:"kind"`
	TaskToken string `json:"task_token"`
	// SubtaskOrder is the decomposition subtask the step runs for (1-based;
	// 0 when the task is not decomposed). The step is created with it as
	// its seeded value (StepValue.SubtaskOrder).
	SubtaskOrder int `json:"subtask_order,omitempty"`
	// Error is what a "stop" message (kind compiler.KindStop, sent by a
	// worker state's "<node>.stop" state, no task token) carries: the
	// error the state's Catch caught ($.error).
	Error *CaughtError `json:"error,omitempty"`
	// State is the sending Task state's input ("state.$": "$"), recorded
	// on the step as stratus.Step.Input: what a resumed run enters the
	// state with again (internal/lifecycle).
	State json.RawMessage `json:"state,omitempty"`
	// RetryCount is the sending state's $$.State.RetryCount: above 0 when
	// its own Retry entered it again after a failure (a transient one the
	// retry policy retries, or an infrastructure error), and the node's
	// latest step goes on (reenter).
	RetryCount int `json:"retry_count,omitempty"`
	// StepRef and Why are what an observation message (kind KindObserve,
	// sent by the worker API through Service.Queue, issue 14 § 10)
	// carries: the step to observe (Node is its node) and why.
	StepRef string `json:"step_ref,omitempty"`
	Why     string `json:"why,omitempty"`
}

// KindObserve is the kind of a dispatch message that starts a supervisor
// observation turn of a step that ended (seed 004 § What the layer does).
const KindObserve = "supervisor.observe"

// CaughtError is the Catch's view of a failed state: {Error, Cause}.
type CaughtError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// Error names a dispatch completes a Task state with (SendTaskFailure).
const (
	ErrLaunchFailed = "stratus.LaunchFailed"  // the worker could not be started
	ErrWorkerFailed = "stratus.WorkerFailed"  // the worker ended without a report (seed 003 § 5)
	ErrUnsupported  = "stratus.Unsupported"   // a node kind this build cannot run
	ErrPublish      = "stratus.PublishFailed" // the publish node could not write its report
	ErrDispatch     = "stratus.DispatchFailed"
	ErrProjection   = "stratus.ProjectionFailed" // the output was recorded but its files could not be written

	// ErrInfrastructure: the worker could not be started for want of
	// capacity or under throttling (launch.ErrInfrastructure); the machine
	// parks the run at manual_action_required.
	ErrInfrastructure = compiler.ErrInfrastructure
	// ErrCapReached: the run reached its cost or token cap before the
	// step's worker started; the machine parks the run.
	ErrCapReached = compiler.ErrCapReached
)

// Dispatch handles one dispatch message (DESIGN.md § The path of one step,
// step 2): it creates the step (idempotent on the task token, so a
// redelivered message does not create two), then per node kind launches a
// worker (agent, evaluator), writes the summary (publish) or skips the node
// (a `when` fact that is false). It completes the Task state itself for
// every kind but agent/evaluator, whose worker completes it through submit,
// and hitl (a hitl node, or an agent's "<node>.hitl" state: message kind
// hitl), whose step waits for Human (hitl.go). A "stop" message (kind
// compiler.KindStop, no task token) stops the node's worker instead
// (stopNode).
//
// Errors returned are infrastructure errors the queue may redeliver on;
// every failure that belongs to the run is reported to the state machine
// with SendTaskFailure instead.
func (s *Service) Dispatch(ctx context.Context, m Message) error {
	switch m.Kind {
	case compiler.KindStop:
		return s.StopNode(ctx, m)
	case KindObserve:
		return s.Observe(ctx, m) // supervisor.go
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
		return s.Fail(ctx, m.TaskToken, ErrDispatch, err.Error())
	}
	node := env.Flow.Node(m.Node)
	if node == nil {
		return s.Fail(ctx, m.TaskToken, ErrDispatch, fmt.Sprintf("flow %s has no node %q", env.Flow.Name, m.Node))
	}
	stepNode, kind := HITLStep(m, node) // an agent's "<node>.hitl" waits in a step of its own (hitl.go)
	visits, err := s.Store.CountVisits(ctx, run.ID, stepNode)
	if err != nil {
		return err
	}
	if stepNode == node.ID && visits > 0 && (node.Kind == "agent" || node.Kind == "evaluator" || IsExec(node.Kind)) {
		if handled, err := s.Reenter(ctx, run, env, node, m, visits); handled || err != nil {
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
			seed, _ = json.Marshal(StepValue{StepRef: ref, Node: stepNode, SubtaskOrder: m.SubtaskOrder})
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
		if stepNode == node.ID && step.Status == stratus.StepRunning && (node.Kind == "agent" || node.Kind == "evaluator" || IsExec(node.Kind)) {
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
		return s.DispatchHITL(ctx, run, env, step, node)
	}

	if skip, why := s.AdmitNode(ctx, run, env, node); skip {
		return s.SkipStep(ctx, step, node, why)
	}
	if node.Kind == "agent" || node.Kind == "evaluator" || IsExec(node.Kind) {
		if stopped, err := s.CheckCaps(ctx, run, step); stopped || err != nil {
			return err
		}
	}
	switch node.Kind {
	case "agent", "evaluator":
		return s.LaunchAttempt(ctx, run, env, step, 1)
	case "checks", "tool":
		// Run by the worker too: the runner has the repository (checks.go).
		if name, why := ExecRefusal(env, node); name != "" {
			return s.FailStep(ctx, step, 0, name, why)
		}
		return s.LaunchAttempt(ctx, run, env, step, 1)
	case "publish":
		s.Emit(Event{Type: EventStepStarted, RunID: run.ID, Node: step.Node, StepRef: step.StepRef, TID: step.TID})
		if s.StartFinalize(ctx, run, env, step) {
			return nil // the finalize turn's end writes the report and completes publish (supervisor.go)
		}
		written, err := s.Publish(ctx, run, env)
		if err != nil {
			if s.ReportDiskFull(fmt.Errorf("%s: write the summary: %w", step.StepRef, err)) {
				return nil // the run stops, its publish open: a resume publishes again
			}
			return s.FailStep(ctx, step, 0, ErrPublish, err.Error())
		}
		if err := s.CompleteNonWorker(ctx, step, "done", strings.Join(written, ", ")); err != nil && !s.ReportDiskFull(fmt.Errorf("%s: record it done: %w", step.StepRef, err)) {
			return err
		}
		return nil
	case "hitl":
		return s.DispatchHITL(ctx, run, env, step, node)
	default:
		why := fmt.Sprintf("node %q: kind %q is not supported by this build of Stratus yet; supported: agent, evaluator, checks, tool, hitl, publish", node.ID, node.Kind)
		return s.FailStep(ctx, step, 0, ErrUnsupported, why)
	}
}

// Reenter continues the node's latest step (visit visits) when the node's
// Task state is entered again for it — by the state's own Retry
// (m.RetryCount > 0: a transient failure the retry policy retries on the
// same or the next provider, or an infrastructure error), or after the
// step parked (its "<node>.wait" ends and enters the node again) — with a
// new attempt under the new task token: seed 000's attempt fencing keeps
// the attempts before it from writing, and the step stays one visit, one
// step_ref. handled is false when the entry is a new visit (a rework loop,
// a resume) and Dispatch creates the step as usual.
//
// A redelivered message of an entry already recorded launches nothing,
// unless the delivery that recorded it failed before it launched (the
// latest attempt is still the failed one of the entry before).
func (s *Service) Reenter(ctx context.Context, run stratus.Run, env *RunEnv, node *flow.Node, m Message, visits int) (handled bool, err error) {
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
	if stopped, err := s.CheckCaps(ctx, run, st); stopped || err != nil {
		return true, err
	}
	return true, s.LaunchAttempt(ctx, run, env, st, n)
}

// CheckCaps enforces the run's cost and token caps (issue 11 § 7) before a
// worker step starts: a run at or over a cap fails step with
// ErrCapReached, which parks the run at manual_action_required (stopped is
// true); a run near a cap, or whose spend includes attempts of unknown
// cost, is warned about once. A run without caps reads nothing.
func (s *Service) CheckCaps(ctx context.Context, run stratus.Run, step stratus.Step) (stopped bool, err error) {
	if run.MaxCostUSD == 0 && run.MaxTokens == 0 {
		return false, nil
	}
	sp, err := lifecycle.RunSpend(ctx, s.Store, run.ID)
	if err != nil {
		return false, err
	}
	if why := lifecycle.CapReached(run, sp); why != "" {
		return true, s.FailStep(ctx, step, 0, ErrCapReached, why)
	}
	for _, n := range lifecycle.CapNotes(run, sp) {
		if s.NoteOnce(run.ID, n.Kind) {
			s.Warnf("%s", n.Text)
		}
	}
	return false, nil
}

// StopNode handles a "stop" message (DESIGN.md § The path of one step, 5:
// a Catch on a timed-out or failed worker state stops its ECS task before
// routing). The node's latest step is the one whose state was caught: a
// step still running (its state timed out, nobody completed it) and its
// running attempt are recorded failed with the caught error as the
// reason, then its worker is stopped. A step already ended (the worker or
// the dispatch failed it) keeps its record; its worker, if any is still
// known, is stopped all the same. Nothing is sent to the state machine.
func (s *Service) StopNode(ctx context.Context, m Message) error {
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
			att.Class, att.RetryAt = CaughtClass(m.Error), time.Time{}
			if err := s.Store.UpdateAttempt(ctx, att); err != nil {
				return err
			}
		}
		v, _ := json.Marshal(StepValue{StepRef: step.StepRef, Node: step.Node, Attempt: att.N, Outcome: "failed", Reason: reason})
		if err := s.FinishStep(ctx, step, stratus.StepFailed, "failed", v); err != nil {
			return err
		}
		s.Emit(Event{Type: EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Attempt: att.N, Outcome: "failed", Reason: reason})
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

// CompleteNonWorker completes a step no worker runs.
func (s *Service) CompleteNonWorker(ctx context.Context, step stratus.Step, outcome, note string) error {
	sv := StepValue{StepRef: step.StepRef, Node: step.Node, Outcome: outcome}
	v, _ := json.Marshal(sv)
	if err := s.FinishStep(ctx, step, stratus.StepCompleted, outcome, v); err != nil {
		return err
	}
	s.Emit(Event{Type: EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Outcome: outcome, Reason: note})
	return s.Tokens.SendTaskSuccess(ctx, step.TaskToken, v)
}

// SkipStep completes the step of a node the dispatch skips (a task's
// nodes.<id>.enabled: false, or a false `when`; worc reference.md §
// Conditional nodes). Its verdict and progress line say "skipped", and its
// value carries why (the report's Pipeline nodes skipped reads it). The
// outcome the state machine routes on is SkipOutcome: a skipped gate does
// not gate (issue 5 H1), where "skipped" would match no edge of a gate and
// park the run.
func (s *Service) SkipStep(ctx context.Context, step stratus.Step, node *flow.Node, why string) error {
	v, _ := json.Marshal(StepValue{StepRef: step.StepRef, Node: step.Node, Outcome: SkipOutcome(node), Reason: why})
	if err := s.FinishStep(ctx, step, stratus.StepCompleted, OutcomeSkipped, v); err != nil {
		return err
	}
	s.Emit(Event{Type: EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Outcome: OutcomeSkipped, Reason: why})
	return s.Tokens.SendTaskSuccess(ctx, step.TaskToken, v)
}

// OutcomeSkipped is the verdict of a skipped step.
const OutcomeSkipped = "skipped"

// SkipOutcome is the outcome a skipped node's Task state completes with,
// which its "<node>.route" Choice routes on: a gate's pass outcome
// (flow.PassOutcome: evaluator accept, checks and tool pass, hitl approval
// route:approve, hitl question done) — so the run goes down its
// pass/accept/route:approve edge, else the unconditional edge (the
// Choice's Default), else, for a gate without edges, to done — and
// "skipped" for an agent or a publish node, which route unconditionally.
func SkipOutcome(n *flow.Node) string {
	if pass := flow.PassOutcome(n); pass != "" {
		return pass
	}
	return OutcomeSkipped
}

func (s *Service) FinishStep(ctx context.Context, step stratus.Step, status, verdict string, value json.RawMessage) error {
	step.Status, step.Verdict, step.Value, step.EndedAt = status, verdict, value, s.NowUTC()
	return s.Store.UpdateStep(ctx, step)
}

// FailStep ends a step no worker completed (it could not be dispatched,
// launched or published): its value carries the reason, the progress line
// says it, and the state machine gets SendTaskFailure with errName.
func (s *Service) FailStep(ctx context.Context, step stratus.Step, attempt int, errName, reason string) error {
	v, _ := json.Marshal(StepValue{StepRef: step.StepRef, Node: step.Node, Attempt: attempt, Outcome: "failed", Reason: reason})
	s.FinishStep(ctx, step, stratus.StepFailed, "", v)
	var took time.Duration // a hitl that timed out shows its wait
	if !step.CreatedAt.IsZero() {
		took = s.NowUTC().Sub(step.CreatedAt)
	}
	s.Emit(Event{Type: EventStepEnded, RunID: step.RunID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Attempt: attempt, Outcome: "failed", Reason: reason, Duration: took})
	return s.Fail(ctx, step.TaskToken, errName, reason)
}

func (s *Service) Fail(ctx context.Context, token, name, cause string) error {
	return s.Tokens.SendTaskFailure(ctx, token, name, cause)
}

// LaunchAttempt creates attempt n of step, renders its prompt, mints its
// handle and starts its worker.
func (s *Service) LaunchAttempt(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step, n int) error {
	node := env.Flow.Node(step.Node)
	rendered, err := s.AttemptPrompt(ctx, run, env, step)
	var res stratus.Resolved
	if err == nil && !IsExec(node.Kind) {
		// Resolve the engine now, so a bad pin fails the step at once
		// rather than in the worker; the attempt records the resolution.
		res, _, err = Resolve(env.Config, env.Flow, node, env.Task.Front)
		if err == nil && n > 1 {
			res, err = s.RetryProvider(ctx, env, node, step, n, res)
		}
	}
	if err != nil {
		return s.FailStep(ctx, step, n, ErrDispatch, err.Error())
	}
	att := stratus.Attempt{
		TID: step.TID, N: n, Agent: node.ID, Status: stratus.AttemptRunning,
		System: systemPrompt(env, step), Prompt: rendered, StartedAt: s.NowUTC(), Resolved: res,
	}
	// Everything that can fail transiently is written before the attempt:
	// a redelivered message finds a step without an attempt and launches it
	// (Dispatch), while a step with an attempt belongs to the delivery that
	// created it.
	if err := s.Store.PutRenderSize(ctx, stratus.RenderSize{Agent: node.ID, Bytes: len(att.System), At: att.StartedAt}); err != nil {
		return err
	}
	// Audit copy of the rendered prompt, one per node run (seed 004 § Safety).
	logDir := path.Join(".stratus/logs", run.TaskID, "stages", step.Node, fmt.Sprintf("run-%06d", step.Visit))
	if err := s.Files(run).Put(ctx, path.Join(logDir, "rendered-prompt.md"), []byte(Redact(rendered))); err != nil {
		return fmt.Errorf("save rendered prompt: %w", err)
	}
	// The handle outlives the engine's own deadline (plus the submit grace):
	// an engine that reports near its deadline must still be able to submit.
	ttl := s.HandleLifetime(env, node, res)
	// The worker starts with a one-time bootstrap value, exchanged for its
	// handle (ExchangeBootstrap): what its launch carries is worthless
	// once it has started.
	h := stratus.Handle{Handle: newBootstrap(), RunID: run.ID, TID: step.TID, Attempt: n, ExpiresAt: s.NowUTC().Add(ttl)}
	if err := s.Store.PutHandle(ctx, h); err != nil {
		return err
	}
	if err := s.Store.CreateAttempt(ctx, att); err != nil {
		return err
	}
	s.Emit(Event{Type: EventStepStarted, RunID: run.ID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Attempt: n})
	spec := launch.Spec{APIURL: s.APIURL, Handle: h.Handle, TaskID: step.TID, Attempt: n, NetworkAccess: res.NetworkAccess}
	spec.LogPath = s.RunnerLog(run, step)
	spec.SpoolDir = spoolDir(spec.LogPath)
	spec.OnExit = func(err error) { s.WorkerExited(step.TID, n, err, spec.LogPath) }
	// HeartbeatSeconds runs from the dispatch message, and the runner's
	// first stats come only once its task runs (Fargate: 30-90 s and the
	// image pull): the step's task token is heartbeaten while RunTask
	// retries and once it succeeds (issue 14 § 9).
	spec.Waiting = func() error { return s.Heartbeat(ctx, step) }
	s.watchStarted(ctx, run, env, step.TID, n)
	id, err := s.Launcher.Launch(ctx, spec)
	if err == nil {
		s.Heartbeat(ctx, step)
	}
	if err != nil {
		att.Status, att.Reason, att.EndedAt = stratus.AttemptFailed, err.Error(), s.NowUTC()
		att.Class = failclass.Infrastructure // the launch failed
		s.Store.UpdateAttempt(ctx, att)
		name := ErrLaunchFailed
		if errors.Is(err, launch.ErrInfrastructure) {
			name = ErrInfrastructure
		}
		return s.FailStep(ctx, step, n, name, err.Error())
	}
	s.rememberWorker(step.TID, id)
	return nil
}

// Heartbeat sends the step's task token a Heartbeat (none for a step
// without one); a failure is a warning: the runner's stats Heartbeat too.
//
// It returns the Heartbeat's error when it is final (coded: the task timed
// out, its token is no longer valid, its execution ended), which tells a
// launch that still waits to give up (launch.Spec.Waiting); a transient
// one is logged and nil.
func (s *Service) Heartbeat(ctx context.Context, step stratus.Step) error {
	if step.TaskToken == "" || s.Tokens == nil {
		return nil
	}
	err := s.Tokens.SendTaskHeartbeat(ctx, step.TaskToken)
	if err == nil {
		return nil
	}
	s.Warnf("heartbeat of %s after its launch: %v", step.StepRef, err)
	if stratus.ErrorCode(err) != "" {
		return err
	}
	return nil
}

// RenderPrompt renders the node's role file with the run's variables.
func (s *Service) RenderPrompt(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (string, error) {
	node := env.Flow.Node(step.Node)
	_, tmpl, err := ReadRoleFile(env.FlowDir, node.RoleFile)
	if err != nil {
		return "", err
	}
	vars, err := s.TemplateVars(ctx, run, env, step)
	if err != nil {
		return "", err
	}
	// An agent that asked a human reads the reply (hitl.go); one that may
	// not ask has none to read (and no need to read the run's steps).
	human := ""
	if flow.AsksHuman(node) {
		if human, err = s.HumanReplySection(ctx, run.ID, step); err != nil {
			return "", err
		}
	}
	return prompt.Render(tmpl, vars, OutputNodes(env.Flow)) + human, nil
}

// systemPrompt is the baked system text of an attempt: who the worker is and
// how its output travels (seed 000 § Authoring checklist: end with the submit,
// never write the deliverable to a self-chosen path).
func systemPrompt(env *RunEnv, step stratus.Step) string {
	return fmt.Sprintf("You are the %q step (%s) of the Stratus flow %q for task %q.\n"+
		"Your final report is submitted for you: never write your deliverable to a path you choose.\n"+
		"To hand over a named file, stage it as a part: POST $STRATUS_API_URL/v1/worker/artifact?name=<file name> "+
		"with the header `Authorization: Bearer $STRATUS_HANDLE` and the file's bytes as the body.\n",
		step.Node, step.StepRef, env.Flow.Name, env.Task.ID)
}

// spoolDir is where the runner whose log is logPath keeps a report it
// could not deliver: embedded, beside its log, in the state dir
// (docs/security.md § Files under .stratus); "" without a log (on AWS).
func spoolDir(logPath string) string {
	if logPath == "" {
		return ""
	}
	return filepath.Dir(logPath)
}

// RunnerLog is where a step's runner writes its log in embedded mode ("" on
// AWS, where the ECS task's log goes to CloudWatch).
func (s *Service) RunnerLog(run stratus.Run, step stratus.Step) string {
	if s.LocalLogs == "" {
		return ""
	}
	return filepath.Join(s.LocalLogs, run.TaskID, "stages", step.Node, fmt.Sprintf("run-%06d", step.Visit), "runner.log")
}
