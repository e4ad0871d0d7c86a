package submit

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
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/publishing"
	"github.com/stratusflow/stratus/internal/worker/supervise"
	"github.com/stratusflow/stratus/internal/worker/upload"
	"github.com/stratusflow/stratus/internal/worker/vars"
	"github.com/stratusflow/stratus/internal/worker/verify"
)

// execValue is the recorded value of a checks or tool step: the StepValue
// the Choice routes on, plus what the repeated-fail guard and the report
// read. It stays small: bodies live in the Final and the ctx files.
type execValue struct {
	core.StepValue
	// Digest identifies a tool's fail without findings (nodeexec.RepeatedFail).
	Digest string `json:"digest,omitempty"`
	// Findings counts a tool's printed findings (recorded, never applied).
	Findings int `json:"findings,omitempty"`
}

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
func submitExec(ctx context.Context, s *core.Service, c *core.Caller, final stratus.OutputEvent) (*core.StepValue, error) {
	node := c.Env.Flow.Node(c.Step.Node)
	var res nodeexec.Result
	if err := json.Unmarshal(final.Body, &res); err != nil || res.Kind != node.Kind {
		return nil, stratus.Errorf(stratus.EUNPROCESSABLE, "node %s (kind %s) takes a nodeexec result {\"kind\": %q, ...} from `stratus runner`; the body is not one",
			node.ID, node.Kind, node.Kind)
	}
	dir, dirErr := execDir(s, c)
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
		tv, err := toolVerdict(ctx, s, c, res.Tool)
		if err != nil {
			return nil, err
		}
		v, ev.Digest, ev.Findings = tv.Verdict, tv.Digest, countFindings(tv.Findings)
		stdout := []byte(core.Redact(res.Tool.KeptStdout()))
		stdoutPath := ""
		if dir != "" {
			key := path.Join(dir, "tools", node.ID, "stdout.txt")
			files[key] = stdout
			stdoutPath = core.Abs(c.Run, key)
		}
		report = nodeexec.ToolReport(res.Tool, tv, stdoutPath)
		logKey := path.Join(logDir, "stdout.txt")
		logs[logKey] = stdout
		logName, logReport = "tool.md", nodeexec.ToolReport(res.Tool, tv, core.Abs(c.Run, logKey))
	case flow.KindPublish:
		if res.Publish == nil {
			return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish", "missing from the result of publish node %s", node.ID)
		}
		if err := checkPublished(res.Publish); err != nil {
			return nil, err
		}
		// The run's record first: a pull request opened is never lost
		// to a write that fails after it (docs/architecture.md § Publishing).
		if err := publishing.Record(ctx, s, c.Run, res.Publish); err != nil {
			return nil, attempt.NotPersisted(ctx, s, c, c.Attempt, fmt.Errorf("record the publication of %s: %w", c.Step.StepRef, err))
		}
		// summary.json and summary.md say it once the run ends
		// (lifecycle.Finish reads the publication).
		v = nodeexec.Verdict{Outcome: "done", Reason: publishing.Summary(res.Publish)}
		switch {
		case res.Publish.Failed != "":
			v.Manual, v.Error, v.Reason = true, core.ErrPublish, res.Publish.Failed
		case res.Publish.MergeBlocked != "":
			v.Manual, v.Error = true, core.ErrMergeBlocked
			v.Reason = "merge blocked, the pull request stays open: " + res.Publish.MergeBlocked
		}
		report = "# Publish\n\n" + publishing.Summary(res.Publish) + "\n"
		logName, logReport = "publish.md", report
	}
	outcome, status := v.Outcome, stratus.StepCompleted
	if v.Manual {
		outcome, status = core.OutcomeManual, stratus.StepFailed
		switch {
		case node.Kind == flow.KindChecks:
			outcome = core.OutcomeIncomplete
		case v.Error == core.ErrPublish:
			outcome = "failed" // the publish state's Catch ends the run failed
		}
	}
	subtask, _, err := vars.SubtaskOf(ctx, s, c.Env, c.Step) // a region step records its subtask, like an agent's
	if err != nil {
		return nil, err
	}
	ev.StepValue = core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: c.Attempt.N, Outcome: outcome, Reason: v.Reason,
		Bytes: len(final.Body), SubtaskOrder: subtask}
	raw, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	// The Final keeps the whole result, redacted like every artifact of it.
	final.Body = []byte(core.Redact(string(final.Body)))
	att := c.Attempt
	att.EndedAt = final.At
	att.Status, att.Terminal = stratus.AttemptSubmitted, "Captured"
	// The step stays open until its files persisted (submit's rule:
	// docs/security.md § Output that did not persist).
	if _, err := s.Store.CompleteAttempt(ctx, final, att, c.Step); err != nil {
		return nil, core.SecondFinal(c, err)
	}

	fm := projection.FrontMatter{TaskID: c.Run.TaskID, Step: c.Step.Node, StepRef: c.Step.StepRef,
		Attempt: c.Attempt.N, Agent: c.Attempt.Agent, Format: "markdown", SubmittedAt: final.At}
	// The visit's own copies first: they are logs, kept whatever the ctx dir.
	logBody := []byte(core.Redact(logReport))
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
			_, err = projection.Project(ctx, s.Files(c.Run), dir, c.Step.Node, fm, []byte(core.Redact(report)), nil)
		}
	}
	if err != nil {
		return nil, attempt.NotPersisted(ctx, s, c, att, err)
	}
	step := c.Step
	step.Status, step.Verdict, step.Value, step.EndedAt = status, outcome, raw, final.At
	if err := s.Store.UpdateStep(ctx, step); err != nil {
		return nil, attempt.NotPersisted(ctx, s, c, att, fmt.Errorf("record %s %s: %w", c.Step.StepRef, outcome, err))
	}
	attempt.EmitEnded(s, c, att, outcome, v.Reason)
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

// checkPublished refuses a publish result that names no branch or head, or
// a pull request without a number and an http(s) URL (EUNPROCESSABLE
// naming the field): what the run records is what the host holds.
func checkPublished(r *nodeexec.PublishResult) error {
	switch {
	case r.Branch == "":
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish.branch", "empty; want the task branch pushed")
	case len(r.Head) != 40 || strings.Trim(r.Head, "0123456789abcdef") != "":
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish.head", "%q is not a full commit id (40 hex digits)", r.Head)
	}
	if pr := r.PR; pr != nil {
		if pr.Number < 1 {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish.pr.number", "%d is not a pull request number (1 or more)", pr.Number)
		}
		if !strings.HasPrefix(pr.URL, "https://") && !strings.HasPrefix(pr.URL, "http://") {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish.pr.url", "%q is not an http(s) URL", pr.URL)
		}
		switch pr.State {
		case "open", "merged", "closed":
		default:
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "publish.pr.state", "%q is not a pull request state; valid: open, merged, closed", pr.State)
		}
	}
	return nil
}

// stepLogDir is the sink key of a step's log dir, one per node visit:
// .stratus/logs/<task_id>/stages/<node>/run-<visit, 6 digits> (where
// dispatch saves the rendered prompt and the runner its log).
func stepLogDir(run stratus.Run, step stratus.Step) string {
	return path.Join(core.StateDirName, "logs", run.TaskID, "stages", step.Node, fmt.Sprintf("run-%06d", step.Visit))
}

// execDir is the ctx dir the artifacts go to: "" with a warning when no
// work dir resolves (docs/contracts.md § Files are the server's job: skip
// fail-open), an error when the flow's check_policy is strict.
func execDir(s *core.Service, c *core.Caller) (string, error) {
	switch {
	case c.Run.WorkDir == "" && c.Env.Flow.CheckPolicy == "strict":
		return "", fmt.Errorf("no work dir resolves for run %s, and the flow's check_policy is strict", c.Run.ID)
	case c.Run.WorkDir == "":
		s.WarnCall(c, "%s: no work dir resolves for run %s; its files are skipped", c.Step.StepRef, c.Run.ID)
		return "", nil
	}
	return core.CtxDir(c.Env, c.Run)
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

// planOutputs decides the files a submitted attempt of node writes beyond
// its projection: its output slot, its decomposition (the node named by
// decomposition.proposed_by), its output_file copy. Nothing is written.
// A node asking a human (asking) proposes no split: it runs again with the
// reply. Errors: EUNPROCESSABLE for a planning result whose split is
// malformed.
func planOutputs(s *core.Service, c *core.Caller, node *flow.Node, value json.RawMessage, body []byte, parts []string, asking bool) (*nodeOutput, error) {
	out := &nodeOutput{}
	if node.Kind != "agent" || c.Run.WorkDir == "" {
		return out, nil
	}
	env, run := c.Env, c.Run
	dir, err := core.CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	if key := core.SlotFile(env.Flow, dir, run.TaskID, node.OutputArtifact); key != "" {
		// A part staged under the slot's own name is the deliverable; the
		// closing message does not overwrite it.
		if !(path.Dir(key) == dir && slices.Contains(parts, path.Base(key))) {
			out.files = append(out.files, outFile{key, core.ContractContent(value, body)})
		}
	}
	if d := env.Flow.Decomposition; d != nil && d.ProposedBy == node.ID && !asking {
		if err := planSubtasks(env, dir, core.ContractObject(value), out); err != nil {
			return nil, err
		}
	}
	if node.OutputFile != "" {
		copyOutputFile(s, run, env, node, dir, out)
	}
	return out, nil
}

// writeOutputs writes what planOutputs decided to files, the run's
// work-dir files (Service.files).
func writeOutputs(ctx context.Context, s *core.Service, files sink.Sink, out *nodeOutput) error {
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
func planSubtasks(env *core.RunEnv, dir string, obj map[string]json.RawMessage, out *nodeOutput) error {
	if obj == nil {
		return nil // prose: a plan without a split
	}
	var decompose bool
	if raw, ok := obj["decompose"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &decompose); err != nil {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "decompose", "planning result: decompose is %s; want true or false", core.Truncate(string(raw), 40))
		}
	}
	if !decompose {
		return nil
	}
	if !core.DecompositionEnabled(env) {
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
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, field, "planning result: %s is not an object {title, spec, ...}: %s", field, core.Truncate(string(raw), 80))
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
		out.files = append(out.files, outFile{core.SubtaskKey(dir, i+1, ".md"), subtaskDoc(i+1, len(specs), sp)})
	}
	out.subtasks = len(specs)
	return nil
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

// copyOutputFile plans the redacted copy of node's output_file
// (docs/prompt-variables.md § Node outputs; worc reference.md § agent node: the
// file is resolved in the flow's report dir, the work dir for a policy without
// one) at <ctx>/<node>.out/<file>, which {<node>_path} then carries. A file that
// is missing, escapes that directory or is over the size bound is a warning, and
// {<node>_path} keeps the closing message.
func copyOutputFile(s *core.Service, run stratus.Run, env *core.RunEnv, node *flow.Node, dir string, out *nodeOutput) {
	base := core.ReportDir(env.Flow, run.TaskID)
	src := core.Abs(run, path.Join(base, node.OutputFile))
	body, err := readContained(s, core.Abs(run, base), src)
	if err != nil {
		out.warnings = append(out.warnings, fmt.Sprintf("node %s: output_file %s: %v; {%s_path} carries the closing message instead", node.ID, src, err, node.ID))
		return
	}
	out.output = node.ID + ".out/" + node.OutputFile
	out.files = append(out.files, outFile{path.Join(dir, out.output), []byte(core.Redact(string(body)))})
}

// readContained reads the regular file p, which must resolve (symbolic
// links followed) inside root.
func readContained(s *core.Service, root, p string) ([]byte, error) {
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

// checkVerdict enforces a node's verdict contract (docs/contracts.md § The
// in-process twin: channel body compares the final body, channel part the staged
// `verdict` part), before the fold and before anything is appended. It returns
// the verdict token, or EUNPROCESSABLE naming the agent, the channel, what
// arrived and what is allowed.
func checkVerdict(agent string, v *flow.Verdicts, body []byte, tail []stratus.OutputEvent) (string, error) {
	channel := v.Channel
	if channel == "" {
		channel = "body"
	}
	var got []byte
	found := channel == "body"
	if channel == "body" {
		got = body
	} else {
		for _, e := range tail {
			if e.Kind == stratus.OutputArtifact && e.Name == "verdict" {
				got, found = e.Body, true
			}
		}
	}
	tok := strings.TrimSpace(string(got))
	if found && slices.Contains(v.Allowed, tok) {
		return tok, nil
	}
	arrived := "no staged part named verdict"
	if found {
		arrived = fmt.Sprintf("%q", core.Truncate(tok, 80))
	}
	return "", stratus.Errorf(stratus.EUNPROCESSABLE, "verdict contract violation: agent %s, channel %s: got %s; allowed: %s",
		agent, channel, arrived, strings.Join(v.Allowed, ", "))
}

// Invoke records the final body of an attempt (POST /v1/worker/submit;
// docs/contracts.md § The shape) and completes its step: fold, project, decide
// the outcome, SendTaskSuccess. ok=false records a failed Final and fails the
// step instead (the body is the reason). The step reads done, and its Task state
// succeeds, only once its files and its record persisted; when they did not, the
// step fails (docs/security.md § Output that did not persist). Errors:
// EUNPROCESSABLE when the body breaks the step's submit_format (nothing
// appended), ECONFLICT when fenced or for a second Final; an error wrapping
// ErrNotPersisted (ENOSPACE for a full disk, else EINTERNAL) when the output did
// not persist.
func Invoke(ctx context.Context, s *core.Service, authorization, tid string, body []byte, ok bool) (*core.StepValue, error) {
	return Body(ctx, s, authorization, tid, core.Body{Bytes: body}, ok)
}

// Body is Invoke of a body inline or uploaded (POST
// /v1/worker/submit?upload=; docs/contracts.md § Request and response
// bodies). Errors: Submit's; bodyOf's
// for the upload.
func Body(ctx context.Context, s *core.Service, authorization, tid string, b core.Body, ok bool) (*core.StepValue, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, tid)
	if err != nil {
		return nil, err
	}
	return submitBody(ctx, s, c, b, ok, core.Failure{})
}

// submitBody reads b (bodyOf) and submits it; the upload, if any, is
// settled (settleUpload) with the outcome.
func submitBody(ctx context.Context, s *core.Service, c *core.Caller, b core.Body, ok bool, f core.Failure) (sv *core.StepValue, err error) {
	defer func() { upload.SettleUpload(ctx, s, c, b, err) }()
	// Fenced before the upload is read: a retried submit of a recorded
	// attempt is the same 409 whether its body came inline or uploaded.
	if err := s.Fence(ctx, c); err != nil {
		return nil, err
	}
	body, err := upload.BodyOf(ctx, s, c, b)
	if err != nil {
		return nil, err
	}
	return submit(ctx, s, c, body, ok, f)
}

// Result serves POST /v1/worker/result {task_id, value, ok} (docs/contracts.md §
// Routes, § Request and response bodies). A string value is the body as is; any
// other value is its JSON text. With ok=false the runner reports a terminal
// other than Captured: value may be a FailureValue {"terminal", "reason",
// "class", "retry_at"}; the attempt records the class and reset
// (internal/failclass), classified here from the terminal and reason when the
// value has no class. Errors: EINVALID naming class or retry_at for a value that
// is none (failureValue), as Submit otherwise.
func Result(ctx context.Context, s *core.Service, authorization string, rb core.ResultBody) (*core.StepValue, error) {
	if rb.TaskID == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "task_id", "missing")
	}
	if rb.OK == nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "ok", "missing; valid: true or false")
	}
	verb := captoken.PostResult
	c, err := s.Authorize(ctx, authorization, verb, rb.TaskID)
	if err != nil {
		return nil, err
	}
	if rb.Upload != "" {
		if v := bytes.TrimSpace(rb.Value); len(v) > 0 && string(v) != "null" {
			err := stratus.FieldErrorf(stratus.EINVALID, "value", "a result naming an upload has no value (the uploaded bytes are the body); drop value or upload")
			upload.SettleUpload(ctx, s, c, core.Body{Upload: rb.Upload}, err)
			return nil, err
		}
		return submitBody(ctx, s, c, core.Body{Upload: rb.Upload}, *rb.OK, core.Failure{})
	}
	body := rb.Body()
	var f core.Failure
	if !*rb.OK {
		fv, reset, isValue, err := core.DecodeFailureValue(rb.Value)
		if err != nil {
			return nil, err
		}
		if isValue {
			f = core.Failure{Terminal: fv.Terminal, Verdict: failclass.Verdict{Class: fv.Class, RetryAt: reset, Rule: "runner"}}
			// "draft#1 failed: the model refused", never "failed: Failed: …";
			// another terminal (TimedOut, NoReport) says what happened.
			switch {
			case fv.Terminal == "" && fv.Reason != "":
				body = []byte(fv.Reason)
			case fv.Terminal == "":
			case fv.Terminal == "Failed" && fv.Reason != "":
				body = []byte(fv.Reason)
			default:
				body = []byte(fv.Terminal + ": " + fv.Reason)
			}
		}
	}
	return submit(ctx, s, c, body, *rb.OK, f)
}

// submit records body as the attempt's Final; with ok=false it fails the
// attempt with f, classified here (internal/failclass) from its terminal,
// the body and the engine's stderr in the runner's log when the worker
// sent no class.
func submit(ctx context.Context, s *core.Service, c *core.Caller, body []byte, ok bool, f core.Failure) (*core.StepValue, error) {
	if ok {
		// An engine that wrote into the operator's work dir fails its step
		// whatever it reports (docs/security.md § Workspace commits).
		if why := s.WatchReason(ctx, c); why != "" {
			ok, body = false, []byte(why)
			f = core.Failure{Terminal: "Failed", Verdict: failclass.Classify(failclass.Evidence{Terminal: "Captured", Report: true, Reason: why})}
		}
	}
	var logTailText, log string
	if !ok {
		if log = s.RunnerLog(c.Run, c.Step); log != "" {
			logTailText = core.LogTail(log, 2)
		}
		if f.Verdict.Class == "" {
			// No class: a worker (an older runner, an engine calling the
			// route itself) that did not classify its failure. A clock
			// time in its words is read in this machine's zone: on it, or
			// beside it (AWS: UTC both), the engine ran.
			sent := f.Verdict.RetryAt
			f.Verdict = failclass.Classify(failclass.Evidence{Terminal: f.Terminal, Reason: string(body), Stderr: strings.ReplaceAll(logTailText, " | ", "\n"), Now: s.NowUTC().Local()})
			if f.Verdict.RetryAt.IsZero() {
				f.Verdict.RetryAt = sent // a reset sent without a class is kept
			}
		}
	}
	if c.Step.Kind == core.SupervisorKind {
		sv, err := supervise.Submit(ctx, s, c, body, ok, f)
		if !ok {
			sv = core.FailureAnswer(sv, len(body))
		}
		return sv, err
	}
	final, att, err := s.Final(ctx, c, body, ok)
	if err != nil {
		return nil, err
	}
	body = final.Body
	if !ok {
		if _, err := s.Store.AppendOutput(ctx, final); err != nil {
			return nil, core.SecondFinal(c, err)
		}
		// The worker's words, bounded: the whole text is the Final just
		// appended; half of MaxReasonBytes leaves room for the log's.
		reason := core.ClipReason(string(body), core.MaxReasonBytes/2, " [cut; the whole text is the attempt's failed Final]")
		if log != "" {
			// The engine's stderr went to the runner's log: its last
			// lines (not the runner's own) and where the log is.
			if logTailText != "" {
				reason += "; log: " + core.ClipReason(logTailText, core.MaxReasonBytes/4, "")
			}
			reason += " (log: " + log + ")"
		}
		sv, err := attempt.FailAttempt(ctx, s, c, att, f, reason)
		return core.FailureAnswer(sv, len(body)), err
	}
	if core.IsExec(c.Env.Flow.Node(c.Step.Node).Kind) {
		return submitExec(ctx, s, c, final) // checks, tool: a nodeexec result
	}

	format := s.SubmitFormat(c.Env, c.Step.Node)
	node := c.Env.Flow.Node(c.Step.Node)
	// The staged parts so far; the Final joins them in memory, so the
	// 64 KiB body is never read back.
	tail, err := s.Store.ListOutput(ctx, c.Step.TID, c.Attempt.N)
	if err != nil {
		return nil, err
	}
	// Checked before anything is appended: a 422 leaves the attempt open.
	verdict := ""
	if node.Verdicts != nil {
		if verdict, err = checkVerdict(c.Attempt.Agent, node.Verdicts, body, tail); err != nil {
			return nil, err
		}
	}
	// The step value: whole for an evaluator (verify.Evaluate reads it);
	// for any other node only a typed result — a JSON object — is read
	// (core.ContractObject), so a text body is not written out as a JSON
	// string (fold.Object).
	foldValue := fold.Object
	if node.Kind == flow.KindEvaluator {
		foldValue = fold.Fold
	}
	value, err := foldValue(c.Attempt.Agent, append(tail, final), format)
	if err != nil {
		return nil, err
	}
	// The parts the fold took; a name the part-name rule refuses (only a
	// tail staged before the rule holds one) is left out, said, and kept
	// in the tail (docs/security.md § Part names).
	parts, refused := fold.Parts(tail)
	for _, err := range refused {
		s.WarnCall(c, "%s: a staged part is left out of the step's value: %s", c.Step.StepRef, stratus.ErrorMessage(err))
	}
	subtask, _, err := vars.SubtaskOf(ctx, s, c.Env, c.Step)
	if err != nil {
		return nil, err
	}
	outcome, reason := "done", ""
	var ev verify.Evaluation
	switch {
	case verdict != "":
		outcome = verdict
	case node.Kind == flow.KindEvaluator:
		if ev, err = verify.Evaluate(ctx, s, c.Env, c.Step, subtask, value); err != nil {
			return nil, err
		}
		outcome, reason = ev.Outcome, ev.Reason
	}
	// An agent with a hitl grant may ask a human (core/hitl.go); a malformed or
	// disallowed request is refused before anything is appended.
	if hi, err := core.HumanInputRequest(node, value); err != nil {
		return nil, err
	} else if hi != nil {
		outcome, reason = compiler.OutcomeHumanInput, hi.Kind+": "+core.OneLine(hi.Text, 200)
	}
	// Output slots, the decomposition, the output_file copy: decided (and a
	// malformed planning result refused) before anything is appended.
	outs, err := planOutputs(s, c, node, value, body, parts, outcome == compiler.OutcomeHumanInput)
	if err != nil {
		return nil, err
	}
	sv := &core.StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: c.Attempt.N, Outcome: outcome, Reason: reason, Bytes: len(body), Parts: parts,
		Subtasks: outs.subtasks, SubtaskOrder: subtask, Gate: ev.Gate, Exhausted: ev.Exhausted, Output: outs.output}
	raw, err := json.Marshal(sv)
	if err != nil {
		return nil, err
	}
	att.Status, att.Terminal = stratus.AttemptSubmitted, "Captured"
	// The Final and the attempt are recorded together (a second Final is
	// fenced here); the step stays open until its files persisted, so it
	// never reads done without them (docs/security.md § Output that did
	// not persist).
	if _, err := s.Store.CompleteAttempt(ctx, final, att, c.Step); err != nil {
		return nil, core.SecondFinal(c, err)
	}

	// Parts were projected at staging; the final body is projected now.
	var dir string
	switch {
	case c.Run.WorkDir == "" && c.Env.Flow.CheckPolicy == "strict":
		err = fmt.Errorf("no work dir resolves for run %s, and the flow's check_policy is strict", c.Run.ID)
	case c.Run.WorkDir == "":
		// docs/contracts.md § Files are the server's job: skip fail-open,
		// with a warning.
		s.WarnCall(c, "%s: no work dir resolves for run %s; its files are skipped", c.Step.StepRef, c.Run.ID)
	default:
		dir, err = core.CtxDir(c.Env, c.Run)
	}
	if err == nil && dir != "" {
		fm := projection.FrontMatter{TaskID: c.Run.TaskID, Step: c.Step.Node, StepRef: c.Step.StepRef,
			Attempt: c.Attempt.N, Agent: c.Attempt.Agent, Format: formatName(format), SubmittedAt: final.At}
		_, err = projection.Project(ctx, s.Files(c.Run), dir, c.Step.Node, fm, body, nil)
		if err == nil {
			err = writeOutputs(ctx, s, s.Files(c.Run), outs)
		}
	}
	if err != nil {
		return nil, attempt.NotPersisted(ctx, s, c, att, err)
	}
	step := c.Step
	step.Status, step.Verdict, step.Value, step.EndedAt = stratus.StepCompleted, outcome, raw, final.At
	if err := s.Store.UpdateStep(ctx, step); err != nil {
		return nil, attempt.NotPersisted(ctx, s, c, att, fmt.Errorf("record %s done: %w", c.Step.StepRef, err))
	}
	for _, w := range outs.warnings {
		s.WarnCall(c, "%s: %s", c.Step.StepRef, w)
	}
	if ev.Exhausted {
		s.WarnCall(c, "%s", verify.ExhaustedWarning(c.Step.StepRef, ev))
	}
	attempt.EmitEnded(s, c, att, outcome, reason)
	if err := s.Tokens.SendTaskSuccess(ctx, c.Step.TaskToken, raw); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "output of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, nil
}

func formatName(f string) string {
	if f == "" {
		return "default"
	}
	return f
}

// toolVerdict decides a tool result (nodeexec.ToolOutcome) and applies the
// repeated-fail guard against the node's previous visit (reference.md §
// tool node: two identical fail results without findings park on the
// second, before another fix iteration is charged).
func toolVerdict(ctx context.Context, s *core.Service, c *core.Caller, r *nodeexec.ToolResult) (nodeexec.ToolVerdict, error) {
	tv := nodeexec.ToolOutcome(r)
	if tv.Manual || tv.Digest == "" {
		return tv, nil
	}
	// The previous visit: the node's visits rise with their creation
	// (store.Store CreateNextStep numbers each), so it is the newest step
	// of the node below this visit — typically the one created just
	// before it, read without the run's others (README.md § Performance).
	prev, found, err := store.NewestWhere(ctx, s.Store, c.Run.ID, c.Step.Node, 2, func(st stratus.Step) bool {
		return st.Visit < c.Step.Visit
	})
	if err != nil {
		return tv, err
	}
	if !found || prev.Status != stratus.StepCompleted {
		return tv, nil
	}
	var pv execValue
	if json.Unmarshal(prev.Value, &pv) != nil {
		return tv, nil
	}
	if nodeexec.RepeatedFail(pv.Digest, tv) {
		tv.Verdict = nodeexec.Verdict{Manual: true, Error: nodeexec.ErrToolRepeatedFail,
			Reason: fmt.Sprintf("tool %s failed exactly as in %s, without findings: another fix iteration would not help (%s)", r.Name, prev.StepRef, tv.Reason)}
	}
	return tv, nil
}
