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
	"strconv"
	"strings"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/task"
)

var newHandle, newBootstrap = captoken.NewHandle, captoken.NewBootstrap

// Files of the ctx dir the variables point at (seed 004 § Template
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

// maxOverviewPaths bounds the paths change-overview.txt lists (seed 004 §
// Template variables: at most 200 paths, then a count of the rest).
const maxOverviewPaths = gitwork.MaxOverviewPaths

// CtxDir returns the run's ctx-dir as a sink key prefix (seed 000 § Files
// are the server's job: placement default workspace/tasks/{task_id}/ctx;
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
// travels (each runner puts its own checkout there; issue 12 § 2).
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
// `except`: one store query, not the whole run (issue 16 § 3).
func (s *Service) LatestSteps(ctx context.Context, runID, except string) ([]stratus.Step, error) {
	return s.Store.LatestSteps(ctx, runID, store.LatestQuery{Status: stratus.StepCompleted, ExceptTID: except,
		SkipVerdicts: []string{OutcomeSkipped}, SkipKinds: []string{SupervisorKind}})
}

// TemplateVars builds the role-file variables of one node run (seed 004 §
// Template variables, § Node outputs): metadata and artifact paths only,
// never bodies. A variable without a value is absent (it renders as "").
//
//   - task_id, stage (the node id), repo_path and its alias repo (the work
//     dir, worc prompt-variables.md), task_path, report_dir (the output
//     policy's report dir; the ctx dir for a policy without one);
//   - from the latest completed step of each earlier node: plan_path
//     (<ctx>/plan.md), summary_body_path (<ctx>/summary.md), review_path
//     (the latest evaluator's <ctx>/<node>.md), checks_path (the latest
//     checks step's <ctx>/<node>.md), <agent>_path (<ctx>/<node>.md, or the
//     output_file copy <ctx>/<node>.out/<file>; none for a node filling an
//     output slot) and <tool>_path (<ctx>/tools/<node>/stdout.txt);
//   - diff_path, change_overview_path, diff_base (diffVars), when the
//     step needs them (needsDiff) or a subtask's start snapshot is due;
//   - subtask_order, subtask_count, subtask_spec_path and
//     predecessor_context inside a decomposition region (subtaskVars).
//
// memory_path and conflicts_path have no producer in Stratus: always empty.
// Rendering writes files as a side effect: the diff snapshot and, for a
// subtask, its start snapshot and predecessor brief. The snapshot costs
// three git processes, so it is taken only for a step that reads it: one
// whose role file names a diff variable, a tool node (its stdin carries
// diff_path), or the first render of a subtask (its start snapshot).
func (s *Service) TemplateVars(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (map[string]string, error) {
	dir, err := CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	rd := ReportDir(env.Flow, run.TaskID)
	if rd == "" {
		rd = dir
	}
	vars := map[string]string{
		"task_id":    run.TaskID,
		"stage":      step.Node,
		"repo_path":  RootOf(run),
		"repo":       RootOf(run),
		"task_path":  TaskPathOf(run),
		"report_dir": Abs(run, rd),
	}
	prior, err := s.LatestSteps(ctx, run.ID, step.TID)
	if err != nil {
		return nil, err
	}
	for _, st := range prior {
		if n := env.Flow.Node(st.Node); n != nil {
			if name, key := outputVar(n, st, dir); name != "" {
				vars[name] = Abs(run, key)
			}
		}
	}
	if run.WorkDir == "" {
		return vars, nil // nothing on disk to point at
	}
	if ws := run.Workspace; ws != nil {
		// The runner writes base..head where these point (WorkspaceSpec
		// DiffPath), before the engine starts: empty until the first edit.
		if ws.Head != ws.Base {
			vars["diff_path"], vars["change_overview_path"], vars["diff_base"] = Abs(run, path.Join(dir, DiffFile)), Abs(run, path.Join(dir, ChangeOverviewFile)), ws.Base
		}
		return vars, s.subtaskVars(ctx, run, env, step, nil, vars)
	}
	var snap *snapshot
	need := s.needsDiff(env, step)
	if !need {
		if need, err = s.startDue(ctx, run, env, step); err != nil {
			return nil, err
		}
	}
	if need {
		if snap, err = s.diffVars(ctx, run, env, vars); err != nil {
			return nil, err
		}
	}
	if err := s.subtaskVars(ctx, run, env, step, snap, vars); err != nil {
		return nil, err
	}
	return vars, nil
}

// outputVar names the variable a completed step of node n sets, and the
// sink key it points at ("" when it sets none): seed 004 § Node outputs and
// worc flow-authoring.md § Where a node's output goes.
func outputVar(n *flow.Node, st stratus.Step, dir string) (name, key string) {
	switch n.Kind {
	case "agent":
		switch n.OutputArtifact {
		case "plan":
			return "plan_path", path.Join(dir, PlanFile)
		case "summary":
			return "summary_body_path", path.Join(dir, SummaryFile)
		case "enriched_spec", "report":
			// A slot node's channel is its slot; these two have no variable.
			return "", ""
		}
		if v, err := DecodeStepValue(st.Value); err == nil && v.Output != "" {
			return n.ID + "_path", path.Join(dir, v.Output)
		}
		return n.ID + "_path", path.Join(dir, n.ID+".md")
	case "tool":
		return n.ID + "_path", path.Join(dir, "tools", n.ID, "stdout.txt")
	case "evaluator":
		return "review_path", path.Join(dir, n.ID+".md")
	case "checks":
		return "checks_path", path.Join(dir, n.ID+".md")
	case flow.KindHITL:
		// The human's reply, as Human wrote it (writeReply): the request,
		// the decision and the answer or the rejection's reason.
		if prompt.ReservedNodeID(n.ID) {
			return "", ""
		}
		return n.ID + "_path", path.Join(dir, n.ID+".md")
	}
	return "", ""
}

// diffTokens are the variables a diff snapshot feeds (seed 004 § Template
// variables).
var diffTokens = []string{"diff_path", "change_overview_path", "diff_base"}

// needsDiff reports whether a step reads the diff variables: a tool node
// (its stdin carries diff_path, worc flow-authoring.md § Custom tool
// nodes), or a step whose role file — the node's role_file or
// resume_role_file, a supervisor turn's role files — names one of
// diffTokens (prompt.Tokens). A role file that cannot be read renders
// nothing, so it needs nothing.
func (s *Service) needsDiff(env *RunEnv, step stratus.Step) bool {
	var files []string
	if step.Kind == SupervisorKind {
		role, fin := supervisor.RoleFiles(env.Config.Supervisor, env.Flow)
		files = []string{role, fin}
	} else if n := env.Flow.Node(step.Node); n != nil {
		if n.Kind == "tool" {
			return true
		}
		files = []string{n.RoleFile, n.ResumeRoleFile}
	}
	for _, rel := range files {
		if rel == "" {
			continue
		}
		raw, err := readRoleFileRaw(env.FlowDir, rel)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(prompt.Tokens(raw), func(t string) bool { return slices.Contains(diffTokens, t) }) {
			return true
		}
	}
	return false
}

// startDue reports whether a step is the first render of its subtask, whose
// snapshot subtaskVars records as <ctx>/subtasks/<NN>.start.txt: a step in
// the decomposition region of a split task whose start snapshot is not
// recorded yet.
func (s *Service) startDue(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (bool, error) {
	if !inRegion(env.Flow, step.Node) {
		return false, nil
	}
	order, _, err := s.SubtaskOf(ctx, env, step)
	if err != nil || order == 0 {
		return false, err
	}
	dir, err := CtxDir(env, run)
	if err != nil {
		return false, err
	}
	_, err = s.Files(run).Get(ctx, SubtaskKey(dir, order, ".start.txt"))
	switch stratus.ErrorCode(err) {
	case "":
		return false, nil
	case stratus.ENOTFOUND:
		return true, nil
	}
	return false, err
}

// ReadRoleFile reads a role file contained in the flows directory (seed 004
// § Fatal validation: role_file paths contain no traversal) and splits off
// its optional front matter.
func ReadRoleFile(flowDir, rel string) (prompt.RoleMeta, string, error) {
	raw, err := readRoleFileRaw(flowDir, rel)
	if err != nil {
		return prompt.RoleMeta{}, "", err
	}
	meta, body, err := prompt.SplitRoleFile(raw)
	if err != nil {
		return meta, "", fmt.Errorf("role file %s: %w", rel, err)
	}
	return meta, body, nil
}

func readRoleFileRaw(flowDir, rel string) (string, error) {
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

// AdmitNode runs before a node is dispatched: it records the run's diff
// base on the run's first dispatch (a failure is a warning: the diff
// variables then stay empty; a work dir that is not a git work tree is
// not a failure), then decides whether the node is skipped.
func (s *Service) AdmitNode(ctx context.Context, run stratus.Run, env *RunEnv, n *flow.Node) (skip bool, why string) {
	if _, _, err := s.diffBase(ctx, run); err != nil {
		s.Warnf("run %s: cannot record the diff base: %v; {diff_path} stays empty", run.ID, err)
	}
	return s.SkipNode(n, env)
}

// SkipNode decides whether a node is skipped (worc reference.md §
// Conditional nodes): the task's nodes.<id>.enabled: false first, then the
// node's `when` predicate. An unknown fact resolves false and is warned
// about once per flow and fact.
func (s *Service) SkipNode(n *flow.Node, env *RunEnv) (bool, string) {
	if !NodeEnabled(env.Task, n.ID) {
		return true, "disabled by the task (nodes." + n.ID + ".enabled: false)"
	}
	if n.When == nil || n.When.Fact == "" {
		return false, ""
	}
	v, known := resolveFact(env.Flow, env.Task, n.When.Fact)
	if !known {
		if _, dup := s.WarnedFacts.LoadOrStore(factKey{env.Flow.Name, n.When.Fact}, true); !dup {
			s.Warnf("flow %s node %s: when.fact %q is not a known fact (known: derived.needs_refinement, config.external_research); it resolves to false", env.Flow.Name, n.ID, n.When.Fact)
		}
	}
	if !whenHolds(v, n.When.Equals) {
		return true, fmt.Sprintf("when %s is %v", n.When.Fact, v)
	}
	return false, ""
}

// factKey names an unknown fact a service has warned about
// (Service.warnedFacts).
type factKey struct{ flow, fact string }

// whenHolds compares a fact's value with the predicate's `equals` (absent
// means true). A non-boolean equals matches by its text ("true"/"false").
func whenHolds(v bool, equals any) bool {
	switch e := equals.(type) {
	case nil:
		return v
	case bool:
		return v == e
	default:
		return strconv.FormatBool(v) == strings.ToLower(fmt.Sprint(e))
	}
}

// resolveFact resolves a `when` fact (worc reference.md § Conditional
// nodes; the names are a closed set of two):
//
//   - derived.needs_refinement: the task is not well-formed — well-formed
//     is a non-empty description plus an `## Acceptance criteria` section;
//   - config.external_research: the flow declares a network_policy.
//
// Any other name resolves false with known=false.
func resolveFact(f *flow.Flow, t *task.Task, fact string) (v, known bool) {
	switch fact {
	case "derived.needs_refinement":
		return NeedsRefinement(t.Body), true
	case "config.external_research":
		return f.NetworkPolicy != "", true
	}
	return false, false
}

// NeedsRefinement reports whether a task body is not well-formed (worc
// reference.md § Conditional nodes, worc-task SKILL.md § Body sections): it
// is well-formed when its description is non-empty — the `## Description`
// section, or the whole body when it has no `##` section at all — and it
// has an `## Acceptance criteria` section. Headings match in any letter
// case; headings inside fenced code blocks do not count.
func NeedsRefinement(body string) bool {
	sections := map[string]string{}
	var cur string
	var text strings.Builder
	anyH2, fence := false, ""
	flush := func() {
		if cur != "" {
			sections[cur] += text.String()
		}
		text.Reset()
	}
	var whole strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
		} else if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
		} else if h, ok := strings.CutPrefix(t, "## "); ok {
			flush()
			anyH2 = true
			cur = strings.ToLower(strings.TrimRight(strings.TrimSpace(strings.TrimRight(h, "#")), ":"))
			continue
		}
		whole.WriteString(line + "\n")
		if cur != "" {
			text.WriteString(line + "\n")
		}
	}
	flush()
	desc := strings.TrimSpace(whole.String())
	if anyH2 {
		desc = strings.TrimSpace(sections["description"])
	}
	_, ac := sections["acceptance criteria"]
	return desc == "" || !ac
}

// NodeEnabled reports whether the task leaves node id enabled (worc task
// format: nodes.<id>.enabled: false disables a node for this task).
func NodeEnabled(t *task.Task, id string) bool {
	nodes, _ := t.Front["nodes"].(map[string]any)
	o, _ := nodes[id].(map[string]any)
	if e, ok := o["enabled"].(bool); ok {
		return e
	}
	return true
}

var secretLike = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(sk-[a-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|xox[baprs]-[A-Za-z0-9-]{10,})`)
})

// Redact masks token-shaped secrets in audit copies (seed 004 § Safety:
// rendered prompts are written redacted).
func Redact(s string) string { return secretLike().ReplaceAllString(s, "[REDACTED]") }

// diffBaseKey is the sink key recording a task's diff base: "<run id>
// <commit sha>\n", written at the run's first dispatch.
func diffBaseKey(taskID string) string {
	return path.Join(StateDirName, "logs", taskID, "diff_base")
}

// diffBase returns the run's work tree and the commit the run's change is
// measured from: HEAD of the work dir as recorded at the run's first
// dispatch (seed 004 § Template variables: {diff_base} is the full SHA the
// change is measured from). nil and "" when the work dir is not a git
// work tree with a commit (gitwork.ErrNotTree: no repository contains it,
// git is not installed, the enclosing repository ignores it, or it has no
// commit yet): there is no diff, and nothing to warn about. The answer is
// kept for the run's life in this process, so later dispatches run no git.
func (s *Service) diffBase(ctx context.Context, run stratus.Run) (*gitwork.Tree, string, error) {
	if run.WorkDir == "" || run.Workspace != nil {
		return nil, "", nil
	}
	if v, ok := s.RunTrees.Load(run.ID); ok {
		rt := v.(runTree)
		return rt.tree, rt.base, nil
	}
	tree, base, err := s.openBase(ctx, run)
	if errors.Is(err, gitwork.ErrNotTree) {
		tree, base, err = nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	s.RunTrees.Store(run.ID, runTree{tree, base})
	return tree, base, nil
}

// openBase opens the run's work tree and reads its diff base from the
// record of the run's first dispatch, or records HEAD as it.
func (s *Service) openBase(ctx context.Context, run stratus.Run) (*gitwork.Tree, string, error) {
	tree, err := gitwork.Open(ctx, run.WorkDir)
	if err != nil {
		return nil, "", err
	}
	key := diffBaseKey(run.TaskID)
	b, err := s.Files(run).Get(ctx, key)
	if err == nil {
		if id, sha, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok && id == run.ID {
			return tree, sha, nil
		}
	} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return nil, "", err
	}
	sha, err := tree.Head(ctx)
	if err != nil {
		return nil, "", err
	}
	return tree, sha, s.Files(run).Put(ctx, key, []byte(run.ID+" "+sha+"\n"))
}

type runTree struct {
	tree *gitwork.Tree // nil: not a git work tree with a commit
	base string
}

// changedPath is one path of a diff snapshot; snapshot is the change of
// the work dir against the diff base (gitwork).
type (
	changedPath = gitwork.ChangedPath
	snapshot    = gitwork.Snapshot
)

// diffVars takes a snapshot of the work dir against the run's diff base
// and, when it holds a change, writes <ctx>/current.diff and
// <ctx>/change-overview.txt and sets diff_path, change_overview_path and
// diff_base (seed 004 § Template variables: they arrive together, empty
// until the first edit, replaced every time the diff is). The snapshot is
// returned for the subtask bookkeeping (nil when there is none). A git
// failure leaves the variables empty with a warning.
func (s *Service) diffVars(ctx context.Context, run stratus.Run, env *RunEnv, vars map[string]string) (*snapshot, error) {
	tree, base, err := s.diffBase(ctx, run)
	if err != nil || tree == nil {
		return nil, err
	}
	dir, err := CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	// Stratus's own files are not the change: its state dir, the ctx dir,
	// and the task file when it lives in the work dir.
	exclude := []string{StateDirName, dir}
	if rel, err := filepath.Rel(run.WorkDir, run.TaskPath); err == nil && run.TaskPath != "" && filepath.IsLocal(rel) {
		exclude = append(exclude, filepath.ToSlash(rel))
	}
	snap, err := tree.Snapshot(ctx, base, exclude)
	if err != nil {
		s.Warnf("run %s: diff against %s failed: %v; {diff_path} stays empty", run.ID, base, err)
		return nil, nil
	}
	if len(snap.Paths) == 0 {
		return snap, nil
	}
	diffKey := path.Join(dir, DiffFile)
	if err := s.Files(run).Put(ctx, diffKey, snap.Diff); err != nil {
		return nil, err
	}
	ovKey := path.Join(dir, ChangeOverviewFile)
	if err := s.Files(run).Put(ctx, ovKey, changeOverview(snap, Abs(run, diffKey))); err != nil {
		return nil, err
	}
	vars["diff_path"], vars["change_overview_path"], vars["diff_base"] = Abs(run, diffKey), Abs(run, ovKey), base
	return snap, nil
}

// changeOverview renders change-overview.txt (gitwork.Snapshot.Overview).
func changeOverview(snap *snapshot, diffPath string) []byte { return snap.Overview(diffPath) }

func morePaths(n int) string {
	if n == 1 {
		return "1 more path"
	}
	return fmt.Sprintf("%d more paths", n)
}

// inRegion reports whether node id belongs to the flow's decomposition
// region (worc reference.md § decomposition: sub_flow).
func inRegion(f *flow.Flow, id string) bool {
	return f.Decomposition != nil && slices.Contains(f.Decomposition.SubFlow, id)
}
