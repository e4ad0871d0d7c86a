package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/projection"
)

// StepValue is the small value a Task state completes with: references and
// scalars only, never bodies (DESIGN.md § Limits: 256 KiB state payload).
// Routing reads Outcome ($.last.outcome).
type StepValue struct {
	StepRef string   `json:"step_ref"`
	Node    string   `json:"node"`
	Attempt int      `json:"attempt,omitempty"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason,omitempty"`
	Bytes   int      `json:"bytes,omitempty"`
	Parts   []string `json:"parts,omitempty"`
	// Subtasks is the subtask count of a decomposition the step proposed
	// (0: the task runs as one unit); the compiled machine routes on
	// $.last.subtasks. SubtaskOrder is the subtask a region step ran.
	Subtasks     int `json:"subtasks,omitempty"`
	SubtaskOrder int `json:"subtask_order,omitempty"`
	// Gate is the gate_severity an evaluator step applied; Exhausted marks a
	// non-blocking evaluator that accepted with gating findings still open
	// (its rework budget spent): the report lists them as open follow-ups.
	Gate      string `json:"gate,omitempty"`
	Exhausted bool   `json:"exhausted,omitempty"`
	// Output is the ctx-relative file {<node>_path} carries when it is not
	// <node>.md: the output_file copy <node>.out/<file>.
	Output string `json:"output,omitempty"`
	// RetryAt is when a parked step's node is entered again (Outcome
	// "parked": internal/retry), UTC.
	RetryAt time.Time `json:"retry_at,omitzero"`
}

func DecodeStepValue(raw json.RawMessage) (StepValue, error) {
	var v StepValue
	if len(raw) == 0 {
		return v, fmt.Errorf("no value")
	}
	return v, json.Unmarshal(raw, &v)
}

// SubmitFormat is the fold mode of a node (seed 000 § submit_format),
// nearest declaration wins: the node's own `submit_format` (the step), its
// role file's front matter (the agent), the flow's `submit_format` (flow-wide).
// An unknown value is warned about and folds like the default.
func (s *Service) SubmitFormat(env *RunEnv, nodeID string) string {
	node := env.Flow.Node(nodeID)
	f := node.SubmitFormat
	if f == "" && node.RoleFile != "" {
		key := env.FlowDir + "\x00" + node.RoleFile
		if v, ok := s.roleMeta.Load(key); ok {
			f = v.(string)
		} else if meta, _, err := ReadRoleFile(env.FlowDir, node.RoleFile); err == nil {
			f = meta.SubmitFormat
			s.roleMeta.Store(key, f)
		}
	}
	if f == "" {
		f = env.Flow.SubmitFormat
	}
	if !fold.KnownFormat(f) {
		s.Warnf("node %s: submit_format %q is not json or text; folding like the default", nodeID, f)
		return ""
	}
	return f
}

// checkVerdict enforces a node's verdict contract (seed 000 § The in-process
// twin: channel body compares the final body, channel part the staged
// `verdict` part), before the fold and before anything is appended. It
// returns the verdict token, or EUNPROCESSABLE naming the agent, the
// channel, what arrived and what is allowed.
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
		arrived = fmt.Sprintf("%q", Truncate(tok, 80))
	}
	return "", stratus.Errorf(stratus.EUNPROCESSABLE, "verdict contract violation: agent %s, channel %s: got %s; allowed: %s",
		agent, channel, arrived, strings.Join(v.Allowed, ", "))
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Submit records the final body of an attempt (POST /v1/worker/submit, seed
// 000 § The shape) and completes its step: fold, project, decide the
// outcome, SendTaskSuccess. ok=false records a failed Final and fails the
// step instead (the body is the reason). The step reads done, and its Task
// state succeeds, only once its files and its record persisted; when they
// did not, the step fails (docs/security.md § Output that did not
// persist). Errors: EUNPROCESSABLE when the body breaks the step's
// submit_format (nothing appended), ECONFLICT when fenced or for a second
// Final; an error wrapping ErrNotPersisted (ENOSPACE for a full disk, else
// EINTERNAL) when the output did not persist.
func (s *Service) Submit(ctx context.Context, authorization, tid string, body []byte, ok bool) (*StepValue, error) {
	return s.SubmitBody(ctx, authorization, tid, Body{Bytes: body}, ok)
}

// SubmitBody is Submit of a body inline or uploaded (POST
// /v1/worker/submit?upload=, issue 14 § 8). Errors: Submit's; bodyOf's
// for the upload.
func (s *Service) SubmitBody(ctx context.Context, authorization, tid string, b Body, ok bool) (*StepValue, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, tid)
	if err != nil {
		return nil, err
	}
	return s.submitBody(ctx, c, b, ok, Failure{})
}

// submitBody reads b (bodyOf) and submits it; the upload, if any, is
// settled (settleUpload) with the outcome.
func (s *Service) submitBody(ctx context.Context, c *Caller, b Body, ok bool, f Failure) (sv *StepValue, err error) {
	defer func() { s.SettleUpload(ctx, c, b, err) }()
	// Fenced before the upload is read: a retried submit of a recorded
	// attempt is the same 409 whether its body came inline or uploaded.
	if err := s.Fence(ctx, c); err != nil {
		return nil, err
	}
	body, err := s.BodyOf(ctx, c, b)
	if err != nil {
		return nil, err
	}
	return s.submit(ctx, c, body, ok, f)
}

// ResultBody is the body of POST /v1/worker/result.
type ResultBody struct {
	TaskID string          `json:"task_id"`
	Value  json.RawMessage `json:"value,omitempty"`
	OK     *bool           `json:"ok"`
	// Upload names an upload holding the body (issue 14 § 8); the value is
	// then absent (or null): the uploaded bytes are the body as is.
	Upload string `json:"upload,omitempty"`
}

// Body is the final body a result stands for: a JSON string value as is,
// any other value as its JSON text.
func (rb ResultBody) Body() []byte {
	var str string
	if err := json.Unmarshal(rb.Value, &str); err == nil {
		return []byte(str)
	}
	return bytes.TrimSpace(rb.Value)
}

// Result serves POST /v1/worker/result {task_id, value, ok} (seed 001 §
// Routes). A string value is the body as is; any other value is its JSON
// text. With ok=false the runner reports a terminal other than Captured:
// value may be a FailureValue {"terminal", "reason", "class", "retry_at"};
// the attempt records the class and reset (internal/failclass), classified
// here from the terminal and reason when the value has no class. Errors:
// EINVALID naming class or retry_at for a value that is none
// (failureValue), as Submit otherwise.
func (s *Service) Result(ctx context.Context, authorization string, rb ResultBody) (*StepValue, error) {
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
			s.SettleUpload(ctx, c, Body{Upload: rb.Upload}, err)
			return nil, err
		}
		return s.submitBody(ctx, c, Body{Upload: rb.Upload}, *rb.OK, Failure{})
	}
	body := rb.Body()
	var f Failure
	if !*rb.OK {
		fv, reset, isValue, err := DecodeFailureValue(rb.Value)
		if err != nil {
			return nil, err
		}
		if isValue {
			f = Failure{terminal: fv.Terminal, verdict: failclass.Verdict{Class: fv.Class, RetryAt: reset, Rule: "runner"}}
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
	return s.submit(ctx, c, body, *rb.OK, f)
}

// submit records body as the attempt's Final; with ok=false it fails the
// attempt with f, classified here (internal/failclass) from its terminal,
// the body and the engine's stderr in the runner's log when the worker
// sent no class.
func (s *Service) submit(ctx context.Context, c *Caller, body []byte, ok bool, f Failure) (*StepValue, error) {
	if ok {
		// An engine that wrote into the operator's work dir fails its step
		// whatever it reports (docs/security.md § Workspace commits).
		if why := s.WatchReason(ctx, c); why != "" {
			ok, body = false, []byte(why)
			f = Failure{terminal: "Failed", verdict: failclass.Classify(failclass.Evidence{Terminal: "Captured", Report: true, Reason: why})}
		}
	}
	var logTailText, log string
	if !ok {
		if log = s.RunnerLog(c.Run, c.Step); log != "" {
			logTailText = logTail(log, 2)
		}
		if f.verdict.Class == "" {
			// No class: a worker (an older runner, an engine calling the
			// route itself) that did not classify its failure. A clock
			// time in its words is read in this machine's zone: on it, or
			// beside it (AWS: UTC both), the engine ran.
			sent := f.verdict.RetryAt
			f.verdict = failclass.Classify(failclass.Evidence{Terminal: f.terminal, Reason: string(body), Stderr: strings.ReplaceAll(logTailText, " | ", "\n"), Now: s.NowUTC().Local()})
			if f.verdict.RetryAt.IsZero() {
				f.verdict.RetryAt = sent // a reset sent without a class is kept
			}
		}
	}
	if c.Step.Kind == SupervisorKind {
		sv, err := s.SupervisorSubmit(ctx, c, body, ok, f) // supervisor.go
		if !ok {
			sv = FailureAnswer(sv, len(body))
		}
		return sv, err
	}
	if err := s.Fence(ctx, c); err != nil {
		return nil, err
	}
	body, err := s.ResolveFileSentinel(c, body)
	if err != nil {
		return nil, err
	}
	final := stratus.OutputEvent{TID: c.Step.TID, Attempt: c.Attempt.N, Kind: stratus.OutputFinal, Body: body, OK: ok, At: s.NowUTC()}
	att := c.Attempt
	att.EndedAt = final.At
	if !ok {
		if _, err := s.Store.AppendOutput(ctx, final); err != nil {
			return nil, SecondFinal(c, err)
		}
		// The worker's words, bounded: the whole text is the Final just
		// appended; half of MaxReasonBytes leaves room for the log's.
		reason := ClipReason(string(body), MaxReasonBytes/2, " [cut; the whole text is the attempt's failed Final]")
		if log != "" {
			// The engine's stderr went to the runner's log: its last
			// lines (not the runner's own) and where the log is.
			if logTailText != "" {
				reason += "; log: " + ClipReason(logTailText, MaxReasonBytes/4, "")
			}
			reason += " (log: " + log + ")"
		}
		sv, err := s.FailAttempt(ctx, c, att, f, reason)
		return FailureAnswer(sv, len(body)), err
	}
	if IsExec(c.Env.Flow.Node(c.Step.Node).Kind) {
		return s.submitExec(ctx, c, final) // checks, tool: a nodeexec result (checks.go)
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
	value, err := fold.Fold(c.Attempt.Agent, append(tail, final), format)
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
	subtask, _, err := s.SubtaskOf(ctx, c.Env, c.Step)
	if err != nil {
		return nil, err
	}
	outcome, reason := "done", ""
	var ev evaluation
	switch {
	case verdict != "":
		outcome = verdict
	case node.Kind == "evaluator":
		if ev, err = s.evaluate(ctx, c.Env, c.Step, subtask, value); err != nil {
			return nil, err
		}
		outcome, reason = ev.Outcome, ev.Reason
	}
	// An agent with a hitl grant may ask a human (hitl.go); a malformed or
	// disallowed request is refused before anything is appended.
	if hi, err := HumanInputRequest(node, value); err != nil {
		return nil, err
	} else if hi != nil {
		outcome, reason = compiler.OutcomeHumanInput, hi.Kind+": "+OneLine(hi.Text, 200)
	}
	// Output slots, the decomposition, the output_file copy: decided (and a
	// malformed planning result refused) before anything is appended.
	outs, err := s.planOutputs(c, node, value, body, parts, outcome == compiler.OutcomeHumanInput)
	if err != nil {
		return nil, err
	}
	sv := &StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: c.Attempt.N, Outcome: outcome, Reason: reason, Bytes: len(body), Parts: parts,
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
		return nil, SecondFinal(c, err)
	}

	// Parts were projected at staging; the final body is projected now.
	var dir string
	switch {
	case c.Run.WorkDir == "" && c.Env.Flow.CheckPolicy == "strict":
		err = fmt.Errorf("no work dir resolves for run %s, and the flow's check_policy is strict", c.Run.ID)
	case c.Run.WorkDir == "":
		// seed 000 § Files are the server's job: skip fail-open, with a warning.
		s.WarnCall(c, "%s: no work dir resolves for run %s; its files are skipped", c.Step.StepRef, c.Run.ID)
	default:
		dir, err = CtxDir(c.Env, c.Run)
	}
	if err == nil && dir != "" {
		fm := projection.FrontMatter{TaskID: c.Run.TaskID, Step: c.Step.Node, StepRef: c.Step.StepRef,
			Attempt: c.Attempt.N, Agent: c.Attempt.Agent, Format: formatName(format), SubmittedAt: final.At}
		_, err = projection.Project(ctx, s.Files(c.Run), dir, c.Step.Node, fm, body, nil)
		if err == nil {
			err = s.writeOutputs(ctx, s.Files(c.Run), outs)
		}
	}
	if err != nil {
		return nil, s.NotPersisted(ctx, c, att, err)
	}
	step := c.Step
	step.Status, step.Verdict, step.Value, step.EndedAt = stratus.StepCompleted, outcome, raw, final.At
	if err := s.Store.UpdateStep(ctx, step); err != nil {
		return nil, s.NotPersisted(ctx, c, att, fmt.Errorf("record %s done: %w", c.Step.StepRef, err))
	}
	for _, w := range outs.warnings {
		s.WarnCall(c, "%s: %s", c.Step.StepRef, w)
	}
	if ev.Exhausted {
		s.WarnCall(c, "%s", exhaustedWarning(c.Step.StepRef, ev))
	}
	s.EmitEnded(c, att, outcome, reason)
	if err := s.Tokens.SendTaskSuccess(ctx, c.Step.TaskToken, raw); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "output of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, nil
}

// ErrNotPersisted is wrapped by the error of a submit whose Final was
// recorded but whose output did not persist (notPersisted): its step has
// failed, and either its Task state was told so (SendTaskFailure), so the
// run routes the failure itself, or, for a full disk, DiskFull was told
// and stops the run. Whoever serves the request has nothing left to stop.
var ErrNotPersisted = errors.New("the step's output did not persist")

// NotPersisted ends a step whose Final was recorded (CompleteAttempt) but
// whose output did not persist — a projection file, an output file or the
// step's own completed record refused by the sink or the store (err) —
// the way docs/security.md § Output that did not persist says: the attempt
// and the step are recorded failed, the reason naming the step, the cause
// (for a full disk: "the disk is full", ENOSPC or EDQUOT, and the file) and
// that a resume runs it again. The Task state never succeeds: it fails
// with ErrProjection, or, for a full disk where DiskFull is set
// (embedded), it is not told and DiskFull stops the run, interrupted. A
// record the store refuses too is warned about: the step then stays open
// (running), which the run's end cancels, and a resume runs a canceled
// step again all the same.
//
// The error returned is a *stratus.Error for the worker — ENOSPACE (507)
// for a full disk, else EINTERNAL — whose message leaks no path, wrapping
// ErrNotPersisted and err for the server's logs.
func (s *Service) NotPersisted(ctx context.Context, c *Caller, att stratus.Attempt, err error) error {
	ctx = context.WithoutCancel(ctx) // a worker gone away does not leave the step open
	cause, public, code, fix := err.Error(), "its files could not be written", stratus.EINTERNAL, "fix that"
	if stratus.StorageFull(err) {
		cause = "the disk is full (" + fullErrno(err) + "): " + cause
		public, code, fix = "the server's disk is full", stratus.ENOSPACE, "free space"
	}
	reason := fmt.Sprintf("its output did not persist: %s; %s, then resume the run: %s runs again", cause, fix, c.Step.StepRef)
	att.Status, att.Reason = stratus.AttemptFailed, reason
	att.Class, att.RetryAt = failclass.Infrastructure, time.Time{} // the server's own failure
	if uerr := s.Store.UpdateAttempt(ctx, att); uerr != nil {
		s.WarnCall(c, "%s: record the attempt failed: %v", c.Step.StepRef, uerr)
	}
	v, _ := json.Marshal(StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Outcome: "failed", Reason: reason})
	if ferr := s.FinishStep(ctx, c.Step, stratus.StepFailed, "failed", v); ferr != nil {
		s.WarnCall(c, "%s: record the step failed: %v; it stays open until the run ends", c.Step.StepRef, ferr)
	}
	s.EmitEnded(c, att, "failed", reason)
	// A full disk stops the run wherever it is met (DiskFull): the state
	// is not told then, so that nothing routes the failure while the run
	// stops.
	if !s.ReportDiskFull(fmt.Errorf("%s: its output did not persist (%s): %w", c.Step.StepRef, fullErrno(err), err)) {
		if terr := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, ErrProjection, c.Step.StepRef+" failed: "+reason); terr != nil {
			s.WarnCall(c, "%s: tell its state it failed: %v", c.Step.StepRef, terr)
		}
	}
	pub := stratus.Errorf(code, "the output of %s was recorded, but %s: the step failed; %s, then resume the run", c.Step.StepRef, public, fix)
	return fmt.Errorf("%w (%w: %w)", pub, ErrNotPersisted, err)
}

// fullErrno names what says a disk is full in err: ENOSPC, EDQUOT, or
// SQLITE_FULL (stratus.StorageFull).
func fullErrno(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "ENOSPC"
	case errors.Is(err, syscall.EDQUOT):
		return "EDQUOT"
	case strings.Contains(err.Error(), "database or disk is full"):
		return "SQLITE_FULL"
	}
	return "ENOSPACE"
}

// SecondFinal words the conflict of a second Final for the caller.
func SecondFinal(c *Caller, err error) error {
	if stratus.ErrorCode(err) == stratus.ECONFLICT {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of %s already has a Final", c.Attempt.N, c.Step.TID)
	}
	return err
}

// MaxReasonBytes bounds the reason Stratus keeps for a failed attempt, in
// bytes: the attempt's reason, its step's value, the step-ended event and
// the state machine's task failure cause (Step Functions keeps 32,768
// characters of a cause, and the value travels in a 256 KiB state:
// DESIGN.md § Limits). A worker's longer reason (POST /v1/worker/result or
// /v1/worker/submit with ok=false, up to the body limit) is kept whole only
// as the attempt's failed Final in its output tail.
const MaxReasonBytes = 4 << 10

// AnswerReasonBytes bounds the reason in the answer to a failed result or
// submit, in bytes: the answer acknowledges the failure (step ref,
// outcome, Bytes = the size of the reason received, a preview), it does
// not send the worker its text back.
const AnswerReasonBytes = 256

// ClipReason returns s when it is at most max bytes, else its first bytes,
// cut on a rune boundary, then "…" and more, in at most max bytes in all.
func ClipReason(s string, max int, more string) string {
	if len(s) <= max {
		return s
	}
	suffix := "…" + more
	cut := max - len(suffix)
	if cut < 0 {
		cut, suffix = max, ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

// FailureAnswer is what a failed result or submit answers for sv, the
// failed step's value: sv with Bytes, the size of the reason the worker
// sent, and its reason cut to AnswerReasonBytes.
func FailureAnswer(sv *StepValue, bytes int) *StepValue {
	if sv == nil {
		return nil
	}
	a := *sv
	a.Bytes = bytes
	a.Reason = ClipReason(a.Reason, AnswerReasonBytes, "")
	return &a
}

// FailAttempt records att failed as f says (its terminal, class and
// reset) with reason, fails its step and its Task state (ErrWorkerFailed:
// what happens next is the state machine's, whatever the class).
func (s *Service) FailAttempt(ctx context.Context, c *Caller, att stratus.Attempt, f Failure, reason string) (*StepValue, error) {
	f = f.Complete(reason, s.NowUTC().Local())
	if c.Step.Kind == SupervisorKind {
		return s.SupervisorFailed(ctx, c, att, f, reason) // supervisor.go
	}
	// Bounded whatever its source (a worker's report, a runner log's
	// lines, a launch error): see MaxReasonBytes.
	reason = ClipReason(reason, MaxReasonBytes, " [cut]")
	att.Status, att.Terminal, att.Reason = stratus.AttemptFailed, f.terminal, reason
	att.Class, att.RetryAt = f.verdict.Class, f.verdict.RetryAt
	if err := s.Store.UpdateAttempt(ctx, att); err != nil {
		return nil, err
	}
	if sv, handled, err := s.RetryFailure(ctx, c, att, reason); handled {
		return sv, err // retry.go: a transient failure the retry policy takes
	}
	sv := &StepValue{StepRef: c.Step.StepRef, Node: c.Step.Node, Attempt: att.N, Outcome: "failed", Reason: reason}
	raw, _ := json.Marshal(sv)
	if err := s.FinishStep(ctx, c.Step, stratus.StepFailed, "failed", raw); err != nil {
		return nil, err
	}
	s.EmitEnded(c, att, "failed", reason)
	if err := s.Tokens.SendTaskFailure(ctx, c.Step.TaskToken, ErrWorkerFailed, reason); err != nil {
		return nil, stratus.Errorf(stratus.ECONFLICT, "failure of %s was recorded, but its state no longer waits for it: %v", c.Step.StepRef, err)
	}
	return sv, nil
}

func (s *Service) EmitEnded(c *Caller, att stratus.Attempt, outcome, reason string) {
	s.Emit(Event{Type: EventStepEnded, RunID: c.Run.ID, Node: c.Step.Node, StepRef: c.Step.StepRef, TID: c.Step.TID, Attempt: att.N,
		Terminal: att.Terminal, Outcome: outcome, Reason: reason, Duration: att.EndedAt.Sub(att.StartedAt),
		PromptTokens: att.PromptTokens, CompletionTokens: att.CompletionTokens, CostUSD: att.CostUSD})
}

func formatName(f string) string {
	if f == "" {
		return "default"
	}
	return f
}

// Stats is the body of POST /v1/worker/stats: a worker's self-reported
// per-attempt counters, cumulative (every field optional; seed 001 §
// StatsBody). EngineStartedAt (unix ms) marks when the runner spawned the
// engine, for the orchestration-overhead figure.
type Stats struct {
	Steps            *int     `json:"steps,omitempty"`
	PromptTokens     *int64   `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64   `json:"completion_tokens,omitempty"`
	CostUSD          *float64 `json:"cost_usd,omitempty"`
	EngineStartedAt  *int64   `json:"engine_started_at_ms,omitempty"`
}

// MaxCostUSD is the largest cost one attempt may report, US dollars.
const MaxCostUSD = 1e9

// PlausibleCost reports whether c is a cost an attempt may report: finite,
// from 0 to MaxCostUSD.
func PlausibleCost(c float64) bool {
	return c >= 0 && c <= MaxCostUSD && !math.IsNaN(c) && !math.IsInf(c, 0)
}
