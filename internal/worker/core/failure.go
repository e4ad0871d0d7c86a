package core

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/failclass"
)

// FailureValue is the value of a failed result (POST /v1/worker/result
// with ok=false): the child's terminal (docs/contracts.md § Terminal
// classification) and the reason, and the
// failure class the runner gave it (internal/failclass) with the reset the
// failure named, RFC 3339 ("" = unknown). A value without a class (an
// older runner's) is classified by the worker API with the same
// failclass.Classify.
type FailureValue struct {
	Terminal string `json:"terminal"`
	Reason   string `json:"reason"`
	Class    string `json:"class,omitempty"`
	RetryAt  string `json:"retry_at,omitempty"`
}

// NewFailureValue is the value a runner posts for terminal, reason and
// its classification v.
func NewFailureValue(terminal, reason string, v failclass.Verdict) FailureValue {
	f := FailureValue{Terminal: terminal, Reason: reason, Class: v.Class}
	if !v.RetryAt.IsZero() {
		f.RetryAt = v.RetryAt.UTC().Format(time.RFC3339)
	}
	return f
}

// Failure is how an attempt failed: its terminal and its class with the
// reset (verdict.Class "" = not classified yet: submit classifies it).
type Failure struct {
	Terminal string
	Verdict  failclass.Verdict
}

// Complete is f with its terminal ("" = Failed) and class set: a failure
// no one classified yet is classified from its reason.
func (f Failure) Complete(reason string, now time.Time) Failure {
	if f.Terminal == "" {
		f.Terminal = "Failed"
	}
	if f.Verdict.Class == "" {
		f.Verdict = failclass.Classify(failclass.Evidence{Terminal: f.Terminal, Reason: reason, Now: now})
	}
	return f
}

// Seen is a failure the worker API saw itself (internal/failclass doc: a
// launch failure, a worker gone without a result, a stopped task are
// infrastructure; a lapsed deadline or heartbeat is a timeout).
func Seen(class, rule string) Failure {
	return Failure{Terminal: "Failed", Verdict: failclass.Verdict{Class: class, Rule: rule}}
}

// DecodeFailureValue reads the value of a failed result: a FailureValue when the
// value is an object with a terminal (or a class or retry_at), ok false
// otherwise (any other value is the body as is). Errors: EINVALID naming
// class for a class that is none of failclass.Classes, naming retry_at
// for a reset that is no RFC 3339 time.
func DecodeFailureValue(v json.RawMessage) (f FailureValue, reset time.Time, ok bool, err error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		return FailureValue{}, time.Time{}, false, nil
	}
	var tr struct{ Terminal, Reason string }
	termOK := json.Unmarshal(v, &tr) == nil && tr.Terminal != ""
	class, hasClass := m["class"]
	retry, hasRetry := m["retry_at"]
	hasClass = hasClass && string(bytes.TrimSpace(class)) != "null"
	hasRetry = hasRetry && string(bytes.TrimSpace(retry)) != "null"
	if !termOK && !hasClass && !hasRetry {
		return FailureValue{}, time.Time{}, false, nil
	}
	f = FailureValue{Terminal: tr.Terminal, Reason: tr.Reason}
	if !termOK {
		// A class without a terminal: the reason, if a string, is still
		// the reason.
		f.Terminal, f.Reason = "", ""
		json.Unmarshal(m["reason"], &f.Reason)
	}
	if hasClass {
		if json.Unmarshal(class, &f.Class) != nil || !failclass.Valid(f.Class) {
			return FailureValue{}, time.Time{}, false, stratus.FieldErrorf(stratus.EINVALID, "class",
				"class %s is not a failure class; valid: %s (internal/failclass), or no class for the worker API to classify the failure",
				ClipReason(string(bytes.TrimSpace(class)), 80, ""), strings.Join(failclass.Classes, ", "))
		}
	}
	if hasRetry {
		var s string
		if json.Unmarshal(retry, &s) == nil {
			reset, err = time.Parse(time.RFC3339, s)
		}
		if s == "" || err != nil {
			return FailureValue{}, time.Time{}, false, stratus.FieldErrorf(stratus.EINVALID, "retry_at",
				"retry_at %s is not a time; valid: an RFC 3339 string such as \"2026-12-04T18:00:00Z\" (when the provider takes requests again), or no retry_at",
				ClipReason(string(bytes.TrimSpace(retry)), 80, ""))
		}
		f.RetryAt = s
	}
	return f, reset.UTC(), true, nil
}

// CaughtClass is the class of an attempt still running when its Task
// state was caught with e (a stop message): a lapsed TimeoutSeconds or
// HeartbeatSeconds is a timeout; any other error stopped its task
// (infrastructure).
func CaughtClass(e *CaughtError) string {
	if e != nil && (e.Error == asl.ErrTimeout || e.Error == asl.ErrHeartbeatTimeout) {
		return failclass.Timeout
	}
	return failclass.Infrastructure
}
