package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink"
)

// maxSubtasks bounds a decomposition: subtask files are numbered <NN>.
const maxSubtasks = 99

// maxOutputFileBytes bounds an output_file copy when the service sets no
// MaxBodyBytes.
const maxOutputFileBytes = 16 << 20

// nodeOutput is what a submitted attempt writes beyond its projection
// <ctx>/<node>.md (worc flow-authoring.md § Where a node's output goes):
// decided by planOutputs before anything is appended, so a malformed typed
// result is refused with nothing recorded, and written by writeOutputs
// after the projection.
type nodeOutput struct {
	files    []outFile
	subtasks int    // the decomposition's subtask count; 0 when the task runs as one unit
	output   string // ctx-relative file carrying {<node>_path} instead of <node>.md
	warnings []string
}

type outFile struct {
	key  string // sink key
	body []byte
}

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

// planOutputs decides the files a submitted attempt of node writes beyond
// its projection: its output slot, its decomposition (the node named by
// decomposition.proposed_by), its output_file copy. Nothing is written.
// A node asking a human (asking) proposes no split: it runs again with the
// reply. Errors: EUNPROCESSABLE for a planning result whose split is
// malformed.
func (s *Service) planOutputs(c *Caller, node *flow.Node, value json.RawMessage, body []byte, parts []string, asking bool) (*nodeOutput, error) {
	out := &nodeOutput{}
	if node.Kind != "agent" || c.Run.WorkDir == "" {
		return out, nil
	}
	env, run := c.Env, c.Run
	dir, err := CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	if key := SlotFile(env.Flow, dir, run.TaskID, node.OutputArtifact); key != "" {
		// A part staged under the slot's own name is the deliverable; the
		// closing message does not overwrite it.
		if !(path.Dir(key) == dir && slices.Contains(parts, path.Base(key))) {
			out.files = append(out.files, outFile{key, ContractContent(value, body)})
		}
	}
	if d := env.Flow.Decomposition; d != nil && d.ProposedBy == node.ID && !asking {
		if err := planSubtasks(env, dir, ContractObject(value), out); err != nil {
			return nil, err
		}
	}
	if node.OutputFile != "" {
		s.copyOutputFile(run, env, node, dir, out)
	}
	return out, nil
}

// writeOutputs writes what planOutputs decided to files, the run's
// work-dir files (Service.files).
func (s *Service) writeOutputs(ctx context.Context, files sink.Sink, out *nodeOutput) error {
	for _, f := range out.files {
		if err := files.Put(ctx, f.key, f.body); err != nil {
			return err
		}
	}
	return nil
}

// subtaskSpec is one entry of the planning contract's subtasks.
type subtaskSpec struct {
	Title              string `json:"title"`
	Spec               string `json:"spec"`
	AcceptanceCriteria any    `json:"acceptance_criteria"`
	DependsOn          any    `json:"depends_on"`
}

// planSubtasks applies the planning contract (worc flow-authoring.md § What
// a node returns: {content, human_input?, decompose, subtasks}) of the
// decomposition's proposer. The split happens when decompose is true, the
// gate is open (DecompositionEnabled) and subtasks has at least 2 entries,
// each an object with a non-empty string spec: then <ctx>/subtasks/<NN>.md
// is written per subtask and out.subtasks is the count. A proposal the gate
// or the count refuses runs the task as one unit, with a warning. Errors:
// EUNPROCESSABLE naming the field for a decompose that is not a boolean,
// subtasks that are not a list of such objects, or more than 99 of them.
func planSubtasks(env *RunEnv, dir string, obj map[string]json.RawMessage, out *nodeOutput) error {
	if obj == nil {
		return nil // prose: a plan without a split
	}
	var decompose bool
	if raw, ok := obj["decompose"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &decompose); err != nil {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "decompose", "planning result: decompose is %s; want true or false", Truncate(string(raw), 40))
		}
	}
	if !decompose {
		return nil
	}
	if !DecompositionEnabled(env) {
		out.warnings = append(out.warnings, "planning proposed a decomposition, but decomposition is off (config agents.decomposition.enabled, task front matter decomposition); the task runs as one unit")
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(obj["subtasks"], &raws); err != nil {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "subtasks", "planning result: decompose is true, but subtasks is not a list of {title, spec} objects")
	}
	if len(raws) > maxSubtasks {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "subtasks", "planning result: %d subtasks; at most %d", len(raws), maxSubtasks)
	}
	specs := make([]subtaskSpec, len(raws))
	for i, raw := range raws {
		field := fmt.Sprintf("subtasks[%d]", i)
		if err := json.Unmarshal(raw, &specs[i]); err != nil {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, field, "planning result: %s is not an object {title, spec, ...}: %s", field, Truncate(string(raw), 80))
		}
		if strings.TrimSpace(specs[i].Spec) == "" {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, field+".spec", "planning result: %s.spec is missing or empty; each subtask needs the spec it is implemented against", field)
		}
	}
	if len(specs) < 2 {
		out.warnings = append(out.warnings, fmt.Sprintf("planning proposed a decomposition into %s; a split needs at least 2, so the task runs as one unit", english.Plural(len(specs), "subtask")))
		return nil
	}
	for i, sp := range specs {
		out.files = append(out.files, outFile{subtaskKey(dir, i+1, ".md"), subtaskDoc(i+1, len(specs), sp)})
	}
	out.subtasks = len(specs)
	return nil
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

func subtaskKey(dir string, order int, suffix string) string {
	return path.Join(dir, SubtasksDir, fmt.Sprintf("%02d%s", order, suffix))
}

// subtaskDoc renders one subtask's spec file: a title line, the spec, and
// the acceptance criteria and dependencies when the entry lists them apart.
func subtaskDoc(order, count int, sp subtaskSpec) []byte {
	var b bytes.Buffer
	title := strings.TrimSpace(sp.Title)
	if title == "" {
		title = "untitled"
	}
	fmt.Fprintf(&b, "# Subtask %d of %d: %s\n\n%s\n", order, count, title, strings.TrimSpace(sp.Spec))
	if ac := textList(sp.AcceptanceCriteria); len(ac) > 0 {
		b.WriteString("\n## Acceptance criteria\n\n")
		for _, l := range ac {
			fmt.Fprintf(&b, "- [ ] %s\n", l)
		}
	}
	if deps := textList(sp.DependsOn); len(deps) > 0 {
		fmt.Fprintf(&b, "\n## Depends on\n\n- %s\n", strings.Join(deps, "\n- "))
	}
	return b.Bytes()
}

// textList reads a string or a list of scalars as lines.
func textList(v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		for _, l := range strings.Split(x, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	case []any:
		for _, e := range x {
			if s := strings.TrimSpace(fmt.Sprint(e)); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// copyOutputFile plans the redacted copy of node's output_file (seed 004 §
// Node outputs; worc reference.md § agent node: the file is resolved in the
// flow's report dir, the work dir for a policy without one) at
// <ctx>/<node>.out/<file>, which {<node>_path} then carries. A file that is
// missing, escapes that directory or is over the size bound is a warning,
// and {<node>_path} keeps the closing message.
func (s *Service) copyOutputFile(run stratus.Run, env *RunEnv, node *flow.Node, dir string, out *nodeOutput) {
	base := ReportDir(env.Flow, run.TaskID)
	src := Abs(run, path.Join(base, node.OutputFile))
	body, err := s.readContained(Abs(run, base), src)
	if err != nil {
		out.warnings = append(out.warnings, fmt.Sprintf("node %s: output_file %s: %v; {%s_path} carries the closing message instead", node.ID, src, err, node.ID))
		return
	}
	out.output = node.ID + ".out/" + node.OutputFile
	out.files = append(out.files, outFile{path.Join(dir, out.output), []byte(Redact(string(body)))})
}

// readContained reads the regular file p, which must resolve (symbolic
// links followed) inside root.
func (s *Service) readContained(root, p string) ([]byte, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("its directory does not exist")
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the node did not write it")
	} else if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(realRoot, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("it resolves to %s, outside %s", real, root)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	limit := int64(maxOutputFileBytes)
	if s.MaxBodyBytes > 0 {
		limit = s.MaxBodyBytes
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes; the limit is %d", fi.Size(), limit)
	}
	return os.ReadFile(real)
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
	vars["subtask_spec_path"] = Abs(run, subtaskKey(dir, order, ".md"))
	if snap != nil {
		key := subtaskKey(dir, order, ".start.txt")
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
	key := subtaskKey(dir, order, ".predecessors.md")
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
		specKey := subtaskKey(dir, j, ".md")
		spec, _ := s.Files(run).Get(ctx, specKey)
		title, criteria := specFacts(string(spec))
		fmt.Fprintf(&b, "\n## Subtask %d of %d: %s\n\n- Spec: %s\n", j, count, title, Abs(run, specKey))
		from, okFrom := s.readSnapshot(ctx, run, subtaskKey(dir, j, ".start.txt"))
		to, okTo := s.readSnapshot(ctx, run, subtaskKey(dir, j+1, ".start.txt"))
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
