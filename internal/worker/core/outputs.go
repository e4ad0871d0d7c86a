package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// SlotFile returns the sink key an output_artifact slot lands in for a task
// (worc flow-authoring.md § Where a node's output goes, reference.md §
// agent node): enriched_spec → <ctx>/task.enriched.md, plan →
// <ctx>/plan.md, summary → <ctx>/summary.md, report → report.md in the
// flow's report dir (<ctx>/report.md for a policy without one). "" for any
// other slot.
func SlotFile(f *flow.Flow, ctxDir, taskID, slot string) string {
	switch slot {
	case "enriched_spec":
		return path.Join(ctxDir, EnrichedSpecFile)
	case "plan":
		return path.Join(ctxDir, PlanFile)
	case "summary":
		return path.Join(ctxDir, SummaryFile)
	case "report":
		if rd := ReportDir(f, taskID); rd != "" {
			return path.Join(rd, ReportFile)
		}
		return path.Join(ctxDir, ReportFile)
	}
	return ""
}

// ContractObject returns the object a node returned — its folded value, or
// the `out` of a fold wrapper {"out", "parts"} — or nil when it is not a
// JSON object.
func ContractObject(value json.RawMessage) map[string]json.RawMessage {
	// Only an object decodes into either shape; a text body folds to a
	// JSON string, and decoding its 64 KiB just to fail was the largest
	// cost of a submit after the store (issue 16 § 3).
	if !jsonObject(value) {
		return nil
	}
	var w struct {
		Out   json.RawMessage `json:"out"`
		Parts json.RawMessage `json:"parts"`
	}
	if json.Unmarshal(value, &w) == nil && w.Parts != nil {
		value = w.Out
	}
	if !jsonObject(value) {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(value, &obj) != nil {
		return nil
	}
	return obj
}

// jsonObject reports whether b can hold a JSON object: its first byte
// after white space is '{'.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// ContractContent is what a node's output slot holds (worc
// flow-authoring.md § What a node returns): the string `content` of the
// typed result (the planning and human_input contracts), or the whole
// final body when the result is not a JSON object with a string content.
func ContractContent(value json.RawMessage, body []byte) []byte {
	if obj := ContractObject(value); obj != nil {
		var s string
		if raw, ok := obj["content"]; ok && json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
	}
	return body
}

// DecompositionEnabled is the decomposition gate (worc reference.md §
// decomposition; worc-task SKILL.md: the task's `decomposition` wins over
// config agents.decomposition.enabled).
func DecompositionEnabled(env *RunEnv) bool {
	if v, ok := env.Task.Front["decomposition"].(bool); ok {
		return v
	}
	return env.Config.Agents.Decomposition.Enabled
}

func SubtaskKey(dir string, order int, suffix string) string {
	return path.Join(dir, SubtasksDir, fmt.Sprintf("%02d%s", order, suffix))
}

// SubtaskOf returns the subtask a step of a decomposition region runs and
// the count of subtasks (0, 0 outside a region, or when the latest
// completed step of the proposer before it did not split the task).
//
// The order is the step's seeded value (StepValue.SubtaskOrder, set at
// dispatch from the message when the state machine carries it); otherwise
// it is the number of visits of the region's entry node since that
// proposer step, this step included (each subtask enters the region once).
func (s *Service) SubtaskOf(ctx context.Context, env *RunEnv, step stratus.Step) (order, count int, err error) {
	d := env.Flow.Decomposition
	if !inRegion(env.Flow, step.Node) {
		return 0, 0, nil
	}
	steps, err := s.Store.ListSteps(ctx, step.RunID)
	if err != nil {
		return 0, 0, err
	}
	i := slices.IndexFunc(steps, func(st stratus.Step) bool { return st.TID == step.TID })
	if i < 0 {
		i = len(steps)
	}
	p := -1
	for j := i - 1; j >= 0; j-- {
		if steps[j].Node == d.ProposedBy && steps[j].Status == stratus.StepCompleted {
			p = j
			break
		}
	}
	if p < 0 {
		return 0, 0, nil
	}
	if pv, err := DecodeStepValue(steps[p].Value); err != nil || pv.Subtasks < 2 {
		return 0, 0, nil
	} else {
		count = pv.Subtasks
	}
	if v, err := DecodeStepValue(step.Value); err == nil && v.SubtaskOrder > 0 {
		return min(v.SubtaskOrder, count), count, nil
	}
	entry := regionEntry(env.Flow)
	for j := p + 1; j <= i && j < len(steps); j++ {
		if steps[j].Node == entry {
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
// {predecessor_context} is injected into (seed 004 § Template variables):
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
// (seed 004 § Template variables): subtask_order, subtask_count and
// subtask_spec_path for every node, and predecessor_context for the
// region's implementation node from subtask 2 on. On the subtask's first
// render with a diff snapshot it records the snapshot as
// <ctx>/subtasks/<NN>.start.txt: consecutive start snapshots tell which
// files each subtask changed.
func (s *Service) subtaskVars(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step, snap *snapshot, vars map[string]string) error {
	order, count, err := s.SubtaskOf(ctx, env, step)
	if err != nil || order == 0 {
		return err
	}
	dir, err := CtxDir(env, run)
	if err != nil {
		return err
	}
	vars["subtask_order"], vars["subtask_count"] = strconv.Itoa(order), strconv.Itoa(count)
	vars["subtask_spec_path"] = Abs(run, SubtaskKey(dir, order, ".md"))
	if snap != nil {
		key := SubtaskKey(dir, order, ".start.txt")
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
	key := SubtaskKey(dir, order, ".predecessors.md")
	if err := s.Files(run).Put(ctx, key, s.predecessorBrief(ctx, run, dir, order, count)); err != nil {
		return err
	}
	vars["predecessor_context"] = Abs(run, key)
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
func (s *Service) readSnapshot(ctx context.Context, run stratus.Run, key string) (map[string]string, bool) {
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

// predecessorBrief renders {predecessor_context} for subtask order (seed
// 004 § Template variables: the deterministic factual floor): for each
// earlier subtask, its spec path, the files it changed — those whose state
// differs between its start snapshot and the next subtask's — and the
// acceptance-criteria lines of its spec.
func (s *Service) predecessorBrief(ctx context.Context, run stratus.Run, dir string, order, count int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Predecessor handoff: subtask %d of %d\n\n", order, count)
	b.WriteString("Facts Stratus recorded about the subtasks before this one: ground truth for the files changed, the spec for the intent.\n")
	for j := 1; j < order; j++ {
		specKey := SubtaskKey(dir, j, ".md")
		spec, _ := s.Files(run).Get(ctx, specKey)
		title, criteria := specFacts(string(spec))
		fmt.Fprintf(&b, "\n## Subtask %d of %d: %s\n\n- Spec: %s\n", j, count, title, Abs(run, specKey))
		from, okFrom := s.readSnapshot(ctx, run, SubtaskKey(dir, j, ".start.txt"))
		to, okTo := s.readSnapshot(ctx, run, SubtaskKey(dir, j+1, ".start.txt"))
		switch changed := changedBetween(from, to); {
		case !okFrom || !okTo:
			b.WriteString("- Changed files: not recorded (no diff snapshot: the work dir is not a git work tree with a commit)\n")
		case len(changed) == 0:
			b.WriteString("- Changed files: none\n")
		default:
			b.WriteString("- Changed files:\n")
			for i, p := range changed {
				if i == maxOverviewPaths {
					fmt.Fprintf(&b, "  - … and %s\n", morePaths(len(changed)-i))
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
