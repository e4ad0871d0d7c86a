package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/nodeexec"
)

// Payload is the body of GET /v1/worker/prompt (docs/contracts.md §
// Request and response bodies: {task_id, attempt, agent, system?, prompt,
// context?}). StepRef and Engine
// are Stratus's additive fields: the step being run and the launch spec the
// runner drives through child contract v1.
type Payload struct {
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	Agent   string `json:"agent"`
	System  string `json:"system,omitempty"`
	// SystemRef points at the same bytes behind GET /v1/worker/prompt/system.
	SystemRef *SystemRef `json:"system_ref,omitempty"`
	Prompt    string     `json:"prompt"`
	Context   *Context   `json:"context,omitempty"`
	StepRef   string     `json:"step_ref"`
	// RunID is the run the step belongs to: what the runner's log records
	// carry (internal/logging).
	RunID  string      `json:"run_id,omitempty"`
	Engine *EngineSpec `json:"engine,omitempty"`
	// Exec replaces Engine for a checks or tool node: what the runner runs
	// itself (internal/nodeexec), submitting a nodeexec.Result.
	Exec *nodeexec.Spec `json:"exec,omitempty"`
	// Workspace is the run's repository for a runner to materialize (a run
	// whose repository travels; docs/architecture.md § Workspaces); nil: it
	// works in the work dir.
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`
}

// Context is the AgentContextView (docs/contracts.md § Input is a fetch),
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

// EngineSpec is the launch spec of the engine for this attempt
// (docs/contracts.md § Timing, environment and argv). Env values of the form
// "$NAME" are resolved by the runner from its own environment; Command
// "{stratus}" is the runner's own binary.
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
	// Schema is the node's output_schema, or an evaluator's findings schema:
	// sent in the envelope (docs/contracts.md § The request line). The runner
	// checks the report against an output_schema; an advisory schema (the
	// findings') only tells the engine what to return: the worker's own parse of
	// an evaluator report fails closed (manual_action_required), as before.
	Schema         json.RawMessage `json:"schema,omitempty"`
	SchemaAdvisory bool            `json:"schema_advisory,omitempty"`
	// The attempt's resolved per-node overrides (docs/contracts.md §
	// Per-node overrides; Resolve). The runner always hands them to the
	// engine as STRATUS_MODEL, STRATUS_REASONING ("" = the engine's default),
	// STRATUS_PERMISSION_PROFILE and STRATUS_NETWORK_ACCESS; Args already
	// carries them where the provider's args use the placeholders.
	Model             string `json:"model,omitempty"`
	Reasoning         string `json:"reasoning,omitempty"`
	PermissionProfile string `json:"permission_profile"`
	NetworkAccess     bool   `json:"network_access"`
	// Files are the files Command, Args and Env name, frozen with the run
	// (RunEnv.EngineFiles): the runner writes them to a directory of its
	// own and names its copies instead, so a worker needs nothing from the
	// operator's disk (pinned by TestFreeze_EngineFilesTravelWithTheRun).
	Files []EngineFile `json:"files,omitempty"`
}

// EngineFile is one file a launch spec names.
type EngineFile struct {
	Ref        string `json:"ref"`  // the arg or env value that names it, as written
	Name       string `json:"name"` // its base name
	Body       []byte `json:"body"` // base64 in JSON
	Executable bool   `json:"executable,omitempty"`
}

// EngineFilesOf reads the frozen files e's args and env values name.
func EngineFilesOf(env *RunEnv, e *EngineSpec) ([]EngineFile, error) {
	if len(env.EngineFiles) == 0 {
		return nil, nil
	}
	refs := append([]string{e.Command}, e.Args...)
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		refs = append(refs, e.Env[k])
	}
	var out []EngineFile
	seen := map[string]bool{}
	for _, ref := range refs {
		p, ok := env.EngineFiles[ref]
		if !ok || seen[ref] {
			continue
		}
		seen[ref] = true
		body, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("the run's frozen copy of %s: %w", ref, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, EngineFile{Ref: ref, Name: filepath.Base(ref), Body: body, Executable: fi.Mode()&0o111 != 0})
	}
	return out, nil
}

// ArgValues are the values of the provider args' placeholders for one
// attempt: {kind}, {max_steps} ("" with no ceiling), {model}, {reasoning}
// ("" when unresolved), {permission_profile} and {network_access}
// ("true"/"false").
func ArgValues(kind string, maxSteps int, r stratus.Resolved) map[string]string {
	ms := ""
	if maxSteps > 0 {
		ms = strconv.Itoa(maxSteps)
	}
	return map[string]string{
		"{kind}": kind, "{max_steps}": ms, "{model}": r.Model, "{reasoning}": r.Reasoning,
		"{permission_profile}": r.PermissionProfile, "{network_access}": strconv.FormatBool(r.NetworkAccess),
	}
}

// ExpandArgs fills the placeholders of a provider's args (docs/contracts.md
// § The reference engine: a launch spec mirrors the call's kind and step
// ceiling onto argv; § Per-node overrides: the node's model, reasoning and
// grants).
// The rule for an unset value: an argument holding a placeholder that
// expands to the empty string is dropped, together with the argument right
// before it when that one starts with '-' (its flag), so
// ["--model", "{model}"] vanishes when no model is resolved rather than
// send an empty value. Spell such a flag as two arguments: "--model={model}"
// is one argument and expands to "--model=".
func ExpandArgs(args []string, values map[string]string) []string {
	pairs := make([]string, 0, 2*len(values))
	for ph, v := range values {
		pairs = append(pairs, ph, v)
	}
	// One pass: a value is never re-expanded, whatever it holds.
	r := strings.NewReplacer(pairs...)
	out := make([]string, 0, len(args))
	for _, a := range args {
		expanded := r.Replace(a)
		if expanded == "" && a != "" {
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "-") {
				out = out[:n-1]
			}
			continue
		}
		out = append(out, expanded)
	}
	return out
}
