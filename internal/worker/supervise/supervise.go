package supervise

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/resolve"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// auditOn reports whether the run records the prompt audit: the task's
// front matter prompt_audit when it sets one (task wins, both ways), else
// config prompt_audit.
func auditOn(env *core.RunEnv) bool {
	if env.Task != nil {
		if v, ok := env.Task.Front["prompt_audit"].(bool); ok {
			return v
		}
	}
	return env.Config != nil && env.Config.PromptAudit
}

// writeAudit writes the prompt audit of one step run that ended.
func writeAudit(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, ordinal int) error {
	var atts []stratus.Attempt
	for n := 1; ; n++ {
		a, err := s.Store.GetAttempt(ctx, step.TID, n)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			break
		} else if err != nil {
			return err
		}
		atts = append(atts, a)
	}
	if len(atts) == 0 {
		return nil // it never launched: no prompt reached an agent
	}
	settled := atts[len(atts)-1]
	res := settled.Resolved
	rec := core.AuditRecord{TaskID: run.TaskID, RunID: run.ID, StepRef: step.StepRef, Node: step.Node, Kind: step.Kind, Ordinal: ordinal,
		Route: "primary", Provider: res.Provider, Model: res.Model, Reasoning: res.Reasoning,
		PermissionProfile: res.PermissionProfile, NetworkAccess: res.NetworkAccess, Outcome: step.Verdict, SkillsRequired: []string{}}
	if res.Model != res.Configured.Model {
		m := res.Configured.Model
		rec.ConfiguredModel = &m
	}
	if res.Reasoning != res.Configured.Reasoning {
		r := res.Configured.Reasoning
		rec.ConfiguredReasoning = &r
	}
	if node := env.Flow.Node(step.Node); node != nil {
		if node.Provider != "" {
			rec.Route = "flow"
		}
		rec.SkillsAllowed = node.AllowSkills
		if len(node.Skills) > 0 {
			rec.SkillsRequired = node.Skills
		}
	}
	if p := resolve.TaskOverrides(env.Task.Front, step.Node)["provider"]; p != "" {
		rec.Route = "task"
	}
	if rec.Outcome == "" {
		rec.Outcome = step.Status
	}
	if !step.EndedAt.IsZero() {
		rec.EndedAt = step.EndedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	for _, a := range atts {
		aa := core.AuditAttempt{Attempt: a.N, Provider: a.Resolved.Provider, Model: a.Resolved.Model, Reasoning: a.Resolved.Reasoning, Status: a.Status}
		if a.Status == stratus.AttemptFailed {
			class := a.Terminal
			if class == "" {
				class = "Failed"
			}
			aa.ErrorClass = &class
		}
		rec.Attempts = append(rec.Attempts, aa)
	}
	prompt := core.Redact(settled.Prompt)

	dir := path.Join(report.Dir(run.TaskID), "prompt-audit")
	var md bytes.Buffer
	meta, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(&md, "# Prompt audit: %s\n\n```json\n%s\n```\n\n## Prompt\n\n", step.StepRef, meta)
	md.WriteString(prompt) // last and unescaped: its own fences cannot break the header
	if err := s.Files(run).Put(ctx, path.Join(dir, fmt.Sprintf("%06d-%s.md", ordinal, step.Node)), md.Bytes()); err != nil {
		return err
	}

	rec.Prompt = prompt
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	s.Supervisor.Timeline.Lock()
	defer s.Supervisor.Timeline.Unlock()
	key := path.Join(dir, core.TimelineFile)
	old, err := s.Files(run).Get(ctx, key)
	if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return err
	}
	return s.Files(run).Put(ctx, key, append(append(old, line...), '\n'))
}

// supervisorResolved resolves a supervisor turn's engine (docs/contracts.md §
// The supervisor): config supervisor.provider or the primary; the phase's model
// and reasoning over the provider's; observe reasoning low by default and capped
// to high; permission read-only, no network, in code.
func supervisorResolved(cfg *config.Config, job string) (stratus.Resolved, config.Provider, error) {
	name, prov, err := cfg.Provider(cfg.Supervisor.Provider)
	if err != nil {
		return stratus.Resolved{}, config.Provider{}, stratus.FieldErrorf(stratus.EINVALID, "supervisor.provider", "%s", stratus.ErrorMessage(err))
	}
	prov = prov.Resolved()
	phase := cfg.Supervisor.Finalize
	switch job {
	case report.JobObserve:
		phase = config.Phase{Model: cfg.Supervisor.Observe.Model, Reasoning: cfg.Supervisor.Observe.Reasoning}
		if phase.Reasoning == "" {
			if ok, _ := prov.SupportsReasoning(name, "low"); ok {
				phase.Reasoning = "low"
			}
		}
		if phase.Reasoning == "xhigh" || phase.Reasoning == "max" {
			phase.Reasoning = "high"
		}
	case report.JobHandoff:
		phase = cfg.Supervisor.Handoff
	}
	r := stratus.Resolved{
		Provider:          name,
		Model:             resolve.First(phase.Model, prov.Model),
		Reasoning:         resolve.First(phase.Reasoning, prov.Reasoning),
		PermissionProfile: flow.ReadOnly,
		TimeoutSeconds:    resolve.DefaultEngineTimeoutSeconds,
		Configured:        stratus.ModelChoice{Model: prov.Model, Reasoning: prov.Reasoning},
	}
	if prov.TimeoutSeconds > 0 {
		r.TimeoutSeconds = prov.TimeoutSeconds
	}
	return r, prov, nil
}

// createSupervisorStep creates the synthetic step of one supervisor turn
// for step `of` (the publish step a finalize turn runs for, or the step an
// observation looks at). created is false when a turn of that job already
// exists for it. The store numbers the turn (store.Store.CreateNextStep:
// the run's turns are visits 1, 2, … of SupervisorNode), so dispatch
// instances creating turns of one run at once each get a number of their
// own; the job's ordinal is one more than that of the job's latest turn
// before it, all of which exist when the number is given — found among
// the newest turns (store.NewestWhere), not the run's steps (README.md §
// Performance).
func createSupervisorStep(ctx context.Context, s *core.Service, run stratus.Run, job string, of stratus.Step, token string) (stratus.Step, bool, error) {
	sum := sha256.Sum256([]byte("supervisor\x00" + job + "\x00" + of.TID))
	dedup := hex.EncodeToString(sum[:])
	return s.Store.CreateNextStep(ctx, run.ID, core.SupervisorNode, dedup, func(n int) (stratus.Step, error) {
		prev, found, err := store.NewestWhere(ctx, s.Store, run.ID, core.SupervisorNode, 4, func(st stratus.Step) bool {
			return st.Visit < n && core.SupervisorValue(st).Job == job
		})
		if err != nil {
			return stratus.Step{}, err
		}
		jobVisit := 1
		if found {
			jobVisit = core.SupervisorValue(prev).JobVisit + 1
		}
		ref := fmt.Sprintf("supervisor#%d", n)
		v, _ := json.Marshal(report.SupervisorValue{StepRef: ref, Node: core.SupervisorNode, Job: job, JobVisit: jobVisit, For: of.TID, ForRef: of.StepRef})
		return stratus.Step{
			TID:       fmt.Sprintf("%s.%s.%d", run.ID, core.SupervisorNode, n),
			RunID:     run.ID,
			Node:      core.SupervisorNode,
			Kind:      report.Kind,
			Visit:     n,
			StepRef:   ref,
			DedupKey:  dedup,
			TaskToken: token,
			Status:    stratus.StepRunning,
			Value:     v,
			CreatedAt: s.NowUTC(),
		}, nil
	})
}

// launchSupervisor creates attempt 1 of a supervisor step with its prompt
// and starts its worker.
func launchSupervisor(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, job, rendered string) error {
	res, _, err := supervisorResolved(env.Config, job)
	if err != nil {
		return err
	}
	att := stratus.Attempt{TID: step.TID, N: 1, Agent: "supervisor", Status: stratus.AttemptRunning,
		System: supervisorSystem(env, step, job), Prompt: rendered, StartedAt: s.NowUTC(), Resolved: res}
	if err := s.Store.CreateAttempt(ctx, att); err != nil {
		return err
	}
	logDir := path.Join(report.Dir(run.TaskID), "supervisor", fmt.Sprintf("run-%06d", step.Visit))
	if err := s.Files(run).Put(ctx, path.Join(logDir, "rendered-prompt.md"), []byte(core.Redact(rendered))); err != nil {
		return fmt.Errorf("save rendered prompt: %w", err)
	}
	// As long as the turn's engine deadline allows (it was the token TTL,
	// 600 s, whatever the supervisor's timeout: a longer turn lost its
	// credential mid-way).
	h := s.LaunchCredential(run.ID, step.TID, 1, s.HandleLifetime(env, nil, res))
	if err := s.Store.PutHandle(ctx, h); err != nil {
		return err
	}
	s.Emit(core.Event{Type: core.EventSupervisorStarted, RunID: run.ID, Node: job, StepRef: step.StepRef, Attempt: 1, Reason: core.SupervisorValue(step).ForRef})
	spec := launch.Spec{APIURL: s.APIURL, Handle: h.Handle, TaskID: step.TID, Attempt: 1}
	if s.LocalLogs != "" {
		spec.LogPath = filepath.Join(s.LocalLogs, run.TaskID, "supervisor", fmt.Sprintf("run-%06d", step.Visit), "runner.log")
	}
	spec.SpoolDir = core.SpoolDir(spec.LogPath)
	spec.OnExit = func(err error) { attempt.WorkerExited(s, step.TID, 1, err, spec.LogPath) }
	// A launch that waits (capacity, a busy runner pool) keeps the state
	// the turn holds alive: the finalize turn holds publish's token.
	spec.Waiting = func() error { return s.Heartbeat(ctx, step) }
	s.WatchStarted(ctx, run, env, step.TID, 1)
	id, err := s.Launcher.Launch(ctx, spec)
	if err != nil {
		att.Status, att.Terminal, att.Reason, att.EndedAt = stratus.AttemptFailed, "Failed", err.Error(), s.NowUTC()
		att.Class = failclass.Infrastructure // the launch failed
		s.Store.UpdateAttempt(ctx, att)
		return fmt.Errorf("launch the supervisor's worker: %w", err)
	}
	s.RememberWorker(step.TID, id)
	return nil
}

// capReached is why run may spend no more (its cost or token cap reached:
// lifecycle.CapReached), "" when it may or has no cap. A supervisor turn
// is an engine turn like any other: none starts past a cap (pinned by
// TestRun_NoSupervisorFinalizePastTheCap: a finalize after the cap took $8
// of a $5 run).
func capReached(ctx context.Context, s *core.Service, run stratus.Run) string {
	if run.MaxCostUSD == 0 && run.MaxTokens == 0 {
		return ""
	}
	sp, err := lifecycle.RunSpend(ctx, s.Store, run.ID)
	if err != nil {
		return ""
	}
	return lifecycle.CapReached(run, sp)
}

func supervisorSystem(env *core.RunEnv, step stratus.Step, job string) string {
	return fmt.Sprintf("You are the read-only supervisor layer (%s turn, %s) above the Stratus flow %q for task %q.\n"+
		"You never edit files, never request rework and never change the route.\n"+
		"Your final report is submitted for you: answer with the text asked for, and write no file.\n",
		job, step.StepRef, env.Flow.Name, env.Task.ID)
}

// supervisorRole renders a supervisor role file with the run's variables;
// "" (the built-in instruction applies) when rel is empty or the file
// cannot be read, with a warning for the latter.
func supervisorRole(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, rel string) string {
	if rel == "" {
		return ""
	}
	_, tmpl, err := core.ReadRoleFile(env.FlowDir, rel)
	if err != nil {
		if stratus.ErrorCode(err) == stratus.ENOTFOUND && rel == config.Default().Supervisor.RoleFile {
			return "" // the default shared role file is optional: install does not deliver one
		}
		if _, seen := s.Supervisor.Warned.LoadOrStore(env.FlowDir+"\x00"+rel, true); !seen {
			s.Warnf("supervisor role file %s: %s; the built-in instruction is used", rel, stratus.ErrorMessage(err))
		}
		return ""
	}
	vars, err := vars.TemplateVars(ctx, s, run, env, step)
	if err != nil {
		vars = map[string]string{}
	}
	vars["stage"] = "supervisor"
	return prompt.Render(tmpl, vars, core.OutputNodes(env.Flow))
}

// StartFinalize starts the finalize turn of a run that reached its publish node
// (docs/contracts.md § What the supervisor layer does: at the whole task's close
// it writes the plain-language summary.md). It returns true when the turn is
// launched: the turn's end then writes the report and completes publish. It
// returns false when the layer is off, or when the turn could not be started —
// recorded as a failed finalize turn, so the report says degraded — and the
// caller publishes at once (situation 3).
func StartFinalize(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, pub stratus.Step) bool {
	if !env.Config.Supervisor.On() {
		return false
	}
	if why := capReached(ctx, s, run); why != "" {
		s.Warnf("supervisor finalize not started: %s; the deterministic report takes over", why)
		return false
	}
	step, created, err := createSupervisorStep(ctx, s, run, report.JobFinalize, pub, pub.TaskToken)
	if err != nil {
		s.Warnf("supervisor finalize: %v; the deterministic report takes over", err)
		return false
	}
	if !created {
		return true // a redelivery: the first delivery owns the turn
	}
	fail := func(err error) bool {
		reason := err.Error()
		v := core.SupervisorValue(step)
		v.Outcome, v.Reason = "failed", reason
		raw, _ := json.Marshal(v)
		s.FinishStep(ctx, step, stratus.StepFailed, "failed", raw)
		s.Warnf("supervisor finalize (%s): %s; the deterministic report takes over", step.StepRef, reason)
		s.Emit(core.Event{Type: core.EventSupervisorEnded, RunID: run.ID, Node: report.JobFinalize, StepRef: step.StepRef, Outcome: "failed", Reason: reason})
		return false
	}
	f, err := report.Collect(ctx, s.Store, run, stratus.RunDone, core.ReportEnv(env))
	if err != nil {
		return fail(fmt.Errorf("collect the run's facts: %w", err))
	}
	packetKey := path.Join(report.Dir(run.TaskID), "supervisor", "packet.json")
	if err := s.Files(run).Put(ctx, packetKey, supervisor.BuildPacket(f).Marshal()); err != nil {
		return fail(fmt.Errorf("write the packet: %w", err))
	}
	roleRel, finRel := supervisor.RoleFiles(env.Config.Supervisor, env.Flow)
	emit := false
	if env.Flow.Supervisor != nil && env.Flow.Supervisor.EmitFollowUps != nil {
		emit = *env.Flow.Supervisor.EmitFollowUps
	}
	text := supervisor.FinalizePrompt(supervisor.FinalizeInput{
		Role: supervisorRole(ctx, s, run, env, step, roleRel), Emphasis: supervisorRole(ctx, s, run, env, step, finRel),
		TaskID: run.TaskID, TaskTitle: run.TaskTitle, TaskPath: core.TaskPathOf(run), WorkDir: core.RootOf(run),
		Flow: env.Flow.TaskType, RunID: run.ID, PacketPath: core.Abs(run, packetKey), EmitFollowUps: emit,
	})
	if err := launchSupervisor(ctx, s, run, env, step, report.JobFinalize, text); err != nil {
		return fail(err)
	}
	return true
}

// Payload serves GET /v1/worker/prompt for a supervisor turn: the
// ordinary payload, with the turn's own resolution (read-only, no network)
// and the engine input naming the job ("supervisor.finalize",
// "supervisor.observe") as its node and the job's ordinal as its visit.
func Payload(ctx context.Context, s *core.Service, c *core.Caller) (*core.Payload, error) {
	run, env, step, att := c.Run, c.Env, c.Step, c.Attempt
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	prior, err := s.LatestSteps(ctx, run.ID, step.TID)
	if err != nil {
		return nil, err
	}
	cx := &core.Context{ProjectRoot: core.RootOf(run), WorkDir: core.RootOf(run), CtxDir: core.Abs(run, dir), TaskMetadata: env.Task.Front, Steps: []core.StepPointer{}}
	for _, st := range prior {
		cx.Steps = append(cx.Steps, core.StepPointer{Step: st.Node, StepRef: st.StepRef, Path: core.Abs(run, path.Join(dir, st.Node+".md")), Outcome: st.Verdict})
	}
	v := core.SupervisorValue(step)
	res := att.Resolved
	_, prov, err := env.Config.Provider(res.Provider)
	if err != nil {
		return nil, err
	}
	prov = prov.Resolved()
	kind := prov.Kind
	if kind == "" {
		kind = "supervisor." + v.Job // supervisor.observe | supervisor.finalize
	}
	input, err := json.Marshal(map[string]any{
		"query": att.Prompt, "system": att.System, "task_id": step.TID, "attempt": att.N,
		"node": "supervisor." + v.Job, "step_ref": step.StepRef, "visit": v.JobVisit, "ctx_dir": cx.CtxDir, "job": v.Job,
	})
	if err != nil {
		return nil, err
	}
	eng := &core.EngineSpec{
		Provider: res.Provider, Command: prov.Command, Args: core.ExpandArgs(prov.Args, core.ArgValues(kind, prov.MaxSteps, res)),
		Env: prov.Env, Dir: core.RootOf(run), DeadlineMS: res.TimeoutSeconds * 1000, Kind: kind, MaxSteps: prov.MaxSteps, Input: input,
		Model: res.Model, Reasoning: res.Reasoning, PermissionProfile: res.PermissionProfile, NetworkAccess: res.NetworkAccess,
	}
	if prov.Dir != "" {
		eng.Dir = path.Join(core.RootOf(run), prov.Dir)
	}
	if eng.Files, err = core.EngineFilesOf(env, eng); err != nil {
		return nil, err
	}
	ws, err := s.WorkspaceSpecOf(ctx, c, false, false)
	if err != nil {
		return nil, err
	}
	return &core.Payload{TaskID: step.TID, Attempt: att.N, Agent: att.Agent, System: att.System, SystemRef: core.SystemRefOf(step.TID, att.N, att.System),
		Prompt: att.Prompt, Context: cx, StepRef: step.StepRef, Engine: eng, Workspace: ws}, nil
}

// Submit records a supervisor turn's final body (docs/contracts.md § What the
// supervisor layer does): the attempt and its step end, no task token of its own
// is completed, and the job's end follows — the finalize turn's report and
// publish, or the observation's note.
func Submit(ctx context.Context, s *core.Service, c *core.Caller, body []byte, ok bool, f core.Failure) (*core.StepValue, error) {
	final, att, err := s.Final(ctx, c, body, ok)
	if err != nil {
		return nil, err
	}
	body = final.Body
	if !ok {
		if _, err := s.Store.AppendOutput(ctx, final); err != nil {
			return nil, core.SecondFinal(c, err)
		}
		return Failed(ctx, s, c, att, f.Complete(string(body), s.NowUTC().Local()), string(body))
	}
	v := core.SupervisorValue(c.Step)
	v.Attempt, v.Outcome = att.N, "done"
	raw, _ := json.Marshal(v)
	att.Status, att.Terminal = stratus.AttemptSubmitted, "Captured"
	step := c.Step
	step.Status, step.Verdict, step.Value, step.EndedAt = stratus.StepCompleted, "done", raw, final.At
	if _, err := s.Store.CompleteAttempt(ctx, final, att, step); err != nil {
		return nil, core.SecondFinal(c, err)
	}
	bg := context.WithoutCancel(ctx)
	switch v.Job {
	case report.JobFinalize:
		emit := false
		if c.Env.Flow.Supervisor != nil && c.Env.Flow.Supervisor.EmitFollowUps != nil {
			emit = *c.Env.Flow.Supervisor.EmitFollowUps
		}
		syn := supervisor.ParseFinal(body, emit)
		s.Emit(supervisorEnded(s, c, att, core.Event{Node: v.Job, StepRef: step.StepRef, Terminal: att.Terminal, Outcome: syn.Outcome}))
		finishFinalize(bg, s, c, att.N, v, syn)
	case report.JobObserve:
		s.Emit(supervisorEnded(s, c, att, core.Event{Node: v.Job, StepRef: step.StepRef, Terminal: att.Terminal, Outcome: "done", Reason: v.ForRef}))
		note := fmt.Sprintf("# Observation of %s\n\n%s\n", v.ForRef, strings.TrimSpace(string(body)))
		if err := s.Files(c.Run).Put(bg, observationKey(c.Run, v), []byte(core.Redact(note))); err != nil {
			s.Warnf("supervisor observation of %s: %v", v.ForRef, err)
		}
	}
	return &core.StepValue{StepRef: step.StepRef, Node: step.Node, Attempt: att.N, Outcome: "done", Bytes: len(body)}, nil
}

// supervisorEnded completes e as the end of the caller's supervisor turn
// att: its run, attempt, tokens, cost and duration.
func supervisorEnded(s *core.Service, c *core.Caller, att stratus.Attempt, e core.Event) core.Event {
	e.Type, e.RunID, e.TID, e.Attempt = core.EventSupervisorEnded, c.Run.ID, c.Step.TID, att.N
	e.PromptTokens, e.CompletionTokens, e.CostUSD = att.PromptTokens, att.CompletionTokens, att.CostUSD
	if !att.StartedAt.IsZero() {
		e.Duration = s.NowUTC().Sub(att.StartedAt)
	}
	return e
}

// observationKey is where an observation's note is recorded:
// .stratus/logs/<task>/supervisor/observe-<node>-<visit>.md.
func observationKey(run stratus.Run, v report.SupervisorValue) string {
	node, visit, _ := strings.Cut(v.ForRef, "#")
	return path.Join(report.Dir(run.TaskID), "supervisor", fmt.Sprintf("observe-%s-%s.md", node, visit))
}

// Failed ends a supervisor turn that failed. A finalize turn's
// failure never fails the run: the deterministic report takes over
// (situation 3). An observation's failure is logged and swallowed.
func Failed(ctx context.Context, s *core.Service, c *core.Caller, att stratus.Attempt, f core.Failure, reason string) (*core.StepValue, error) {
	reason = core.ClipReason(reason, core.MaxReasonBytes, " [cut]") // see MaxReasonBytes
	terminal := f.Terminal
	att.Status, att.Terminal, att.Reason = stratus.AttemptFailed, terminal, reason
	att.Class, att.RetryAt = f.Verdict.Class, f.Verdict.RetryAt
	if err := s.Store.UpdateAttempt(ctx, att); err != nil {
		return nil, err
	}
	v := core.SupervisorValue(c.Step)
	v.Attempt, v.Outcome, v.Reason = att.N, "failed", reason
	raw, _ := json.Marshal(v)
	if err := s.FinishStep(ctx, c.Step, stratus.StepFailed, "failed", raw); err != nil {
		return nil, err
	}
	s.Emit(supervisorEnded(s, c, att, core.Event{Node: v.Job, StepRef: c.Step.StepRef, Terminal: terminal, Outcome: "failed", Reason: reason}))
	bg := context.WithoutCancel(ctx)
	switch v.Job {
	case report.JobFinalize:
		finishFinalize(bg, s, c, att.N, v, report.Synthesis{Outcome: report.SynthesisFailed, Reason: reason})
	default:
		s.Warnf("supervisor observation of %s failed (it is advisory; the run goes on): %s", v.ForRef, reason)
	}
	return &core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Outcome: "failed", Reason: reason}, nil
}

// finishFinalize records what reached disk (the supervisor_final sidecar on
// the finalize attempt's tail), warns for a collapse or a failure, writes
// the report and completes the publish step the turn ran for.
func finishFinalize(ctx context.Context, s *core.Service, c *core.Caller, turn int, v report.SupervisorValue, syn report.Synthesis) {
	syn.StepRef = c.Step.StepRef
	rec, _ := json.Marshal(syn)
	if _, err := s.Store.AppendOutput(ctx, stratus.OutputEvent{TID: c.Step.TID, Attempt: turn, Kind: stratus.OutputSidecar,
		Name: report.SynthesisPart, Body: rec, OK: true, At: s.NowUTC()}); err != nil {
		s.WarnCall(c, "supervisor finalize (%s): record what reached disk: %v", c.Step.StepRef, err)
	}
	switch syn.Outcome {
	case report.SynthesisCollapsed:
		s.WarnCall(c, "supervisor finalize (%s): the synthesis collapsed (under %d characters of prose) and was discarded; the deterministic report takes over and summary.json says degraded. Discarded text: %q",
			c.Step.StepRef, report.CollapseFloor, syn.Discarded)
	case report.SynthesisFailed:
		s.WarnCall(c, "supervisor finalize (%s) failed: %s; the deterministic report takes over", c.Step.StepRef, syn.Reason)
	}
	pub, err := s.Store.GetStep(ctx, v.For)
	if err != nil || pub.Status != stratus.StepRunning {
		return
	}
	run, err := s.Store.GetRun(ctx, c.Run.ID)
	if err != nil {
		run = c.Run
	}
	if err := attempt.StartPublish(ctx, s, run, c.Env, pub); err != nil {
		s.WarnCall(c, "%s: %v", pub.StepRef, err)
	}
}

// StepEnded is the hook after a flow step ends (core.Service.Emit, through
// core.Layers): the prompt audit record of an agent or evaluator step, written
// before the step's token completes; then the observe decision, whose turn is
// launched in the background — it never blocks routing, and its failure is
// logged and swallowed (docs/contracts.md § What the supervisor layer does).
func StepEnded(s *core.Service, e core.Event) {
	ctx := context.Background()
	env, err := s.Env(ctx, e.RunID)
	if err != nil || env == nil || env.Flow == nil || env.Config == nil || env.Task == nil {
		return
	}
	audit := auditOn(env)
	if !audit && !env.Config.Supervisor.On() {
		return // nothing to write or decide: no read
	}
	run, err := s.Store.GetRun(ctx, e.RunID)
	if err != nil {
		return
	}
	var step stratus.Step
	ordinal := 0
	if e.TID != "" && !audit {
		// One read: only the audit needs the step's place
		// among the run's steps, which is a read of them all.
		if step, err = s.Store.GetStep(ctx, e.TID); err != nil {
			return
		}
	} else {
		steps, err := s.Store.ListSteps(ctx, e.RunID)
		if err != nil {
			return
		}
		for _, st := range steps {
			if st.Kind == report.Kind {
				continue
			}
			ordinal++
			if st.StepRef == e.StepRef {
				step = st
				break
			}
		}
	}
	if step.TID == "" || step.Kind == report.Kind {
		return
	}
	if audit && (step.Kind == flow.KindAgent || step.Kind == flow.KindEvaluator) {
		if err := writeAudit(ctx, s, run, env, step, ordinal); err != nil {
			s.Warnf("prompt audit of %s: %v", step.StepRef, err)
		}
	}
	if !env.Config.Supervisor.On() {
		return
	}
	o := env.Config.Supervisor.Observe
	mode := supervisor.EffectiveMode(o.Mode, supervisor.FlowMode(env.Flow))
	if mode == supervisor.ModeNone {
		return
	}
	// Only the events mode's fallback trigger reads the run's degradations.
	fallback := mode == supervisor.ModeEvents && slices.Contains(o.Triggers, supervisor.TriggerFallback)
	end, err := stepEnd(ctx, s, env, step, fallback)
	if err != nil {
		return
	}
	observe, why := supervisor.Decide(mode, o.Triggers, o.IncludeNodes, end)
	if !observe {
		return
	}
	if s.Queue != nil {
		// Off the request (pinned by TestObserve_GoesThroughTheQueueNotTheRequest):
		// the submit that ended the step
		// returns once it is recorded; the dispatch function launches.
		body, _ := json.Marshal(core.Message{RunID: run.ID, Node: step.Node, Kind: core.KindObserve, StepRef: step.StepRef, Why: why})
		if err := s.Queue.Send(ctx, body); err != nil {
			s.Warnf("supervisor observation of %s could not be queued (it is advisory; the run goes on): %v", step.StepRef, err)
		}
		return
	}
	s.Supervisor.Launches.Add(1)
	go func() {
		defer s.Supervisor.Launches.Done()
		if err := startObserve(ctx, s, env, step, why); err != nil {
			s.Warnf("supervisor observation of %s could not start (it is advisory; the run goes on): %v", step.StepRef, err)
		}
	}()
}

// Observe handles a KindObserve dispatch message: the observation turn of
// the step it names starts (once: a redelivered message finds the turn
// created and starts nothing). Errors: EINVALID for a message without a
// run or step, ENOTFOUND for a step the run does not have, the store's
// while reading them (the queue delivers the message again). A turn that
// cannot start is warned about and dropped: the layer is advisory
// (docs/contracts.md § What the supervisor layer does), and its step
// already says it failed.
func Observe(ctx context.Context, s *core.Service, m core.Message) error {
	if m.RunID == "" || m.StepRef == "" {
		return stratus.Errorf(stratus.EINVALID, "an observation message needs run_id and step_ref; got %+v", m)
	}
	env, err := s.Env(ctx, m.RunID)
	if err != nil {
		return err
	}
	// The step is its node's, typically the node's newest: found among
	// them, not the run's steps (README.md § Performance).
	node := m.StepRef
	if i := strings.LastIndexByte(node, '#'); i >= 0 {
		node = node[:i]
	}
	observed, found, err := store.NewestWhere(ctx, s.Store, m.RunID, node, 4, func(st stratus.Step) bool {
		return st.StepRef == m.StepRef && st.Kind != report.Kind
	})
	if err != nil {
		return err
	} else if !found {
		return stratus.Errorf(stratus.ENOTFOUND, "run %s has no step %s to observe", m.RunID, m.StepRef)
	}
	if err := startObserve(ctx, s, env, observed, m.Why); err != nil {
		s.Warnf("supervisor observation of %s could not start (it is advisory; the run goes on): %v", m.StepRef, err)
	}
	return nil
}

// stepEnd reads what the observe decision needs of a step that ended:
// whether a degradation was recorded for it (StepEnd.Fallback) only when
// fallback is true, since that reads the run's degradations.
func stepEnd(ctx context.Context, s *core.Service, env *core.RunEnv, step stratus.Step, fallback bool) (supervisor.StepEnd, error) {
	e := supervisor.StepEnd{Node: step.Node, Kind: step.Kind, Outcome: step.Verdict}
	v, _ := core.DecodeStepValue(step.Value)
	if e.Outcome == "" {
		e.Outcome = v.Outcome
	}
	e.Failed = step.Status == stratus.StepFailed || e.Outcome == "failed" || e.Outcome == "invalid"
	if step.Kind == flow.KindEvaluator && e.Outcome == "accept" {
		e.AcceptedOpen = v.Exhausted || gatingOpen(ctx, s, env, step)
	}
	if !fallback {
		return e, nil
	}
	degs, err := s.Store.ListDegradations(ctx, step.RunID)
	if err != nil {
		return e, err
	}
	e.Fallback = slices.ContainsFunc(degs, func(d stratus.Degradation) bool { return d.StepRef == step.StepRef })
	return e, nil
}

// gatingOpen reports an accepted evaluator pass whose findings still gate.
func gatingOpen(ctx context.Context, s *core.Service, env *core.RunEnv, step stratus.Step) bool {
	node := env.Flow.Node(step.Node)
	att, err := s.Store.LatestAttempt(ctx, step.TID)
	if node == nil || err != nil {
		return false
	}
	tail, err := s.Store.ListOutput(ctx, step.TID, att.N)
	if err != nil {
		return false
	}
	value, err := fold.Fold(step.Node, tail, s.SubmitFormat(env, step.Node))
	if err != nil {
		return false
	}
	fs, err := findings.Parse(value)
	return err == nil && findings.Mark(fs, core.PolicyOf(env.Flow, node).Gate) > 0
}

// startObserve launches one observation turn of a step that ended: one
// read-only observation, best-effort (docs/contracts.md § What the
// supervisor layer does).
func startObserve(ctx context.Context, s *core.Service, env *core.RunEnv, observed stratus.Step, why string) error {
	run, err := s.Store.GetRun(ctx, observed.RunID)
	if err != nil {
		return err
	}
	if stratus.RunTerminal(run.Status) {
		return nil
	}
	if why := capReached(ctx, s, run); why != "" {
		if s.NoteOnce(run.ID, "observe-capped") {
			s.Warnf("supervisor observations not started from here on: %s", why)
		}
		return nil
	}
	step, created, err := createSupervisorStep(ctx, s, run, report.JobObserve, observed, "")
	if err != nil || !created {
		return err
	}
	roleRel, _ := supervisor.RoleFiles(env.Config.Supervisor, env.Flow)
	v, _ := core.DecodeStepValue(observed.Value)
	outcome := observed.Verdict
	if outcome == "" {
		outcome = v.Outcome
	}
	out := ""
	if dir, err := core.CtxDir(env, run); err == nil && observed.Status == stratus.StepCompleted {
		out = core.Abs(run, path.Join(dir, observed.Node+".md"))
	}
	text := supervisor.ObservePrompt(supervisor.ObserveInput{
		Role: supervisorRole(ctx, s, run, env, step, roleRel), TaskID: run.TaskID, TaskTitle: run.TaskTitle,
		TaskPath: core.TaskPathOf(run), WorkDir: core.RootOf(run), StepRef: observed.StepRef, Node: observed.Node, Kind: observed.Kind,
		Outcome: outcome, Reason: v.Reason, Why: why, OutputPath: out,
	})
	if err := launchSupervisor(ctx, s, run, env, step, report.JobObserve, text); err != nil {
		sv := core.SupervisorValue(step)
		sv.Outcome, sv.Reason = "failed", err.Error()
		raw, _ := json.Marshal(sv)
		s.FinishStep(ctx, step, stratus.StepFailed, "failed", raw)
		return err
	}
	return nil
}
