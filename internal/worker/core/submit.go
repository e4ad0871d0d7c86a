package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/fold"
)

// StepValue is the small value a Task state completes with: references and
// scalars only, never bodies (docs/architecture.md § Limits: 256 KiB state
// payload).
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

// DecodeStepValue decodes a step's value (StepValue). Errors: "no value"
// for an empty raw; encoding/json's for one that is not a StepValue.
func DecodeStepValue(raw json.RawMessage) (StepValue, error) {
	var v StepValue
	if len(raw) == 0 {
		return v, fmt.Errorf("no value")
	}
	return v, json.Unmarshal(raw, &v)
}

// SubmitFormat is the fold mode of a node (docs/contracts.md § The fold and
// submit_format), nearest declaration wins: the node's own `submit_format` (the
// step), its role file's front matter (the agent), the flow's `submit_format`
// (flow-wide). An unknown value is warned about and folds like the default.
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

// Truncate returns s when it is at most n bytes long, else its first n
// bytes followed by "…" (a cut inside a multi-byte character is not
// avoided).
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
	// Upload names an upload holding the body (docs/contracts.md § Request
	// and response bodies); the value is
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

// SecondFinal words the conflict of a second Final for the caller.
func SecondFinal(c *Caller, err error) error {
	if stratus.ErrorCode(err) == stratus.ECONFLICT {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of %s already has a Final", c.Attempt.N, c.Step.TID)
	}
	return err
}

// MaxReasonBytes bounds the reason Stratus keeps for a failed attempt, in bytes:
// the attempt's reason, its step's value, the step-ended event and the state
// machine's task failure cause (Step Functions keeps 32,768 characters of a
// cause, and the value travels in a 256 KiB state: docs/architecture.md §
// Limits). A worker's longer reason (POST /v1/worker/result or /v1/worker/submit
// with ok=false, up to the body limit) is kept whole only as the attempt's
// failed Final in its output tail.
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

// Stats is the body of POST /v1/worker/stats: a worker's self-reported
// per-attempt counters, cumulative (every field optional; docs/contracts.md §
// Request and response bodies). EngineStartedAt (unix ms) marks when the runner
// spawned the engine, for the orchestration-overhead figure.
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
