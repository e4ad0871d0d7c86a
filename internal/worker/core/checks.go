package core

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/projection"
)

// The checks and tool node kinds run in the worker process, like an agent
// (the ECS runner task is what has the repository checked out): dispatch
// launches a runner, the runner finds an `exec` spec instead of an engine
// in its payload (execSpec), runs it (internal/nodeexec) and submits a
// nodeexec.Result; submitExec decides the outcome with nodeexec's pure
// rules and writes the artifacts.

// IsExec reports whether a node kind runs through nodeexec.
func IsExec(kind string) bool { return kind == flow.KindChecks || kind == flow.KindTool }

// ExecRefusal says why a checks or tool node cannot be dispatched by this
// build (errName "" when it can): a checker it does not run, or a command
// set glob doublestar cannot parse.
func ExecRefusal(env *RunEnv, node *flow.Node) (errName, why string) {
	if node.Kind != flow.KindChecks {
		return "", ""
	}
	if !nodeexec.Supported(node.Checker) {
		return ErrUnsupported, fmt.Sprintf("node %q: checker %s is not supported by this build of Stratus; supported: %s, %s",
			node.ID, node.Checker, nodeexec.CommandProfile, nodeexec.Citation)
	}
	for name, set := range env.Config.Checks.CommandSets {
		for _, g := range set.Paths {
			if !doublestar.ValidatePattern(g) {
				return ErrDispatch, fmt.Sprintf("config checks.command_sets.%s.paths: %q is not a valid glob; valid: e.g. backend/** or **/*.md", name, g)
			}
		}
	}
	return "", ""
}

// execDescription is the attempt's "prompt" for a checks or tool node: no
// role file is rendered, so the record says what runs.
func execDescription(env *RunEnv, node *flow.Node) string {
	if node.Kind == flow.KindTool {
		return fmt.Sprintf("tool node %s: run %s/tools/%s with the JSON context on stdin", node.ID, StateDirName, node.Tool)
	}
	names := make([]string, 0, len(env.Config.Checks.CommandSets))
	for n := range env.Config.Checks.CommandSets {
		names = append(names, n)
	}
	sort.Strings(names)
	if node.Checker == nodeexec.Citation {
		return fmt.Sprintf("checks node %s: verify the citation manifest %s", node.ID, manifestName(node))
	}
	return fmt.Sprintf("checks node %s: checker %s, command sets selected by the diff from [%s]", node.ID, node.Checker, strings.Join(names, ", "))
}

// execTTL is how long the handle of a checks or tool attempt must live: its
// worst-case run plus the compiler's grace (the handle is fenced as soon as
// the attempt ends, so a long life costs nothing).
func execTTL(env *RunEnv, node *flow.Node) time.Duration {
	secs := 0
	switch node.Kind {
	case flow.KindTool:
		secs = toolTimeout(env, node)
	case flow.KindChecks:
		for _, set := range env.Config.Checks.CommandSets {
			secs += setTimeout(env, set.TimeoutSeconds) * len(set.Commands)
		}
	}
	return time.Duration(secs+compiler.TimeoutGraceSeconds) * time.Second
}

func setTimeout(env *RunEnv, own int) int {
	switch {
	case own > 0:
		return own
	case env.Config.Checks.TimeoutSeconds > 0:
		return env.Config.Checks.TimeoutSeconds
	}
	return 7200
}

func manifestName(node *flow.Node) string {
	if node.Manifest != "" {
		return node.Manifest
	}
	return "sources.json"
}

// ExecSpec builds the `exec` field of a checks or tool node's payload.
func (s *Service) ExecSpec(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (*nodeexec.Spec, error) {
	node := env.Flow.Node(step.Node)
	spec := &nodeexec.Spec{Kind: node.Kind, Dir: RootOf(run), AllowedEnvironment: env.Config.Security.AllowedEnvironment}
	if spec.AllowedEnvironment == nil {
		spec.AllowedEnvironment = []string{}
	}
	dir, err := CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	if node.Kind == flow.KindTool {
		spec.Tool, err = s.toolSpec(ctx, run, env, step)
		return spec, err
	}
	cs := &nodeexec.ChecksSpec{Checker: node.Checker, Exclude: []string{StateDirName, dir}}
	if ws := run.Workspace; ws != nil {
		cs.Base = ws.Base // the change is base..head, committed in the runner's checkout
	}
	switch node.Checker {
	case nodeexec.CommandProfile:
		names := make([]string, 0, len(env.Config.Checks.CommandSets))
		for n := range env.Config.Checks.CommandSets {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			set := env.Config.Checks.CommandSets[n]
			out := nodeexec.CommandSet{Name: n, Paths: set.Paths, TimeoutSeconds: setTimeout(env, set.TimeoutSeconds), SkipIfUnavailable: set.SkipIfUnavailable}
			for _, c := range set.Commands {
				out.Commands = append(out.Commands, nodeexec.Command{Name: c.Name, Argv: c.Argv, Cwd: c.Cwd})
			}
			cs.CommandSets = append(cs.CommandSets, out)
		}
	case nodeexec.Citation:
		rd := ReportDir(env.Flow, run.TaskID)
		if rd == "" {
			rd = dir
		}
		cs.Manifest = Abs(run, path.Join(rd, manifestName(node)))
	default:
		_, why := ExecRefusal(env, node)
		return nil, stratus.Errorf(stratus.EUNPROCESSABLE, "%s", why)
	}
	spec.Checks = cs
	spec.Env = env.Config.Checks.Env
	return spec, nil
}

// execValue is the recorded value of a checks or tool step: the StepValue
// the Choice routes on, plus what the repeated-fail guard and the report
// read. It stays small: bodies live in the Final and the ctx files.
type execValue struct {
	StepValue
	// Digest identifies a tool's fail without findings (nodeexec.RepeatedFail).
	Digest string `json:"digest,omitempty"`
	// Findings counts a tool's printed findings (recorded, never applied).
	Findings int `json:"findings,omitempty"`
}

// Outcomes a checks or tool step records when its verdict parks the run.
const (
	outcomeIncomplete = "incomplete"             // checks: the gate could not be completed
	outcomeManual     = "manual_action_required" // tool: timeout, launch error, crash, invalid or repeated outcome
)

// submitExec completes a checks or tool attempt from the runner's
// nodeexec.Result (the submitted body): it decides the outcome, records the
// Final, the attempt and the step together, writes the artifacts —
// <ctx>/<node>.md ({checks_path}; a tool's summary), and a tool's redacted
// stdout at <ctx>/tools/<node>/stdout.txt ({<node>_path}), both the latest
// visit's; and each visit's own copies, which later visits leave alone, in
// the step's log dir (stepLogDir): checks.md, or tool.md and stdout.txt —
// and completes
// the Task state: SendTaskSuccess with pass/fail/route:<label>, or, for a
// verdict that parks the run, SendTaskFailure with the verdict's error
// name, which the state's Catch sends to manual_action_required without
// charging a loop. Errors: EUNPROCESSABLE for a body that is not a result
// of the node's kind (nothing recorded); ECONFLICT for a second Final.
func (s *Service) submitExec(ctx context.Context, c *Caller, final stratus.OutputEvent) (*StepValue, error) {
	node := c.Env.Flow.Node(c.Step.Node)
	var res nodeexec.Result
	if err := json.Unmarshal(final.Body, &res); err != nil || res.Kind != node.Kind {
		return nil, stratus.Errorf(stratus.EUNPROCESSABLE, "node %s (kind %s) takes a nodeexec result {\"kind\": %q, ...} from `stratus runner`; the body is not one",
			node.ID, node.Kind, node.Kind)
	}
	dir, dirErr := s.execDir(c)
	logDir := stepLogDir(c.Run, c.Step)
	var (
		v         nodeexec.Verdict
		report    string
		logReport string // the per-visit copy of report, in logDir
		logName   = "checks.md"
		files     = map[string][]byte{}
		logs      = map[string][]byte{}
		ev        execValue
	)
	switch node.Kind {
	case flow.KindChecks:
		if res.Checks == nil {
			return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "checks", "missing from the result of checks node %s", node.ID)
		}
		v = nodeexec.ChecksVerdict(res.Checks)
		report = nodeexec.ChecksReport(res.Checks, v)
		logReport = report
	case flow.KindTool:
		if res.Tool == nil {
			return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "tool", "missing from the result of tool node %s", node.ID)
		}
		tv, err := s.toolVerdict(ctx, c, res.Tool)
		if err != nil {
			return nil, err
		}
		v, ev.Digest, ev.Findings = tv.Verdict, tv.Digest, countFindings(tv.Findings)
		stdout := []byte(Redact(res.Tool.KeptStdout()))
		stdoutPath := ""
		if dir != "" {
			key := path.Join(dir, "tools", node.ID, "stdout.txt")
			files[key] = stdout
			stdoutPath = Abs(c.Run, key)
		}
		report = nodeexec.ToolReport(res.Tool, tv, stdoutPath)
		logKey := path.Join(logDir, "stdout.txt")
		logs[logKey] = stdout
		logName, logReport = "tool.md", nodeexec.ToolReport(res.Tool, tv, Abs(c.Run, logKey))
	}
	outcome, status := v.Outcome, stratus.StepCompleted
	if v.Manual {
		outcome, status = outcomeManual, stratus.StepFailed
		if node.Kind == flow.KindChecks {
			outcome = outcomeIncomplete
		}
	}
	subtask, _, err := s.SubtaskOf(ctx, c.Env, c.Step) // a region step records its subtask, like an agent's
	if err != nil {
		return nil, err
	}
	ev.StepValue = StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: c.Attempt.N, Outcome: outcome, Reason: v.Reason,
		Bytes: len(final.Body), SubtaskOrder: subtask}
	raw, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	// The Final keeps the whole result, redacted like every artifact of it.
	final.Body = []byte(Redact(string(final.Body)))
	att := c.Attempt
	att.EndedAt = final.At
	att.Status, att.Terminal = stratus.AttemptSubmitted, "Captured"
	// The step stays open until its files persisted (submit's rule:
	// docs/security.md § Output that did not persist).
	if _, err := s.Store.CompleteAttempt(ctx, final, att, c.Step); err != nil {
		return nil, SecondFinal(c, err)
	}

	fm := projection.FrontMatter{TaskID: c.Run.TaskID, Step: c.Step.Node, StepRef: c.Step.StepRef,
		Attempt: c.Attempt.N, Agent: c.Attempt.Agent, Format: "markdown", SubmittedAt: final.At}
	// The visit's own copies first: they are logs, kept whatever the ctx dir.
	logBody := []byte(Redact(logReport))
	fm.SHA256, fm.Bytes = projection.Checksum(logBody)
	doc, err := projection.Encode(fm, logBody)
	if err == nil {
		logs[path.Join(logDir, logName)] = doc
		for key, b := range logs {
			if err = s.Files(c.Run).Put(ctx, key, b); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = dirErr
	}
	if err == nil && dir != "" {
		for key, b := range files {
			if err = s.Files(c.Run).Put(ctx, key, b); err != nil {
				break
			}
		}
		if err == nil {
			_, err = projection.Project(ctx, s.Files(c.Run), dir, c.Step.Node, fm, []byte(Redact(report)), nil)
		}
	}
	if err != nil {
		return nil, s.NotPersisted(ctx, c, att, err)
	}
	step := c.Step
	step.Status, step.Verdict, step.Value, step.EndedAt = status, outcome, raw, final.At
	if err := s.Store.UpdateStep(ctx, step); err != nil {
		return nil, s.NotPersisted(ctx, c, att, fmt.Errorf("record %s %s: %w", c.Step.StepRef, outcome, err))
	}
	s.EmitEnded(c, att, outcome, v.Reason)
	sv := ev.StepValue
	if v.Manual {
		if err := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, v.Error, v.Reason); err != nil {
			return nil, stratus.Errorf(stratus.ECONFLICT, "result of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
		}
		return &sv, nil
	}
	if err := s.Tokens.SendTaskSuccess(ctx, c.Step.TaskToken, raw); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "result of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return &sv, nil
}

// stepLogDir is the sink key of a step's log dir, one per node visit:
// .stratus/logs/<task_id>/stages/<node>/run-<visit, 6 digits> (where
// dispatch saves the rendered prompt and the runner its log).
func stepLogDir(run stratus.Run, step stratus.Step) string {
	return path.Join(StateDirName, "logs", run.TaskID, "stages", step.Node, fmt.Sprintf("run-%06d", step.Visit))
}

// execDir is the ctx dir the artifacts go to: "" with a warning when no
// work dir resolves (seed 000 § Files are the server's job: skip
// fail-open), an error when the flow's check_policy is strict.
func (s *Service) execDir(c *Caller) (string, error) {
	switch {
	case c.Run.WorkDir == "" && c.Env.Flow.CheckPolicy == "strict":
		return "", fmt.Errorf("no work dir resolves for run %s, and the flow's check_policy is strict", c.Run.ID)
	case c.Run.WorkDir == "":
		s.WarnCall(c, "%s: no work dir resolves for run %s; its files are skipped", c.Step.StepRef, c.Run.ID)
		return "", nil
	}
	return CtxDir(c.Env, c.Run)
}

func countFindings(raw json.RawMessage) int {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		return len(list)
	}
	if len(raw) > 0 && string(raw) != "null" {
		return 1
	}
	return 0
}

// AttemptPrompt is what an attempt records as its prompt: the rendered
// role file, or for a checks or tool node (no role file, no engine) a line
// saying what runs.
func (s *Service) AttemptPrompt(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (string, error) {
	node := env.Flow.Node(step.Node)
	if IsExec(node.Kind) {
		return execDescription(env, node), nil
	}
	return s.RenderPrompt(ctx, run, env, step)
}

// handleTTL is how long an attempt's handle lives: the minter's TTL, or for
// a checks or tool node its worst-case run when that is longer (a check
// suite may run for hours; its submit must still be accepted).
func (s *Service) handleTTL(env *RunEnv, node *flow.Node) time.Duration {
	ttl := s.Minter.TTLOrDefault()
	if node != nil && IsExec(node.Kind) {
		ttl = max(ttl, execTTL(env, node))
	}
	return ttl
}

// HandleLifetime is the longest an attempt's credential may live, from the
// attempt's start: the engine's deadline plus the submit grace (an engine
// that reports near its deadline must still be able to submit), and at
// least handleTTL. node is nil for a supervisor turn.
func (s *Service) HandleLifetime(env *RunEnv, node *flow.Node, res stratus.Resolved) time.Duration {
	ttl := s.handleTTL(env, node)
	if res.TimeoutSeconds > 0 {
		ttl = max(ttl, time.Duration(res.TimeoutSeconds+compiler.TimeoutGraceSeconds)*time.Second)
	}
	return ttl
}

// HandleLease is how long a worker's handle lives past its last renewal
// (issue 14 § 11): the capability token TTL (worker.token_ttl_seconds,
// default 600 s). The runner's stats and its silent-engine heartbeat
// (every 20 s) renew it, never past handleLifetime; a handle whose worker
// died stops working within one lease, not hours later.
func (s *Service) HandleLease() time.Duration { return s.Minter.TTLOrDefault() }
