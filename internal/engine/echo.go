package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Envelope is the v1 request line (seed 003 § 2).
type Envelope struct {
	WorkflowContract json.RawMessage `json:"workflow_contract"`
	ID               string          `json:"id"`
	Kind             string          `json:"kind"`
	MaxSteps         *int            `json:"max_steps,omitempty"`
	Schema           json.RawMessage `json:"schema,omitempty"`
	Input            json.RawMessage `json:"input"`
}

// ReadRequest reads the one request line and returns the call's input. A
// bare input line without the envelope is accepted (seed 003 § 7.1). A
// workflow_contract other than 1 is refused with the error text the
// command_error event carries ("unsupported workflow_contract version N").
func ReadRequest(r io.Reader) (Envelope, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && line == "" {
		return Envelope{}, fmt.Errorf("read request line: %w", err)
	}
	line = strings.TrimSpace(line)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &probe); err != nil {
		// Not an object: a bare non-object input line.
		if !json.Valid([]byte(line)) {
			return Envelope{}, fmt.Errorf("request line is not JSON")
		}
		return Envelope{Input: json.RawMessage(line)}, nil
	}
	v, ok := probe["workflow_contract"]
	if !ok {
		return Envelope{Input: json.RawMessage(line)}, nil
	}
	var env Envelope
	if err := json.Unmarshal([]byte(line), &env); err != nil {
		return Envelope{}, fmt.Errorf("request line: %v", err)
	}
	if strings.TrimSpace(string(v)) != "1" {
		return env, fmt.Errorf("unsupported workflow_contract version %s", strings.TrimSpace(string(v)))
	}
	if env.Input == nil {
		env.Input = json.RawMessage("null")
	}
	return env, nil
}

// Emitter writes contract events, one JSON object per line.
type Emitter struct{ W io.Writer }

func (e Emitter) line(v any) {
	b, _ := json.Marshal(v)
	e.W.Write(append(b, '\n'))
}

// Step emits agent_step.
func (e Emitter) Step(n int) { e.line(map[string]any{"event": "agent_step", "step": n}) }

// Usage emits usage with all five fields (seed 003 § 3).
func (e Emitter) Usage(prompt, completion int64) { e.UsageCost(prompt, completion, nil) }

// UsageCost emits usage with all five fields and, when cost is not nil,
// cost_usd (seed 003 § 3: absent means unknown).
func (e Emitter) UsageCost(prompt, completion int64, cost *float64) {
	u := map[string]any{
		"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
		"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": prompt}
	if cost != nil {
		u["cost_usd"] = *cost
	}
	e.line(map[string]any{"event": "usage", "usage": u})
}

// CommandError emits command_error.
func (e Emitter) CommandError(msg string) {
	e.line(map[string]any{"event": "command_error", "error": msg})
}

// TurnFailed emits turn_failed.
func (e Emitter) TurnFailed(msg string) { e.line(map[string]any{"event": "turn_failed", "error": msg}) }

// Report emits the report line; it must be the last line (seed 003 § 4).
func (e Emitter) Report(v json.RawMessage) {
	e.W.Write([]byte(`{"subrun_report":`))
	e.W.Write(v)
	e.W.Write([]byte("}\n"))
}

// Echo runs the echo engine on stdin/stdout. It always returns nil: every
// handled failure is an event followed by a normal exit (seed 003 § 7.4).
func Echo(stdin io.Reader, stdout io.Writer) error {
	em := Emitter{W: stdout}
	env, err := ReadRequest(stdin)
	if err != nil {
		em.CommandError(err.Error())
		return nil
	}
	em.Step(1)
	em.Usage(7, 3)
	em.Report(env.Input)
	return nil
}
