package core

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
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
	// sent by the worker API through Service.Queue)
	// carries: the step to observe (Node is its node) and why.
	StepRef string `json:"step_ref,omitempty"`
	Why     string `json:"why,omitempty"`
}

// KindObserve is the kind of a dispatch message that starts a supervisor
// observation turn of a step that ended (docs/contracts.md § What the
// supervisor layer does).
const KindObserve = "supervisor.observe"

// CaughtError is the Catch's view of a failed state: {Error, Cause}.
type CaughtError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// Error names a dispatch completes a Task state with (SendTaskFailure).
const (
	ErrLaunchFailed = "stratus.LaunchFailed"   // the worker could not be started
	ErrWorkerFailed = "stratus.WorkerFailed"   // the worker ended without a report (docs/contracts.md § Terminal classification)
	ErrUnsupported  = "stratus.Unsupported"    // a node kind this build cannot run
	ErrPublish      = "stratus.PublishFailed"  // the publish node could not write its report
	ErrMergeBlocked = compiler.ErrMergeBlocked // the publish node's pull request is open, its merge refused
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

// FinishStep records step ended now with status, verdict and value (the
// step value the Task state completes with). Errors: the store's.
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

// Fail completes the Task state waiting on token with SendTaskFailure:
// error name (a stratus.* name the machine's Retry and Catch know) and
// cause. Errors: the task-token port's (the token is unknown, expired or
// its execution ended).
func (s *Service) Fail(ctx context.Context, token, name, cause string) error {
	return s.Tokens.SendTaskFailure(ctx, token, name, cause)
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

// SpoolDir is where the runner whose log is logPath keeps a report it
// could not deliver: embedded, beside its log, in the state dir
// (docs/security.md § Files under .stratus); "" without a log (on AWS).
func SpoolDir(logPath string) string {
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

// Final fences caller c and makes its attempt's Final of body: the
// `@file:` sentinel resolved (ResolveFileSentinel), stamped now, and the
// attempt as it ends with it (EndedAt). Nothing is written. Errors: Fence's,
// ResolveFileSentinel's.
func (s *Service) Final(ctx context.Context, c *Caller, body []byte, ok bool) (stratus.OutputEvent, stratus.Attempt, error) {
	if err := s.Fence(ctx, c); err != nil {
		return stratus.OutputEvent{}, stratus.Attempt{}, err
	}
	body, err := s.ResolveFileSentinel(c, body)
	if err != nil {
		return stratus.OutputEvent{}, stratus.Attempt{}, err
	}
	final := stratus.OutputEvent{TID: c.Step.TID, Attempt: c.Attempt.N, Kind: stratus.OutputFinal, Body: body, OK: ok, At: s.NowUTC()}
	att := c.Attempt
	att.EndedAt = final.At
	return final, att, nil
}
