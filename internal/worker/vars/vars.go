package vars

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/publishing"
)

// execDescription is the attempt's "prompt" for a checks or tool node: no
// role file is rendered, so the record says what runs.
func execDescription(env *core.RunEnv, node *flow.Node) string {
	if node.Kind == flow.KindPublish {
		return fmt.Sprintf("publish node %s: push the task branch to %s and open its pull request (git.pr_base %s)", node.ID, env.Config.Git.RemoteName(), env.Config.Git.Base())
	}
	if node.Kind == flow.KindTool {
		return fmt.Sprintf("tool node %s: run %s/tools/%s with the JSON context on stdin", node.ID, core.StateDirName, node.Tool)
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

func manifestName(node *flow.Node) string {
	if node.Manifest != "" {
		return node.Manifest
	}
	return "sources.json"
}

// ExecSpec builds the `exec` field of a checks or tool node's payload.
func ExecSpec(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (*nodeexec.Spec, error) {
	node := env.Flow.Node(step.Node)
	spec := &nodeexec.Spec{Kind: node.Kind, Dir: core.RootOf(run), AllowedEnvironment: env.Config.Security.AllowedEnvironment}
	if spec.AllowedEnvironment == nil {
		spec.AllowedEnvironment = []string{}
	}
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	if node.Kind == flow.KindTool {
		spec.Tool, err = toolSpec(ctx, s, run, env, step)
		return spec, err
	}
	if node.Kind == flow.KindPublish {
		spec.Publish, err = publishing.Spec(ctx, s, run, env)
		return spec, err
	}
	cs := &nodeexec.ChecksSpec{Checker: node.Checker, Exclude: []string{core.StateDirName, dir}}
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
			out := nodeexec.CommandSet{Name: n, Paths: set.Paths, TimeoutSeconds: core.SetTimeout(env, set.TimeoutSeconds), SkipIfUnavailable: set.SkipIfUnavailable}
			for _, c := range set.Commands {
				out.Commands = append(out.Commands, nodeexec.Command{Name: c.Name, Argv: c.Argv, Cwd: c.Cwd})
			}
			cs.CommandSets = append(cs.CommandSets, out)
		}
	case nodeexec.Citation:
		rd := core.ReportDir(env.Flow, run.TaskID)
		if rd == "" {
			rd = dir
		}
		cs.Manifest = core.Abs(run, path.Join(rd, manifestName(node)))
	default:
		_, why := core.ExecRefusal(env, node)
		return nil, stratus.Errorf(stratus.EUNPROCESSABLE, "%s", why)
	}
	spec.Checks = cs
	spec.Env = env.Config.Checks.Env
	return spec, nil
}

// AttemptPrompt is what an attempt records as its prompt: the rendered
// role file, or for a checks or tool node (no role file, no engine) a line
// saying what runs.
func AttemptPrompt(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (string, error) {
	node := env.Flow.Node(step.Node)
	if core.IsExec(node.Kind) {
		return execDescription(env, node), nil
	}
	return RenderPrompt(ctx, s, run, env, step)
}

// RenderPrompt renders the node's role file with the run's variables.
func RenderPrompt(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (string, error) {
	node := env.Flow.Node(step.Node)
	_, tmpl, err := core.ReadRoleFile(env.FlowDir, node.RoleFile)
	if err != nil {
		return "", err
	}
	vars, err := TemplateVars(ctx, s, run, env, step)
	if err != nil {
		return "", err
	}
	// An agent that asked a human reads the reply (core/hitl.go); one that may
	// not ask has none to read (and no need to read the run's steps).
	human := ""
	if flow.AsksHuman(node) {
		if human, err = s.HumanReplySection(ctx, run.ID, step); err != nil {
			return "", err
		}
	}
	return prompt.Render(tmpl, vars, core.OutputNodes(env.Flow)) + human, nil
}

// SystemPrompt is the baked system text of an attempt: who the worker is and
// how its output travels (docs/contracts.md § The shape: end with the
// submit, never write the deliverable to a self-chosen path).
func SystemPrompt(env *core.RunEnv, step stratus.Step) string {
	return fmt.Sprintf("You are the %q step (%s) of the Stratus flow %q for task %q.\n"+
		"Your final report is submitted for you: never write your deliverable to a path you choose.\n"+
		"To hand over a named file, stage it as a part: POST $STRATUS_API_URL/v1/worker/artifact?name=<file name> "+
		"with the header `Authorization: Bearer $STRATUS_HANDLE` and the file's bytes as the body.\n",
		step.Node, step.StepRef, env.Flow.Name, env.Task.ID)
}

// SubtaskOf returns the subtask a step of a decomposition region runs and
// the count of subtasks (0, 0 outside a region, or when the latest
// completed step of the proposer before it did not split the task).
//
// The order is the step's seeded value (StepValue.SubtaskOrder, set at
// dispatch from the message when the state machine carries it); otherwise
// it is the number of visits of the region's entry node since that
// proposer step, this step included (each subtask enters the region once).
// It reads those nodes' steps back to that proposer step, not the run's.
func SubtaskOf(ctx context.Context, s *core.Service, env *core.RunEnv, step stratus.Step) (order, count int, err error) {
	d := env.Flow.Decomposition
	if !core.InRegion(env.Flow, step.Node) {
		return 0, 0, nil
	}
	entry := regionEntry(env.Flow)
	proposed := func(st stratus.Step) bool { return st.Node == d.ProposedBy && st.Status == stratus.StepCompleted }
	// The step, back to the proposer's latest completion before it: the
	// proposer's, the entry's and the step's node's steps (store.Before),
	// not the run's (README.md § Performance).
	steps, err := store.Before(ctx, s.Store, step.RunID, []string{d.ProposedBy, entry, step.Node}, step.TID, 16, proposed)
	if err != nil {
		return 0, 0, err
	}
	if len(steps) == 0 || !proposed(steps[len(steps)-1]) || steps[len(steps)-1].TID == step.TID {
		return 0, 0, nil
	}
	if pv, err := core.DecodeStepValue(steps[len(steps)-1].Value); err != nil || pv.Subtasks < 2 {
		return 0, 0, nil
	} else {
		count = pv.Subtasks
	}
	if v, err := core.DecodeStepValue(step.Value); err == nil && v.SubtaskOrder > 0 {
		return min(v.SubtaskOrder, count), count, nil
	}
	for _, st := range steps[:len(steps)-1] {
		if st.Node == entry {
			order++
		}
	}
	return max(1, min(order, count)), count, nil
}

// regionEntry is the node a subtask enters its region by: the first
// sub_flow node an edge from outside the region leads to (sub_flow[0] when
// none does).
func regionEntry(f *flow.Flow) string {
	sub := f.Decomposition.SubFlow
	for _, id := range sub {
		for _, e := range f.Edges {
			if e.To == id && !slices.Contains(sub, e.From) {
				return id
			}
		}
	}
	if len(sub) == 0 {
		return ""
	}
	return sub[0]
}

// implementationNode is the region's implementation node, the one
// {predecessor_context} is injected into (docs/contracts.md § Template
// variables):
// the region's entry when it is an agent, else its first agent node.
func implementationNode(f *flow.Flow) string {
	if n := f.Node(regionEntry(f)); n != nil && n.Kind == "agent" {
		return n.ID
	}
	for _, id := range f.Decomposition.SubFlow {
		if n := f.Node(id); n != nil && n.Kind == "agent" {
			return id
		}
	}
	return ""
}

// subtaskVars sets the decomposition variables of a step inside the region
// (docs/contracts.md § Template variables): subtask_order, subtask_count and
// subtask_spec_path for every node, and predecessor_context for the
// region's implementation node from subtask 2 on. On the subtask's first
// render with a diff snapshot it records the snapshot as
// <ctx>/subtasks/<NN>.start.txt: consecutive start snapshots tell which
// files each subtask changed.
func subtaskVars(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step, snap *snapshot, vars map[string]string) error {
	order, count, err := SubtaskOf(ctx, s, env, step)
	if err != nil || order == 0 {
		return err
	}
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return err
	}
	vars["subtask_order"], vars["subtask_count"] = strconv.Itoa(order), strconv.Itoa(count)
	vars["subtask_spec_path"] = core.Abs(run, core.SubtaskKey(dir, order, ".md"))
	if snap != nil {
		key := core.SubtaskKey(dir, order, ".start.txt")
		if _, err := s.Files(run).Get(ctx, key); stratus.ErrorCode(err) == stratus.ENOTFOUND {
			if err := s.Files(run).Put(ctx, key, snapshotLines(snap)); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	if order < 2 || step.Node != implementationNode(env.Flow) {
		return nil
	}
	key := core.SubtaskKey(dir, order, ".predecessors.md")
	if err := s.Files(run).Put(ctx, key, predecessorBrief(ctx, s, run, dir, order, count)); err != nil {
		return err
	}
	vars["predecessor_context"] = core.Abs(run, key)
	return nil
}

// snapshotLines records a snapshot as "<kind>\t<blob>\t<path>" lines.
func snapshotLines(snap *snapshot) []byte {
	var b bytes.Buffer
	for _, p := range snap.Paths {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", p.Kind, p.Blob, p.Path)
	}
	return b.Bytes()
}

// readSnapshot reads a start snapshot as path → "<kind> <blob>"; ok is
// false when it was not recorded.
func readSnapshot(ctx context.Context, s *core.Service, run stratus.Run, key string) (map[string]string, bool) {
	b, err := s.Files(run).Get(ctx, key)
	if err != nil {
		return nil, false
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, "\t", 3); len(f) == 3 {
			m[f[2]] = f[0] + " " + f[1]
		}
	}
	return m, true
}

// predecessorBrief renders {predecessor_context} for subtask order, the
// deterministic factual floor (docs/contracts.md § Template variables, §
// What the supervisor layer does): for each
// earlier subtask, its spec path, the files it changed — those whose state
// differs between its start snapshot and the next subtask's — and the
// acceptance-criteria lines of its spec.
func predecessorBrief(ctx context.Context, s *core.Service, run stratus.Run, dir string, order, count int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Predecessor handoff: subtask %d of %d\n\n", order, count)
	b.WriteString("Facts Stratus recorded about the subtasks before this one: ground truth for the files changed, the spec for the intent.\n")
	for j := 1; j < order; j++ {
		specKey := core.SubtaskKey(dir, j, ".md")
		spec, _ := s.Files(run).Get(ctx, specKey)
		title, criteria := specFacts(string(spec))
		fmt.Fprintf(&b, "\n## Subtask %d of %d: %s\n\n- Spec: %s\n", j, count, title, core.Abs(run, specKey))
		from, okFrom := readSnapshot(ctx, s, run, core.SubtaskKey(dir, j, ".start.txt"))
		to, okTo := readSnapshot(ctx, s, run, core.SubtaskKey(dir, j+1, ".start.txt"))
		switch changed := changedBetween(from, to); {
		case !okFrom || !okTo:
			b.WriteString("- Changed files: not recorded (no diff snapshot: the work dir is not a git work tree with a commit)\n")
		case len(changed) == 0:
			b.WriteString("- Changed files: none\n")
		default:
			b.WriteString("- Changed files:\n")
			for i, p := range changed {
				if i == core.MaxOverviewPaths {
					fmt.Fprintf(&b, "  - … and %s\n", core.MorePaths(len(changed)-i))
					break
				}
				fmt.Fprintf(&b, "  - %s\n", p)
			}
		}
		if len(criteria) == 0 {
			b.WriteString("- Acceptance criteria: none listed in the spec\n")
			continue
		}
		b.WriteString("- Acceptance criteria:\n")
		for _, l := range criteria {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.Bytes()
}

// changedBetween lists, sorted, the paths whose recorded state differs
// between two snapshots.
func changedBetween(from, to map[string]string) []string {
	var out []string
	for p, v := range to {
		if from[p] != v {
			out = append(out, p)
		}
	}
	for p := range from {
		if _, ok := to[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// specFacts reads a subtask spec's title (its first "# " heading, after
// "Subtask N of M: ") and the non-blank lines of its "## Acceptance
// criteria" section.
func specFacts(spec string) (title string, criteria []string) {
	title = "untitled"
	in := false
	for _, l := range strings.Split(spec, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "# ") && title == "untitled":
			title = strings.TrimSpace(t[2:])
			if _, rest, ok := strings.Cut(title, ": "); ok && strings.HasPrefix(title, "Subtask ") {
				title = rest
			}
		case strings.HasPrefix(t, "## "):
			in = strings.EqualFold(strings.TrimRight(strings.TrimSpace(t[3:]), ":"), "acceptance criteria")
		case in && t != "":
			criteria = append(criteria, t)
		}
	}
	return title, criteria
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
// a role file gets (docs/contracts.md § Template variables).
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
func toolSpec(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (*nodeexec.ToolSpec, error) {
	node := env.Flow.Node(step.Node)
	vars, err := TemplateVars(ctx, s, run, env, step)
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
		dir = path.Join(run.Workspace.Root, core.StateDirName, "tools") // WorkspaceSpec.Files carries them
	} else if dir == "" {
		dir = filepath.Join(run.WorkDir, core.StateDirName, "tools")
	}
	return &nodeexec.ToolSpec{Name: node.Tool, Dir: dir,
		TimeoutSeconds: core.ToolTimeout(env, node), Input: input}, nil
}

// TemplateVars builds the role-file variables of one node run
// (docs/contracts.md § Template variables; docs/prompt-variables.md § Core
// variables, § Node outputs): metadata and artifact paths only,
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
func TemplateVars(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (map[string]string, error) {
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	rd := core.ReportDir(env.Flow, run.TaskID)
	if rd == "" {
		rd = dir
	}
	vars := map[string]string{
		"task_id":    run.TaskID,
		"stage":      step.Node,
		"repo_path":  core.RootOf(run),
		"repo":       core.RootOf(run),
		"task_path":  core.TaskPathOf(run),
		"report_dir": core.Abs(run, rd),
	}
	prior, err := s.LatestSteps(ctx, run.ID, step.TID)
	if err != nil {
		return nil, err
	}
	for _, st := range prior {
		if n := env.Flow.Node(st.Node); n != nil {
			if name, key := outputVar(n, st, dir); name != "" {
				vars[name] = core.Abs(run, key)
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
			vars["diff_path"], vars["change_overview_path"], vars["diff_base"] = core.Abs(run, path.Join(dir, core.DiffFile)), core.Abs(run, path.Join(dir, core.ChangeOverviewFile)), ws.Base
		}
		return vars, subtaskVars(ctx, s, run, env, step, nil, vars)
	}
	var snap *snapshot
	need := needsDiff(s, env, step)
	if !need {
		if need, err = startDue(ctx, s, run, env, step); err != nil {
			return nil, err
		}
	}
	if need {
		if snap, err = diffVars(ctx, s, run, env, vars); err != nil {
			return nil, err
		}
	}
	if err := subtaskVars(ctx, s, run, env, step, snap, vars); err != nil {
		return nil, err
	}
	return vars, nil
}

// outputVar names the variable a completed step of node n sets, and the
// sink key it points at ("" when it sets none): docs/prompt-variables.md §
// Node outputs and worc flow-authoring.md § Where a node's output goes.
func outputVar(n *flow.Node, st stratus.Step, dir string) (name, key string) {
	switch n.Kind {
	case "agent":
		switch n.OutputArtifact {
		case "plan":
			return "plan_path", path.Join(dir, core.PlanFile)
		case "summary":
			return "summary_body_path", path.Join(dir, core.SummaryFile)
		case "enriched_spec", "report":
			// A slot node's channel is its slot; these two have no variable.
			return "", ""
		}
		if v, err := core.DecodeStepValue(st.Value); err == nil && v.Output != "" {
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

// diffTokens are the variables a diff snapshot feeds (docs/contracts.md §
// Template variables).
var diffTokens = []string{"diff_path", "change_overview_path", "diff_base"}

// needsDiff reports whether a step reads the diff variables: a tool node
// (its stdin carries diff_path, worc flow-authoring.md § Custom tool
// nodes), or a step whose role file — the node's role_file or
// resume_role_file, a supervisor turn's role files — names one of
// diffTokens (prompt.Tokens). A role file that cannot be read renders
// nothing, so it needs nothing.
func needsDiff(s *core.Service, env *core.RunEnv, step stratus.Step) bool {
	var files []string
	if step.Kind == core.SupervisorKind {
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
		raw, err := core.ReadRoleFileRaw(env.FlowDir, rel)
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
func startDue(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) (bool, error) {
	if !core.InRegion(env.Flow, step.Node) {
		return false, nil
	}
	order, _, err := SubtaskOf(ctx, s, env, step)
	if err != nil || order == 0 {
		return false, err
	}
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return false, err
	}
	_, err = s.Files(run).Get(ctx, core.SubtaskKey(dir, order, ".start.txt"))
	switch stratus.ErrorCode(err) {
	case "":
		return false, nil
	case stratus.ENOTFOUND:
		return true, nil
	}
	return false, err
}

// AdmitNode runs before a node is dispatched: it records the run's diff
// base on the run's first dispatch (a failure is a warning: the diff
// variables then stay empty; a work dir that is not a git work tree is
// not a failure), then decides whether the node is skipped.
func AdmitNode(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, n *flow.Node) (skip bool, why string) {
	if _, _, err := diffBase(ctx, s, run); err != nil {
		s.Warnf("run %s: cannot record the diff base: %v; {diff_path} stays empty", run.ID, err)
	}
	return SkipNode(s, n, env)
}

// SkipNode decides whether a node is skipped (worc reference.md §
// Conditional nodes): the task's nodes.<id>.enabled: false first, then the
// node's `when` predicate. An unknown fact resolves false and is warned
// about once per flow and fact.
func SkipNode(s *core.Service, n *flow.Node, env *core.RunEnv) (bool, string) {
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

// diffBaseKey is the sink key recording a task's diff base: "<run id>
// <commit sha>\n", written at the run's first dispatch.
func diffBaseKey(taskID string) string {
	return path.Join(core.StateDirName, "logs", taskID, "diff_base")
}

// diffBase returns the run's work tree and the commit the run's change is
// measured from: HEAD of the work dir as recorded at the run's first dispatch
// ({diff_base} is the full SHA the change is measured from: docs/architecture.md
// § Workspaces). nil and "" when the work dir is not a git work tree with a
// commit (gitwork.ErrNotTree: no repository contains it, git is not installed,
// the enclosing repository ignores it, or it has no commit yet): there is no
// diff, and nothing to warn about. The answer is kept for the run's life in this
// process, so later dispatches run no git.
func diffBase(ctx context.Context, s *core.Service, run stratus.Run) (*gitwork.Tree, string, error) {
	if run.WorkDir == "" || run.Workspace != nil {
		return nil, "", nil
	}
	if v, ok := s.RunTrees.Load(run.ID); ok {
		rt := v.(runTree)
		return rt.tree, rt.base, nil
	}
	tree, base, err := openBase(ctx, s, run)
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
func openBase(ctx context.Context, s *core.Service, run stratus.Run) (*gitwork.Tree, string, error) {
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

// snapshot is the change of the work dir against the diff base (gitwork).
type snapshot = gitwork.Snapshot

// diffVars takes a snapshot of the work dir against the run's diff base and,
// when it holds a change, writes <ctx>/current.diff and
// <ctx>/change-overview.txt and sets diff_path, change_overview_path and
// diff_base (they arrive together, empty until the first edit, replaced every
// time the diff is: docs/contracts.md § Template variables). The snapshot is
// returned for the subtask bookkeeping (nil when there is none). A git failure
// leaves the variables empty with a warning.
func diffVars(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, vars map[string]string) (*snapshot, error) {
	tree, base, err := diffBase(ctx, s, run)
	if err != nil || tree == nil {
		return nil, err
	}
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	// Stratus's own files are not the change: its state dir, the ctx dir,
	// and the task file when it lives in the work dir.
	exclude := []string{core.StateDirName, dir}
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
	diffKey := path.Join(dir, core.DiffFile)
	if err := s.Files(run).Put(ctx, diffKey, snap.Diff); err != nil {
		return nil, err
	}
	ovKey := path.Join(dir, core.ChangeOverviewFile)
	if err := s.Files(run).Put(ctx, ovKey, changeOverview(snap, core.Abs(run, diffKey))); err != nil {
		return nil, err
	}
	vars["diff_path"], vars["change_overview_path"], vars["diff_base"] = core.Abs(run, diffKey), core.Abs(run, ovKey), base
	return snap, nil
}

// changeOverview renders change-overview.txt (gitwork.Snapshot.Overview).
func changeOverview(snap *snapshot, diffPath string) []byte { return snap.Overview(diffPath) }
