package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/store"
)

// NewHandle mints a step handle (wh- and 8 characters of [a-z0-9]) and
// NewBootstrap a one-time bootstrap value (wb- and 24 characters), both
// from captoken (docs/contracts.md § Bearer authentication).
var NewHandle, NewBootstrap = captoken.NewHandle, captoken.NewBootstrap

// Files of the ctx dir the variables point at (docs/contracts.md § Template
// variables, worc flow-authoring.md § Where a node's output goes). Each is
// relative to the run's ctx dir.
const (
	DiffFile           = "current.diff"        // {diff_path}: the full change against {diff_base}
	ChangeOverviewFile = "change-overview.txt" // {change_overview_path}: one line per changed path
	EnrichedSpecFile   = "task.enriched.md"    // output_artifact: enriched_spec
	PlanFile           = "plan.md"             // output_artifact: plan → {plan_path}
	SummaryFile        = "summary.md"          // output_artifact: summary → {summary_body_path}
	ReportFile         = "report.md"           // output_artifact: report, in the report dir
	SubtasksDir        = "subtasks"            // <NN>.md per subtask spec, <NN>.predecessors.md, <NN>.start.txt
)

// MaxOverviewPaths bounds the paths change-overview.txt lists: at most 200
// paths, then a count of the rest (docs/contracts.md § Template variables).
const MaxOverviewPaths = gitwork.MaxOverviewPaths

// CtxDir returns the run's ctx-dir as a sink key prefix (docs/contracts.md §
// Files are the server's job: placement default workspace/tasks/{task_id}/ctx;
// in the state dir for an embedded run whose repository travels:
// projection.RunCtxDir).
func CtxDir(env *RunEnv, run stratus.Run) (string, error) {
	return projection.RunCtxDir(env.Config.Projection.Placement, run)
}

// ReportDir is the sink key prefix of the flow's report directory (worc
// reference.md § output_policy): docs/research/<task_id> for
// repository_document, .stratus/security-reports/<task_id> for
// private_control_workspace_report (worc's .worc/ is Stratus's .stratus/),
// and "" for a policy without one (code_change).
func ReportDir(f *flow.Flow, taskID string) string {
	switch f.OutputPolicy {
	case "repository_document":
		return path.Join("docs/research", taskID)
	case "private_control_workspace_report":
		return path.Join(StateDirName, "security-reports", taskID)
	}
	return ""
}

// Abs turns a sink key into the absolute path a local engine reads: under
// the work dir, or under the workspace's Root for a run whose repository
// travels (each runner puts its own checkout there; docs/architecture.md §
// Workspaces).
func Abs(run stratus.Run, key string) string {
	if run.Workspace != nil {
		return path.Join(run.Workspace.Root, key)
	}
	return filepath.Join(run.WorkDir, filepath.FromSlash(key))
}

// TaskPathOf is the task file as payloads name it: the operator's path,
// or, for a run whose repository travels, the run's frozen copy placed
// under the workspace's Root (WorkspaceSpec.Files).
func TaskPathOf(run stratus.Run) string {
	if run.Workspace != nil {
		return path.Join(run.Workspace.Root, StateDirName, "task", path.Base(filepath.ToSlash(run.TaskPath)))
	}
	return run.TaskPath
}

// RootOf is the directory engines work in, as payloads name it: the work
// dir, or the workspace's Root.
func RootOf(run stratus.Run) string {
	if run.Workspace != nil {
		return run.Workspace.Root
	}
	return run.WorkDir
}

// OutputNodes lists the nodes whose output is exposed as {<node_id>_path}:
// flow.OutputNodes, the list the validator's lint checks role files
// against (agent, tool and hitl nodes).
func OutputNodes(f *flow.Flow) []string { return flow.OutputNodes(f) }

// LatestSteps returns, per node, the latest completed step of a run (not
// skipped, not a supervisor turn), in creation order, excluding the step
// `except`: one store query, not a read of the whole run's steps.
func (s *Service) LatestSteps(ctx context.Context, runID, except string) ([]stratus.Step, error) {
	return s.Store.LatestSteps(ctx, runID, store.LatestQuery{Status: stratus.StepCompleted, ExceptTID: except,
		SkipVerdicts: []string{OutcomeSkipped}, SkipKinds: []string{SupervisorKind}})
}

// ReadRoleFile reads a role file contained in the flows directory
// (docs/contracts.md § Fatal validation: role_file paths contain no traversal)
// and splits off its optional front matter.
func ReadRoleFile(flowDir, rel string) (prompt.RoleMeta, string, error) {
	raw, err := ReadRoleFileRaw(flowDir, rel)
	if err != nil {
		return prompt.RoleMeta{}, "", err
	}
	meta, body, err := prompt.SplitRoleFile(raw)
	if err != nil {
		return meta, "", fmt.Errorf("role file %s: %w", rel, err)
	}
	return meta, body, nil
}

// ReadRoleFileRaw reads role file rel of the flow directory flowDir as
// text, front matter included (ReadRoleFile splits it off). Errors:
// EINVALID (field role_file) for a path that is empty, absolute, or holds
// ".." or a backslash; ENOTFOUND (field role_file) when the file does not
// exist; flow.ReadRoleFile's for one over flow.MaxRoleFileBytes (ETOOLARGE)
// or not UTF-8 (EINVALID) (docs/contracts.md § Prompt templates, § Fatal
// validation).
func ReadRoleFileRaw(flowDir, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) || strings.Contains(rel, "..") || strings.Contains(rel, "\\") {
		return "", stratus.FieldErrorf(stratus.EINVALID, "role_file", "%q must be a relative path inside %s without ..", rel, flowDir)
	}
	// Capped at flow.MaxRoleFileBytes, UTF-8, a byte order mark skipped.
	b, err := flow.ReadRoleFile(filepath.Join(flowDir, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, "role_file", "role file %s does not exist", filepath.Join(flowDir, rel))
	} else if err != nil {
		return "", fmt.Errorf("read role file: %w", err)
	}
	return string(b), nil
}

var secretLike = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(sk-[a-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|xox[baprs]-[A-Za-z0-9-]{10,})`)
})

// Redact masks token-shaped secrets in audit copies (docs/contracts.md §
// Prompt templates: rendered prompts are written redacted).
func Redact(s string) string { return secretLike().ReplaceAllString(s, "[REDACTED]") }

// MorePaths is how a list cut short names the n paths it left out: "1
// more path", "n more paths".
func MorePaths(n int) string {
	if n == 1 {
		return "1 more path"
	}
	return fmt.Sprintf("%d more paths", n)
}

// InRegion reports whether node id belongs to the flow's decomposition
// region (worc reference.md § decomposition: sub_flow).
func InRegion(f *flow.Flow, id string) bool {
	return f.Decomposition != nil && slices.Contains(f.Decomposition.SubFlow, id)
}
