package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// ContractVersion is the workflow_contract major version this package speaks
// (docs/contracts.md § The request line, § Versioning).
const ContractVersion = 1

// Defaults of
// docs/contracts.md § Process lifecycle and § Timing, environment and argv.
const (
	// DefaultDeadlineMS is the wall deadline, in milliseconds, used when
	// LaunchSpec.DeadlineMS is zero.
	DefaultDeadlineMS = 600_000
	// DefaultCancelGraceMS is the grace window, in milliseconds, between
	// closing stdin at the deadline and killing the process group.
	DefaultCancelGraceMS = 5_000
	// DefaultMaxLineBytes bounds one stdout line (excluding its newline);
	// longer lines are skipped.
	DefaultMaxLineBytes = 64 << 20
	// ExitWaitMS bounds, in milliseconds, the wait for the child's exit status
	// after a clean stdout EOF; a child still alive then is killed.
	ExitWaitMS = 2_000
	// PostExitDrainMS bounds, in milliseconds, how long stdout is still read
	// after the direct child exited (a grandchild may hold it open); then the
	// group is killed and reading stops.
	PostExitDrainMS = 2_000
)

// Request is one agent call as the engine sees it on the wire
// (docs/contracts.md § The request line).
type Request struct {
	// Kind is the agent kind the caller asked for.
	Kind string
	// Input is the call's input, opaque JSON; nil or empty means null.
	Input json.RawMessage
	// MaxSteps is the caller's step ceiling; nil means none (the field is
	// then absent from the request line).
	MaxSteps *int
	// Schema is a JSON Schema object for the report; nil, empty or the
	// literal null means none (the field is then absent).
	Schema json.RawMessage
}

// LaunchSpec says how to start the engine
// (docs/contracts.md § Process lifecycle, § Timing, environment and argv).
type LaunchSpec struct {
	// Command is the executable (looked up in PATH when it has no slash).
	Command string
	// Args are the arguments after Command.
	Args []string
	// Env overlays the parent's environment (extra_env): a key here
	// replaces the parent's value. Keys must be non-empty and contain no '='.
	Env map[string]string
	// Unset names variables of the parent's environment the child does not
	// inherit (an Env key still sets one): the runner's git token variables
	// (docs/architecture.md § Publishing: the credential reaches the
	// publisher alone, never an engine).
	Unset []string
	// Dir is the child's working directory; "" means the runner's own.
	Dir string
	// Stderr is where the child's stderr goes, never read by this
	// package (docs/contracts.md § Process lifecycle); nil means the runner's
	// own stderr, inherited. The in-process worker
	// (docs/contracts.md § The in-process twin) gives the step's runner log
	// here, as a runner process's stderr would be; the runner keeps the last
	// bytes of what passes as the evidence of a failure (internal/failclass).
	// With a writer that is no *os.File, Run waits at most PostExitDrainMS
	// after the child exited for its stderr to close (a grandchild may hold
	// it).
	Stderr io.Writer
	// DeadlineMS is the wall deadline in milliseconds, measured from the
	// start of Run; 0 (or negative) means DefaultDeadlineMS.
	DeadlineMS int
	// CancelGraceMS is how long, in milliseconds, stdout is still drained
	// after the deadline closed stdin, before the group is killed; 0 (or
	// negative) means DefaultCancelGraceMS.
	CancelGraceMS int
	// MaxLineBytes bounds one stdout line in bytes, excluding the newline;
	// a longer line is skipped, never fatal. 0 (or negative) means
	// DefaultMaxLineBytes.
	MaxLineBytes int
}

// Terminal is how one launch ended
// (docs/contracts.md § Terminal classification).
type Terminal string

// The terminals of docs/contracts.md § Terminal classification, in order of
// precedence.
const (
	Captured     Terminal = "Captured"
	Failed       Terminal = "Failed"
	TimedOut     Terminal = "TimedOut"
	MaxSteps     Terminal = "MaxSteps"
	ContextYield Terminal = "ContextYield"
	NoReport     Terminal = "NoReport"
)

// Attempt is the accounting of one launch, attached to every terminal
// (docs/contracts.md § Terminal classification).
type Attempt struct {
	// ID is the attempt id, "cr-N", also sent as the envelope id.
	ID string `json:"id"`
	// Steps is the largest valid agent_step seen (0 when none).
	Steps int `json:"steps"`
	// PromptTokens is the sum over valid usage events.
	PromptTokens int64 `json:"prompt_tokens"`
	// CompletionTokens is the sum over valid usage events.
	CompletionTokens int64 `json:"completion_tokens"`
	// CostUSD is the sum of valid cost_usd values in US dollars; nil means
	// unknown (no valid usage line carried a cost), never free.
	CostUSD *float64 `json:"cost_usd"`
	// ExitCode is the child's exit code when it exited on its own; nil when
	// it never started, was killed by a signal, or its status was not
	// observed.
	ExitCode *int `json:"exit_code"`
	// WallMS is the wall time of the whole Run call in milliseconds.
	WallMS int64 `json:"wall_ms"`
	// DroppedLines counts stdout lines over MaxLineBytes, skipped unread
	// (a report among them is lost); DroppedMaxBytes is the
	// longest, in bytes without its newline.
	DroppedLines    int   `json:"dropped_lines,omitempty"`
	DroppedMaxBytes int64 `json:"dropped_max_bytes,omitempty"`
}

// Yield carries the fields of the last valid context_yield event
// (docs/contracts.md § The event stream).
type Yield struct {
	ToSequence int64  `json:"to_sequence"`
	Answer     string `json:"answer"`
}

// Result is the resolved launch.
type Result struct {
	// Terminal is the classification of
	// docs/contracts.md § Terminal classification.
	Terminal Terminal `json:"terminal"`
	// Report is the value of the last subrun_report line; set only when
	// Terminal is Captured (a null report is the JSON literal null).
	Report json.RawMessage `json:"report,omitempty"`
	// Failure is the reason when Terminal is Failed: the failure event's
	// text, the spawn or pipe error, or the exit status ("exit status 3").
	Failure string `json:"failure,omitempty"`
	// Yield is the last valid context_yield, when one arrived.
	Yield *Yield `json:"yield,omitempty"`
	// Attempt is the accounting, present on every terminal.
	Attempt Attempt `json:"attempt"`
}

// Progress is the cumulative accounting observed so far
// (docs/contracts.md § The event stream).
type Progress struct {
	Steps                          int
	PromptTokens, CompletionTokens int64
	// CostUSD is nil while no valid cost has arrived.
	CostUSD *float64
}

// Envelope returns the one request line of
// docs/contracts.md § The request line for attempt id, terminated by '\n':
//
//	{"workflow_contract":1,"id":…,"kind":…,"max_steps":N,"schema":{…},"input":…}
//
// max_steps and schema appear only when set. Input and Schema are compacted
// so the line holds no raw newline. It returns an error when Input is not
// valid JSON or Schema is set but is not a JSON object.
func Envelope(id string, req Request) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"workflow_contract":`)
	b.WriteString(strconv.Itoa(ContractVersion))
	b.WriteString(`,"id":`)
	writeJSONString(&b, id)
	b.WriteString(`,"kind":`)
	writeJSONString(&b, req.Kind)
	if req.MaxSteps != nil {
		b.WriteString(`,"max_steps":`)
		b.WriteString(strconv.Itoa(*req.MaxSteps))
	}
	if schema := bytes.TrimSpace(req.Schema); len(schema) > 0 && string(schema) != "null" {
		if schema[0] != '{' {
			return nil, errors.New("contract: schema must be a JSON object")
		}
		b.WriteString(`,"schema":`)
		if err := json.Compact(&b, schema); err != nil {
			return nil, errors.New("contract: invalid schema JSON: " + err.Error())
		}
	}
	b.WriteString(`,"input":`)
	if input := bytes.TrimSpace(req.Input); len(input) == 0 {
		b.WriteString("null")
	} else if err := json.Compact(&b, input); err != nil {
		return nil, errors.New("contract: invalid input JSON: " + err.Error())
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // marshalling a string cannot fail
	b.Write(enc)
}
