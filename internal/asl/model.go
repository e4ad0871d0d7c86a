package asl

import (
	"math"
	"time"
)

// StateType is the "Type" of a state.
type StateType string

// The state types the embedded executor runs. Map and Parallel are
// rejected by Parse.
const (
	TypePass    StateType = "Pass"
	TypeTask    StateType = "Task"
	TypeChoice  StateType = "Choice"
	TypeWait    StateType = "Wait"
	TypeSucceed StateType = "Succeed"
	TypeFail    StateType = "Fail"
)

// Pattern is a Task's service-integration pattern, read from the suffix
// of its Resource.
type Pattern int

const (
	// RequestResponse: the task's result is what the call returns.
	RequestResponse Pattern = iota
	// WaitForTaskToken (".waitForTaskToken"): the call hands out
	// $$.Task.Token and the state waits for SendTaskSuccess/Failure.
	WaitForTaskToken
	// Sync (".sync", ".sync:2"): run a job and wait for it; in-process this
	// is the same as RequestResponse.
	Sync
)

// StateMachine is a parsed and checked definition.
type StateMachine struct {
	Comment string
	StartAt string
	// TimeoutSeconds bounds the whole execution; 0 means no limit.
	TimeoutSeconds int
	Version        string
	States         map[string]*State
	// Names lists the states in definition order.
	Names []string
}

// State is one parsed state. Which fields are meaningful depends on Type.
type State struct {
	Name    string
	Type    StateType
	Comment string
	Next    string // empty when End or for Choice, Succeed, Fail
	End     bool

	// InputPath, OutputPath and ResultPath default to "$"; nil stands for
	// an explicit JSON null (InputPath/OutputPath: {}; ResultPath:
	// discard the result and pass the input on).
	InputPath  *Path
	OutputPath *Path
	ResultPath *Path

	Parameters     *Template // Pass, Task; nil when absent
	ResultSelector *Template // Task
	Result         Value     // Pass, when HasResult
	HasResult      bool

	// Task.
	Resource         string  // as written, suffix included
	ResourceBase     string  // Resource without .waitForTaskToken/.sync
	Pattern          Pattern // from the suffix
	TimeoutSeconds   int     // 0: not set (AWS default 99999999)
	HeartbeatSeconds int     // 0: not set
	Retry            []Retrier
	Catch            []Catcher

	// Choice.
	Choices []*ChoiceRule
	Default string

	// Wait: exactly one of Seconds (HasSeconds), Timestamp (non-zero),
	// SecondsPath, TimestampPath (ASL spec § Wait State).
	Seconds       int
	HasSeconds    bool
	Timestamp     time.Time // already truncated to whole seconds, as AWS does
	SecondsPath   *Path
	TimestampPath *Path

	// Fail.
	Error string
	Cause string
}

// Retrier is one element of a Task's Retry (ASL spec § Retrying after
// error).
type Retrier struct {
	ErrorEquals     []string
	IntervalSeconds int     // default 1
	MaxAttempts     int     // default 3; 0 never retries
	BackoffRate     float64 // default 2.0
	MaxDelaySeconds int     // 0: no cap
	JitterStrategy  string  // "FULL" or "NONE" (default)
}

// Matches reports whether the retrier applies to an error name.
func (r *Retrier) Matches(name string) bool { return matchAny(r.ErrorEquals, name) }

// Delay returns the wait before the retry that follows n earlier retries
// by this retrier: IntervalSeconds × BackoffRate^n, capped by
// MaxDelaySeconds, before any jitter.
func (r *Retrier) Delay(n int) time.Duration {
	secs := float64(r.IntervalSeconds) * math.Pow(r.BackoffRate, float64(n))
	if r.MaxDelaySeconds > 0 && secs > float64(r.MaxDelaySeconds) {
		secs = float64(r.MaxDelaySeconds)
	}
	if max := float64(math.MaxInt64) / float64(time.Second); secs > max || math.IsInf(secs, 1) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(secs * float64(time.Second))
}

// Catcher is one element of a Task's Catch (ASL spec § Fallback states).
type Catcher struct {
	ErrorEquals []string
	ResultPath  *Path // default "$"; nil: null
	Next        string
}

// Matches reports whether the catcher applies to an error name.
func (c *Catcher) Matches(name string) bool { return matchAny(c.ErrorEquals, name) }

// The AWS limits Parse enforces.
const (
	maxTimeoutSeconds  = 99999999
	maxIntervalSeconds = 99999999
	maxMaxAttempts     = 99999999
	maxMaxDelaySeconds = 31622401
	maxWaitSeconds     = 99999999
	maxStateNameLength = 80
)
