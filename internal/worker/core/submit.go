package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/fold"
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

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
	att.Status, att.Terminal, att.Reason = stratus.AttemptFailed, f.Terminal, reason
	att.Class, att.RetryAt = f.Verdict.Class, f.Verdict.RetryAt
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
