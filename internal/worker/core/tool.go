package core

import (
	"context"
	"encoding/json"
	"path"
	"path/filepath"
	"strconv"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
)

// toolTimeout resolves a tool node's timeout (worc configuration.md §
// tools): node.timeout_seconds → tools.default_timeout_seconds → 3600 s.
func toolTimeout(env *RunEnv, node *flow.Node) int {
	switch {
	case node.TimeoutSeconds != nil && *node.TimeoutSeconds > 0:
		return *node.TimeoutSeconds
	case env.Config.Tools.DefaultTimeoutSeconds > 0:
		return env.Config.Tools.DefaultTimeoutSeconds
	}
	return nodeexec.DefaultToolTimeoutSeconds
}

// ToolContext is the JSON a tool reads on stdin (worc flow-authoring.md §
// Custom tool nodes: only allowlisted paths and the node's args, never
// secrets, the environment or a session id). A path without a value is null.
type ToolContext struct {
	TaskID       string         `json:"task_id"`
	NodeID       string         `json:"node_id"`
	SubtaskOrder *int           `json:"subtask_order"`
	Paths        ToolPaths      `json:"paths"`
	Args         map[string]any `json:"args"`
}

// ToolPaths are the absolute paths a tool is given, from the same variables
// a role file gets (seed 004 § Template variables).
type ToolPaths struct {
	Repo       *string `json:"repo"`
	TaskPath   *string `json:"task_path"`
	PlanPath   *string `json:"plan_path"`
	DiffPath   *string `json:"diff_path"`
	ChecksPath *string `json:"checks_path"`
	ReviewPath *string `json:"review_path"`
}

// toolSpec builds a tool node's exec spec: the run's tools dir
// (RunEnv.ToolsDir, else the work dir's), the resolved timeout and the
// stdin context.
func (s *Service) toolSpec(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (*nodeexec.ToolSpec, error) {
	node := env.Flow.Node(step.Node)
	vars, err := s.TemplateVars(ctx, run, env, step)
	if err != nil {
		return nil, err
	}
	val := func(name string) *string {
		if v := vars[name]; v != "" {
			return &v
		}
		return nil
	}
	tc := ToolContext{TaskID: run.TaskID, NodeID: node.ID, Args: node.Args,
		Paths: ToolPaths{Repo: val("repo_path"), TaskPath: val("task_path"), PlanPath: val("plan_path"),
			DiffPath: val("diff_path"), ChecksPath: val("checks_path"), ReviewPath: val("review_path")}}
	if tc.Args == nil {
		tc.Args = map[string]any{}
	}
	if n, err := strconv.Atoi(vars["subtask_order"]); err == nil {
		tc.SubtaskOrder = &n
	}
	input, err := json.Marshal(tc)
	if err != nil {
		return nil, err
	}
	dir := env.ToolsDir
	if run.Workspace != nil {
		dir = path.Join(run.Workspace.Root, StateDirName, "tools") // WorkspaceSpec.Files carries them
	} else if dir == "" {
		dir = filepath.Join(run.WorkDir, StateDirName, "tools")
	}
	return &nodeexec.ToolSpec{Name: node.Tool, Dir: dir,
		TimeoutSeconds: toolTimeout(env, node), Input: input}, nil
}
