package worker

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus/internal/captoken"
)

// Payload is the body of GET /v1/worker/prompt (seed 001 § Routes:
// {task_id, attempt, agent, system?, prompt, context?}). StepRef and Engine
// are Stratus's additive fields: the step being run and the launch spec the
// runner drives through child contract v1.
type Payload struct {
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	Agent   string `json:"agent"`
	System  string `json:"system,omitempty"`
	// SystemRef points at the same bytes behind GET /v1/worker/prompt/system.
	SystemRef *SystemRef  `json:"system_ref,omitempty"`
	Prompt    string      `json:"prompt"`
	Context   *Context    `json:"context,omitempty"`
	StepRef   string      `json:"step_ref"`
	Engine    *EngineSpec `json:"engine"`
}

// Context is the AgentContextView (seed 000 § Why IN is an HTTP fetch),
// assembled at fetch time so it always shows the current attempt's truth.
type Context struct {
	ProjectRoot  string         `json:"project_root"`
	WorkDir      string         `json:"work_dir"`
	CtxDir       string         `json:"ctx_dir"`
	TaskMetadata map[string]any `json:"task_metadata,omitempty"`
	Steps        []StepPointer  `json:"steps"`
}

// StepPointer points at one prior step's output files.
type StepPointer struct {
	Step    string   `json:"step"`
	StepRef string   `json:"step_ref"`
	Path    string   `json:"path"`
	Parts   []string `json:"parts,omitempty"`
	Outcome string   `json:"outcome,omitempty"`
}

// EngineSpec is the launch spec of the engine for this attempt (seed 003 §
// 6). Env values of the form "$NAME" are resolved by the runner from its own
// environment; Command "{stratus}" is the runner's own binary.
type EngineSpec struct {
	Provider   string            `json:"provider"`
	Command    string            `json:"command"`
	Args       []string          `json:"args"`
	Env        map[string]string `json:"env,omitempty"`
	Dir        string            `json:"dir"`
	DeadlineMS int               `json:"deadline_ms"`
	Kind       string            `json:"kind"`
	MaxSteps   int               `json:"max_steps,omitempty"`
	Input      json.RawMessage   `json:"input"`
	// Schema is the node's output_schema: sent in the envelope (seed 003 §
	// 2) and checked by the runner against the report.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// FetchPrompt serves GET /v1/worker/prompt for an authorized caller (verb
// FetchPrompt). Errors: see Authorize; ECONFLICT when the run is terminal.
func (s *Service) FetchPrompt(ctx context.Context, authorization, tid string) (*Payload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, tid)
	if err != nil {
		return nil, err
	}
	run, env, step, att := c.Run, c.Env, c.Step, c.Attempt
	dir, err := ctxDir(env, run)
	if err != nil {
		return nil, err
	}
	prior, err := s.latestSteps(ctx, run.ID, step.TID)
	if err != nil {
		return nil, err
	}
	cx := &Context{ProjectRoot: run.WorkDir, WorkDir: run.WorkDir, CtxDir: abs(run, dir), TaskMetadata: env.Task.Front, Steps: []StepPointer{}}
	node := env.Flow.Node(step.Node)
	for _, st := range prior {
		if node.Context != nil && !slices.Contains(node.Context.Steps, st.Node) {
			continue // the node's context policy leaves this step out
		}
		p := StepPointer{Step: st.Node, StepRef: st.StepRef, Path: abs(run, path.Join(dir, st.Node+".md")), Outcome: st.Verdict}
		if v, err := decodeStepValue(st.Value); err == nil {
			for _, name := range v.Parts {
				p.Parts = append(p.Parts, abs(run, path.Join(dir, name)))
			}
		}
		cx.Steps = append(cx.Steps, p)
	}
	provName, prov, err := env.Config.Provider(s.providerOf(env, node.ID))
	if err != nil {
		return nil, err
	}
	prov = prov.Resolved()
	kind := prov.Kind
	if kind == "" {
		kind = "agent"
	}
	deadline := 600
	if prov.TimeoutSeconds > 0 {
		deadline = prov.TimeoutSeconds
	}
	if node.TimeoutSeconds != nil && *node.TimeoutSeconds > 0 {
		deadline = *node.TimeoutSeconds
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
	eng := &EngineSpec{
		Provider: provName, Command: prov.Command, Args: expandArgs(prov.Args, kind, prov.MaxSteps),
		Env: prov.Env, Dir: run.WorkDir, DeadlineMS: deadline * 1000, Kind: kind, MaxSteps: prov.MaxSteps, Input: input,
	}
	if prov.Dir != "" {
		eng.Dir = path.Join(run.WorkDir, prov.Dir)
	}
	if node.OutputSchema != "" {
		eng.Schema = json.RawMessage(node.OutputSchema)
	}
	return &Payload{TaskID: step.TID, Attempt: att.N, Agent: att.Agent, System: att.System, SystemRef: systemRef(step.TID, att.N, att.System), Prompt: att.Prompt,
		Context: cx, StepRef: step.StepRef, Engine: eng}, nil
}

// expandArgs fills {kind} and {max_steps} (seed 003 § 7.1: a launch spec must
// mirror the call's kind and step ceiling onto argv). With no ceiling, a
// "{max_steps}" argument and a "--max-steps" flag before it are dropped.
func expandArgs(args []string, kind string, maxSteps int) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == "{max_steps}" && maxSteps <= 0 {
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "--max-steps") {
				out = out[:n-1]
			}
			continue
		}
		a = strings.ReplaceAll(a, "{kind}", kind)
		a = strings.ReplaceAll(a, "{max_steps}", strconv.Itoa(maxSteps))
		out = append(out, a)
	}
	return out
}
