package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/retry"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/resolve"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// LaunchAttempt creates attempt n of step, renders its prompt, mints its
// handle and starts its worker.
func LaunchAttempt(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, n int) error {
	node := env.Flow.Node(step.Node)
	rendered, err := vars.AttemptPrompt(ctx, s, run, env, step)
	var res stratus.Resolved
	if err == nil && !core.IsExec(node.Kind) {
		// Resolve the engine now, so a bad pin fails the step at once
		// rather than in the worker; the attempt records the resolution.
		res, _, err = resolve.Resolve(env.Config, env.Flow, node, env.Task.Front)
		if err == nil && n > 1 {
			res, err = RetryProvider(ctx, s, env, node, step, n, res)
		}
	}
	if err != nil {
		return s.FailStep(ctx, step, n, core.ErrDispatch, err.Error())
	}
	att := stratus.Attempt{
		TID: step.TID, N: n, Agent: node.ID, Status: stratus.AttemptRunning,
		System: vars.SystemPrompt(env, step), Prompt: rendered, StartedAt: s.NowUTC(), Resolved: res,
	}
	// Everything that can fail transiently is written before the attempt:
	// a redelivered message finds a step without an attempt and launches it
	// (Dispatch), while a step with an attempt belongs to the delivery that
	// created it.
	if err := s.Store.PutRenderSize(ctx, stratus.RenderSize{Agent: node.ID, Bytes: len(att.System), At: att.StartedAt}); err != nil {
		return err
	}
	// Audit copy of the rendered prompt, one per node run
	// (docs/contracts.md § Prompt templates).
	logDir := path.Join(".stratus/logs", run.TaskID, "stages", step.Node, fmt.Sprintf("run-%06d", step.Visit))
	if err := s.Files(run).Put(ctx, path.Join(logDir, "rendered-prompt.md"), []byte(core.Redact(rendered))); err != nil {
		return fmt.Errorf("save rendered prompt: %w", err)
	}
	// The handle outlives the engine's own deadline (plus the submit grace):
	// an engine that reports near its deadline must still be able to submit.
	ttl := s.HandleLifetime(env, node, res)
	// The worker starts with a one-time bootstrap value, exchanged for its
	// handle (ExchangeBootstrap): what its launch carries is worthless
	// once it has started; a worker launched in this process's memory gets
	// the handle itself (LaunchCredential).
	h := s.LaunchCredential(run.ID, step.TID, n, ttl)
	if err := s.Store.PutHandle(ctx, h); err != nil {
		return err
	}
	if err := s.Store.CreateAttempt(ctx, att); err != nil {
		return err
	}
	s.Emit(core.Event{Type: core.EventStepStarted, RunID: run.ID, Node: step.Node, StepRef: step.StepRef, TID: step.TID, Attempt: n})
	spec := launch.Spec{APIURL: s.APIURL, Handle: h.Handle, TaskID: step.TID, Attempt: n, NetworkAccess: res.NetworkAccess, Publisher: node.Kind == flow.KindPublish}
	spec.LogPath = s.RunnerLog(run, step)
	spec.SpoolDir = core.SpoolDir(spec.LogPath)
	spec.OnExit = func(err error) { WorkerExited(s, step.TID, n, err, spec.LogPath) }
	// HeartbeatSeconds runs from the dispatch message, and the runner's
	// first stats come only once its task runs (Fargate: 30-90 s and the
	// image pull): the step's task token is heartbeaten while RunTask
	// retries and once it succeeds (pinned by
	// TestDispatch_HeartbeatsOnceTheWorkerIsLaunched).
	spec.Waiting = func() error { return s.Heartbeat(ctx, step) }
	s.WatchStarted(ctx, run, env, step.TID, n)
	id, err := s.Launcher.Launch(ctx, spec)
	if err == nil {
		s.Heartbeat(ctx, step)
	}
	if err != nil {
		att.Status, att.Reason, att.EndedAt = stratus.AttemptFailed, err.Error(), s.NowUTC()
		att.Class = failclass.Infrastructure // the launch failed
		s.Store.UpdateAttempt(ctx, att)
		name := core.ErrLaunchFailed
		if errors.Is(err, launch.ErrInfrastructure) {
			name = core.ErrInfrastructure
		}
		return s.FailStep(ctx, step, n, name, err.Error())
	}
	s.RememberWorker(step.TID, id)
	return nil
}

// Rekick starts a new attempt of a running step: attempt n+1 with a new
// handle and worker. The previous attempt is fenced from then on (its
// writes get 409), and a fetch shows the new attempt. Errors: ECONFLICT when
// the step is no longer running.
func Rekick(ctx context.Context, s *core.Service, tid string) (int, error) {
	st, run, env, err := s.StepContext(ctx, tid)
	if err != nil {
		return 0, err
	}
	if st.Status != stratus.StepRunning || stratus.RunTerminal(run.Status) {
		return 0, stratus.Errorf(stratus.ECONFLICT, "step %s is %s (run %s); only a running step can be rekicked", st.StepRef, st.Status, run.Status)
	}
	latest, err := s.Store.LatestAttempt(ctx, tid)
	if err != nil {
		return 0, err
	}
	s.StopWorker(launch.WithStopCause(ctx, fmt.Sprintf("attempt %d of the step replaced it (rekicked)", latest.N+1)), tid)
	return latest.N + 1, LaunchAttempt(ctx, s, run, env, st, latest.N+1)
}

// policy is the run's retry policy, its fallbacks cut to the providers
// that can start here (CanLaunch): a step never hops to an engine that
// cannot launch, which would fail it for want of a command rather than of
// a provider.
func policy(s *core.Service, env *core.RunEnv) retry.Policy {
	p := retry.FromConfig(env.Config)
	if s.CanLaunch != nil {
		p.Fallbacks = slices.DeleteFunc(p.Fallbacks, func(name string) bool { return !s.CanLaunch(env.Config, name) })
	}
	return p
}

// RetryProvider resolves attempt n (> 1) of step on the provider the
// retry policy names after the step's attempts before it: the same one
// after a retry, the next of the fallback order after a hop, the first
// not known to be rate-limited after a park.
func RetryProvider(ctx context.Context, s *core.Service, env *core.RunEnv, node *flow.Node, step stratus.Step, n int, res stratus.Resolved) (stratus.Resolved, error) {
	history, err := attemptHistory(ctx, s, step.TID, n-1)
	if err != nil {
		return res, err
	}
	p := policy(s, env).Provider(resolve.Pinned(node, env.Task.Front), history, s.NowUTC())
	if p == "" || p == res.Provider {
		return res, nil
	}
	res, _, err = resolve.ResolveOn(env.Config, env.Flow, node, env.Task.Front, p)
	return res, err
}

// attemptHistory is what the retry policy reads of attempts 1..n of a
// step, oldest first.
func attemptHistory(ctx context.Context, s *core.Service, tid string, n int) ([]retry.Attempt, error) {
	out := make([]retry.Attempt, 0, n)
	for i := 1; i <= n; i++ {
		a, err := s.Store.GetAttempt(ctx, tid, i)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue // a number a racing launch never wrote
		} else if err != nil {
			return nil, err
		}
		out = append(out, historyOf(a))
	}
	return out, nil
}

func historyOf(a stratus.Attempt) retry.Attempt {
	return retry.Attempt{Provider: a.Resolved.Provider, Class: retry.Class(a.Class), RetryAt: a.RetryAt, Started: a.StartedAt, Ended: a.EndedAt}
}

// RetryFailure applies the retry policy to att, an attempt of an agent or
// evaluator step just recorded failed with a transient class: the step
// stays running and its Task state fails with the policy's error name,
// which the state's Retry retries after the policy's delay (on the same
// or the next provider: reenter, retryProvider); or the step parks until
// the time the policy names (stratus.Blocked: "<node>.park" and
// "<node>.wait" wait it out and enter the node again); or, parked
// max_blocked_s in all, it fails with stratus.BlockedTimeout (the run ends
// manual_action_required, resumable). handled is false for a failure the
// policy does not take (not transient, or another kind of step).
func RetryFailure(ctx context.Context, s *core.Service, c *core.Caller, att stratus.Attempt, reason string) (sv *core.StepValue, handled bool, err error) {
	node := c.Env.Flow.Node(c.Step.Node)
	if node == nil || (node.Kind != "agent" && node.Kind != "evaluator") || !retry.Class(att.Class).Transient() {
		return nil, false, nil
	}
	history, err := attemptHistory(ctx, s, c.Step.TID, att.N-1)
	if err != nil {
		return nil, true, err
	}
	history = append(history, historyOf(att))
	now := s.NowUTC()
	d := policy(s, c.Env).Decide(resolve.Pinned(node, c.Env.Task.Front), history, now)
	name, cause, ok := compiler.TaskFailure(d)
	if !ok {
		return nil, false, nil
	}
	sv = &core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Reason: reason}
	status, event := stratus.StepRunning, core.EventStepRetrying
	switch d.Action {
	case retry.Retry, retry.Hop:
		sv.Outcome = "retrying"
		sv.Reason = fmt.Sprintf("attempt %d on %s failed (%s): attempt %d runs on %s in %s; %s",
			att.N, att.Resolved.Provider, att.Class, att.N+1, d.Provider, d.Delay.Round(time.Second), reason)
	case retry.Park:
		status, event, sv.Outcome, sv.RetryAt = stratus.StepParked, core.EventStepParked, "parked", d.Until.UTC()
		sv.Reason = fmt.Sprintf("%s; parked %s in all so far", d.Reason, d.Blocked.Round(time.Second))
	case retry.GiveUp:
		status, event, sv.Outcome = stratus.StepFailed, core.EventStepEnded, "failed"
		sv.Reason = d.Reason + "; " + reason
	}
	sv.Reason = core.ClipReason(sv.Reason, core.MaxReasonBytes, " [cut]")
	raw, _ := json.Marshal(sv)
	if status == stratus.StepFailed {
		err = s.FinishStep(ctx, c.Step, status, "failed", raw)
	} else {
		st := c.Step
		st.Status, st.Value = status, raw // open: no EndedAt
		err = s.Store.UpdateStep(ctx, st)
	}
	if err != nil {
		return nil, true, err
	}
	if event == core.EventStepEnded {
		EmitEnded(s, c, att, "failed", sv.Reason)
	} else {
		s.Emit(core.Event{Type: event, RunID: c.Run.ID, Node: c.Step.Node, StepRef: c.Step.StepRef, TID: c.Step.TID, Attempt: att.N,
			Terminal: att.Terminal, Outcome: sv.Outcome, Reason: sv.Reason, Duration: att.EndedAt.Sub(att.StartedAt),
			PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD})
	}
	if err := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, name, cause); err != nil {
		return nil, true, stratus.Errorf(stratus.ECONFLICT, "failure of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, true, nil
}

// WorkerExited fails an attempt whose worker ended without delivering a
// result (a crash, a refused prompt fetch, a kill), instead of leaving its
// state to wait for the heartbeat to lapse.
func WorkerExited(s *core.Service, tid string, n int, exitErr error, logPath string) {
	failEndedWorker(context.Background(), s, tid, n, func() string {
		// Read only for an attempt it fails: a worker that delivered its
		// result (every step's common end) costs no read of its log.
		status := "exit status 0"
		if exitErr != nil {
			status = exitErr.Error()
		}
		reason := fmt.Sprintf("worker exited (%s) without a result", status)
		if tail := core.LogTail(logPath, 3); tail != "" {
			reason += ": " + tail
		}
		if logPath != "" {
			reason += " (log: " + logPath + ")"
		}
		return reason
	})
}

// failEndedWorker fails attempt n of tid for the reason why returns, when
// it is still running and still the step's latest and its run goes on;
// otherwise it does nothing (the attempt ended some other way first) and
// never calls why. Errors: reading or writing the records.
func failEndedWorker(ctx context.Context, s *core.Service, tid string, n int, why func() string) error {
	att, err := s.Store.GetAttempt(ctx, tid, n)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND || err == nil && att.Status != stratus.AttemptRunning {
		return nil
	} else if err != nil {
		return err
	}
	latest, err := s.Store.LatestAttempt(ctx, tid)
	if err != nil {
		return err
	}
	if latest.N != n {
		return nil // superseded by a rekick
	}
	st, run, env, err := s.StepContext(ctx, tid)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	if stratus.RunTerminal(run.Status) {
		return nil
	}
	c := &core.Caller{Step: st, Attempt: att, Run: run, Env: env}
	att.EndedAt = s.NowUTC()
	_, err = FailAttempt(ctx, s, c, att, core.Seen(failclass.Infrastructure, "worker exited without a result"), why())
	if stratus.ErrorCode(err) == stratus.ECONFLICT {
		return nil // recorded; its state had already moved on
	}
	return err
}

// WorkerTaskStopped is told that the worker task of attempt n of dispatch task
// tid, launched with bootstrap value bootstrap, has stopped, and why (ECS's
// stoppedReason, the container's exit code and last lines: "ECS Task State
// Change", the Amazon ECS Developer Guide's "Amazon ECS task state change
// events"; docs/architecture.md § The path of one step). Unless the attempt has
// ended some other way first, it fails now (class infrastructure; its Task state
// fails with stratus.WorkerFailed, so the run takes the flow's failure path and
// a resume starts the step again), instead of at its heartbeat's lapse: a worker
// that stopped before it exchanged its bootstrap value never fetched its prompt
// (the value is spent here, so a late start of the same task is refused); one
// that had started stopped without a result. tid and n may be unknown ("", 0: a
// task launched before the attempt was carried): then only a worker that never
// started is failed. Errors: reading or writing the records (the event is
// delivered again).
func WorkerTaskStopped(ctx context.Context, s *core.Service, bootstrap, tid string, n int, why string) error {
	if strings.HasPrefix(bootstrap, captoken.BootstrapPrefix) {
		b, err := s.Store.TakeHandle(ctx, bootstrap)
		if err == nil {
			return failEndedWorker(ctx, s, b.TID, b.Attempt, func() string { return "worker task stopped before it fetched its prompt: " + why })
		}
		if stratus.ErrorCode(err) != stratus.ENOTFOUND {
			return err
		}
	}
	if tid == "" || n <= 0 {
		return nil
	}
	return failEndedWorker(ctx, s, tid, n, func() string { return "worker task stopped without a result: " + why })
}

// NotPersisted ends a step whose Final was recorded (CompleteAttempt) but
// whose output did not persist — a projection file, an output file or the
// step's own completed record refused by the sink or the store (err) —
// the way docs/security.md § Output that did not persist says: the attempt
// and the step are recorded failed, the reason naming the step, the cause
// (for a full disk: "the disk is full", ENOSPC or EDQUOT, and the file) and
// that a resume runs it again. The Task state never succeeds: it fails
// with ErrProjection, or, for a full disk where DiskFull is set
// (embedded), it is not told and DiskFull stops the run, interrupted. A
// record the store refuses too is warned about: the step then stays open
// (running), which the run's end cancels, and a resume runs a canceled
// step again all the same.
//
// The error returned is a *stratus.Error for the worker — ENOSPACE (507)
// for a full disk, else EINTERNAL — whose message leaks no path, wrapping
// ErrNotPersisted and err for the server's logs.
func NotPersisted(ctx context.Context, s *core.Service, c *core.Caller, att stratus.Attempt, err error) error {
	ctx = context.WithoutCancel(ctx) // a worker gone away does not leave the step open
	cause, public, code, fix := err.Error(), "its files could not be written", stratus.EINTERNAL, "fix that"
	if stratus.StorageFull(err) {
		cause = "the disk is full (" + fullErrno(err) + "): " + cause
		public, code, fix = "the server's disk is full", stratus.ENOSPACE, "free space"
	}
	reason := fmt.Sprintf("its output did not persist: %s; %s, then resume the run: %s runs again", cause, fix, c.Step.StepRef)
	att.Status, att.Reason = stratus.AttemptFailed, reason
	att.Class, att.RetryAt = failclass.Infrastructure, time.Time{} // the server's own failure
	if uerr := s.Store.UpdateAttempt(ctx, att); uerr != nil {
		s.WarnCall(c, "%s: record the attempt failed: %v", c.Step.StepRef, uerr)
	}
	v, _ := json.Marshal(core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Outcome: "failed", Reason: reason})
	if ferr := s.FinishStep(ctx, c.Step, stratus.StepFailed, "failed", v); ferr != nil {
		s.WarnCall(c, "%s: record the step failed: %v; it stays open until the run ends", c.Step.StepRef, ferr)
	}
	EmitEnded(s, c, att, "failed", reason)
	// A full disk stops the run wherever it is met (DiskFull): the state
	// is not told then, so that nothing routes the failure while the run
	// stops.
	if !s.ReportDiskFull(fmt.Errorf("%s: its output did not persist (%s): %w", c.Step.StepRef, fullErrno(err), err)) {
		if terr := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, core.ErrProjection, c.Step.StepRef+" failed: "+reason); terr != nil {
			s.WarnCall(c, "%s: tell its state it failed: %v", c.Step.StepRef, terr)
		}
	}
	pub := stratus.Errorf(code, "the output of %s was recorded, but %s: the step failed; %s, then resume the run", c.Step.StepRef, public, fix)
	return fmt.Errorf("%w (%w: %w)", pub, core.ErrNotPersisted, err)
}

// fullErrno names what says a disk is full in err: ENOSPC, EDQUOT, or
// SQLITE_FULL (stratus.StorageFull).
func fullErrno(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "ENOSPC"
	case errors.Is(err, syscall.EDQUOT):
		return "EDQUOT"
	case strings.Contains(err.Error(), "database or disk is full"):
		return "SQLITE_FULL"
	}
	return "ENOSPACE"
}

// FailAttempt records att failed as f says (its terminal, class and
// reset) with reason, fails its step and its Task state (ErrWorkerFailed:
// what happens next is the state machine's, whatever the class).
func FailAttempt(ctx context.Context, s *core.Service, c *core.Caller, att stratus.Attempt, f core.Failure, reason string) (*core.StepValue, error) {
	f = f.Complete(reason, s.NowUTC().Local())
	if c.Step.Kind == core.SupervisorKind {
		return s.Layers.SupervisorFailed(ctx, c, att, f, reason) // internal/worker/supervise
	}
	// Bounded whatever its source (a worker's report, a runner log's
	// lines, a launch error): see MaxReasonBytes.
	reason = core.ClipReason(reason, core.MaxReasonBytes, " [cut]")
	att.Status, att.Terminal, att.Reason = stratus.AttemptFailed, f.Terminal, reason
	att.Class, att.RetryAt = f.Verdict.Class, f.Verdict.RetryAt
	if err := s.Store.UpdateAttempt(ctx, att); err != nil {
		return nil, err
	}
	if sv, handled, err := RetryFailure(ctx, s, c, att, reason); handled {
		return sv, err // RetryFailure: a transient failure the retry policy takes
	}
	sv := &core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Outcome: "failed", Reason: reason}
	raw, _ := json.Marshal(sv)
	if err := s.FinishStep(ctx, c.Step, stratus.StepFailed, "failed", raw); err != nil {
		return nil, err
	}
	EmitEnded(s, c, att, "failed", reason)
	if err := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, core.ErrWorkerFailed, reason); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "failure of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, nil
}

// EmitEnded reports the end of attempt att of c's step as a step_ended
// event (core.EventStepEnded) with outcome and reason: its child terminal,
// its duration (EndedAt - StartedAt) and its tokens and cost in US dollars.
// The event also reaches the supervisor layer (core.Layers.StepEnded).
func EmitEnded(s *core.Service, c *core.Caller, att stratus.Attempt, outcome, reason string) {
	s.Emit(core.Event{Type: core.EventStepEnded, RunID: c.Run.ID, Node: c.Step.Node, StepRef: c.Step.StepRef, TID: c.Step.TID, Attempt: att.N,
		Terminal: att.Terminal, Outcome: outcome, Reason: reason, Duration: att.EndedAt.Sub(att.StartedAt),
		PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD})
}
