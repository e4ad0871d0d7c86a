package fetch

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/resolve"
	"github.com/stratusflow/stratus/internal/worker/supervise"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// System serves GET /v1/worker/prompt/system?task_id=&attempt=: the exact
// baked system bytes of (task_id, attempt), for a caller whose credential is
// that attempt's. Errors: see Authorize; EINVALID for a missing or
// malformed attempt; EFORBIDDEN for another attempt.
func System(ctx context.Context, s *core.Service, authorization, tid, attempt string) ([]byte, error) {
	// The credential before the parameters (pinned by
	// TestWorkerAPI_CredentialBeforeParameters): a caller
	// without one learns nothing of what the route takes.
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, "")
	if err != nil {
		return nil, err
	}
	if tid == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "task_id", "missing; valid: the task_id of the credential's dispatch task")
	}
	if tid != c.Step.TID {
		return nil, stratus.FieldErrorf(stratus.EFORBIDDEN, "task_id", "%q is not the task this credential was issued for", tid)
	}
	var n int
	if _, err := fmt.Sscan(attempt, &n); err != nil || n < 1 || fmt.Sprint(n) != attempt {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "attempt", "%q is not a positive integer", attempt)
	}
	if c.Attempt.N != n {
		return nil, stratus.FieldErrorf(stratus.EFORBIDDEN, "attempt", "%d is not the attempt this credential was issued for (%d)", n, c.Attempt.N)
	}
	return []byte(c.Attempt.System), nil
}

// Invoke serves GET /v1/worker/prompt for an authorized caller (verb
// FetchPrompt). Errors: see Authorize; ECONFLICT when the run is terminal.
func Invoke(ctx context.Context, s *core.Service, authorization, tid string) (*core.Payload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, tid)
	if err != nil {
		return nil, err
	}
	if c.Step.Kind == core.SupervisorKind {
		return supervise.Payload(ctx, s, c)
	}
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
	node := env.Flow.Node(step.Node)
	for _, st := range prior {
		if node.Context != nil && !slices.Contains(node.Context.Steps, st.Node) {
			continue // the node's context policy leaves this step out
		}
		p := core.StepPointer{Step: st.Node, StepRef: st.StepRef, Path: core.Abs(run, path.Join(dir, st.Node+".md")), Outcome: st.Verdict}
		if v, err := core.DecodeStepValue(st.Value); err == nil {
			for _, name := range v.Parts {
				p.Parts = append(p.Parts, core.Abs(run, path.Join(dir, name)))
			}
		}
		cx.Steps = append(cx.Steps, p)
	}
	if core.IsExec(node.Kind) {
		spec, err := vars.ExecSpec(ctx, s, run, env, step)
		if err != nil {
			return nil, err
		}
		ws, err := s.WorkspaceSpecOf(ctx, c, false, node.Kind == flow.KindTool)
		if err != nil {
			return nil, err
		}
		return &core.Payload{TaskID: step.TID, Attempt: att.N, Agent: att.Agent, Prompt: att.Prompt, Context: cx, StepRef: step.StepRef, RunID: run.ID, Exec: spec, Workspace: ws}, nil
	}
	res, prov, err := resolve.Resolve(env.Config, env.Flow, node, env.Task.Front)
	if err != nil {
		return nil, err
	}
	if att.Resolved.Provider != "" && att.Resolved.Provider != res.Provider {
		// The attempt's record is what it runs with.
		if _, prov, err = env.Config.Provider(att.Resolved.Provider); err != nil {
			return nil, err
		}
		prov = prov.Resolved()
	}
	if att.Resolved.Provider != "" {
		res = att.Resolved
	}
	// The envelope's kind follows the node (agent, evaluator) unless the
	// provider maps it (openseek's subrun kinds); an evaluator's request
	// carries the findings schema, any node's its output_schema
	// (docs/contracts.md § The request line: the engine learns what it must
	// return).
	kind := prov.Kind
	if kind == "" {
		kind = node.Kind
	}
	input, err := json.Marshal(map[string]any{
		"query":    att.Prompt,
		"system":   att.System,
		"task_id":  step.TID,
		"attempt":  att.N,
		"node":     step.Node,
		"step_ref": step.StepRef,
		"visit":    step.Visit,
		"ctx_dir":  cx.CtxDir,
	})
	if err != nil {
		return nil, err
	}
	eng := &core.EngineSpec{
		Provider: res.Provider, Command: prov.Command, Args: withExtraArgs(prov.Command, core.ExpandArgs(prov.Args, core.ArgValues(kind, prov.MaxSteps, res)), res.ExtraArgs),
		Env: prov.Env, Dir: core.RootOf(run), DeadlineMS: res.TimeoutSeconds * 1000, Kind: kind, MaxSteps: prov.MaxSteps, Input: input,
		Model: res.Model, Reasoning: res.Reasoning, PermissionProfile: res.PermissionProfile, NetworkAccess: res.NetworkAccess,
	}
	if prov.Dir != "" {
		eng.Dir = path.Join(core.RootOf(run), prov.Dir)
	}
	switch {
	case node.OutputSchema != "":
		eng.Schema = json.RawMessage(node.OutputSchema)
	case node.Kind == flow.KindEvaluator:
		eng.Schema, eng.SchemaAdvisory = json.RawMessage(findings.JSONSchema), true
	}
	if eng.Files, err = core.EngineFilesOf(env, eng); err != nil {
		return nil, err
	}
	ws, err := s.WorkspaceSpecOf(ctx, c, core.WritesWorkspace(node, res.PermissionProfile), false)
	if err != nil {
		return nil, err
	}
	return &core.Payload{TaskID: step.TID, Attempt: att.N, Agent: att.Agent, System: att.System, SystemRef: core.SystemRefOf(step.TID, att.N, att.System), Prompt: att.Prompt,
		Context: cx, StepRef: step.StepRef, RunID: run.ID, Engine: eng, Workspace: ws}, nil
}

// withExtraArgs appends a node's extra_args after the provider's args (worc
// reference.md § agent node: "concatenated after the provider list"). A
// bundled engine (command "{stratus}", e.g. `stratus engine claude`) hands
// the flags after "--" to the CLI it wraps, so a "--" goes first when the
// provider's args hold none.
func withExtraArgs(command string, args, extra []string) []string {
	if len(extra) == 0 {
		return args
	}
	if command == config.StratusCommand && !slices.Contains(args, "--") {
		args = append(args, "--")
	}
	return append(args, extra...)
}
