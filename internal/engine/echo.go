package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus/internal/jsonstr"
)

// Envelope is the v1 request line (docs/contracts.md § The request line).
type Envelope struct {
	WorkflowContract json.RawMessage `json:"workflow_contract"`
	ID               string          `json:"id"`
	Kind             string          `json:"kind"`
	MaxSteps         *int            `json:"max_steps,omitempty"`
	Schema           json.RawMessage `json:"schema,omitempty"`
	Input            json.RawMessage `json:"input"`
}

// ReadRequest's refusals, whose text is the reference engine's
// command_error (a caller may add to it: errors.Is).
var (
	ErrNotJSON = errors.New("request line is not JSON")
	ErrVersion = errors.New("unsupported workflow_contract version")
)

// ReadRequest reads the one request line and returns the call's input. A
// bare input line without the envelope is accepted
// (docs/contracts.md § The reference engine). A workflow_contract other than
// 1 is refused with the error text the command_error event carries
// ("unsupported workflow_contract version N").
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
			return Envelope{}, ErrNotJSON
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
		return env, fmt.Errorf("%w %s", ErrVersion, strings.TrimSpace(string(v)))
	}
	if env.Input == nil {
		env.Input = json.RawMessage("null")
	}
	return env, nil
}

// Emitter writes contract events, one JSON object per line, in the wire
// shape of the reference engine (openseek's `subrun`, whose own transcript
// tests/cram/subrun.md pins its lines byte for byte;
// docs/contracts.md § Conformance checklist cites it): compact JSON, `event`
// first and then the event's fields in the reference order
// (docs/contracts.md § The event stream's table; usage's five token fields in
// the order prompt_tokens, completion_tokens, total_tokens,
// prompt_cache_hit_tokens, prompt_cache_miss_tokens, then the optional
// cost_usd), and strings escaped as the reference's JSON writer escapes them
// (only `"`, `\` and control characters; `<`, `>`, `&` and U+2028/U+2029 are
// written as they are). Every line is one Write.
type Emitter struct{ W io.Writer }

// member is one key/value of an event line.
type member struct {
	key string
	val any
}

// object is a JSON object written with its members in the order given.
type object []member

// wireOrder ranks the keys of the event lines
// (docs/contracts.md § The event stream) in the reference engine's order;
// line sorts a map's keys by it, and keys it does not list come after,
// alphabetically.
var wireOrder = map[string]int{
	"event": 1, "step": 2, "steps": 3, "usage": 4,
	"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 7,
	"prompt_cache_hit_tokens": 8, "prompt_cache_miss_tokens": 9, "cost_usd": 10,
	"error": 11,
}

// line writes one event line. v is an object, or a map[string]any whose
// keys (and those of the maps it holds) are put in wireOrder.
func (e Emitter) line(v any) {
	b, err := appendValue(nil, v)
	if err != nil {
		return // nothing rather than a line the runner would skip anyway
	}
	e.W.Write(append(b, '\n'))
}

// event writes {"event":name, fields...}.
func (e Emitter) event(name string, fields ...member) {
	e.line(append(object{{"event", name}}, fields...))
}

// Step emits agent_step (docs/contracts.md § The event stream):
// {"event":"agent_step","step":n}.
func (e Emitter) Step(n int) { e.event("agent_step", member{"step", n}) }

// Usage emits usage with all five fields
// (docs/contracts.md § The event stream).
func (e Emitter) Usage(prompt, completion int64) { e.UsageCost(prompt, completion, nil) }

// UsageCost emits usage with all five fields, integral, in the reference
// order, and cost_usd last when cost is a finite number
// (docs/contracts.md § The event stream: absent means unknown, and a present
// cost_usd that is not a finite number would void the whole line, tokens
// included).
func (e Emitter) UsageCost(prompt, completion int64, cost *float64) {
	u := object{
		{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
		{"prompt_cache_hit_tokens", 0}, {"prompt_cache_miss_tokens", prompt},
	}
	if cost != nil && !math.IsNaN(*cost) && !math.IsInf(*cost, 0) {
		u = append(u, member{"cost_usd", *cost})
	}
	e.event("usage", member{"usage", u})
}

// CommandError emits command_error (docs/contracts.md § The event stream):
// {"event":"command_error","error":msg}.
func (e Emitter) CommandError(msg string) { e.event("command_error", member{"error", msg}) }

// TurnFailed emits turn_failed (docs/contracts.md § The event stream):
// {"event":"turn_failed","error":msg}.
func (e Emitter) TurnFailed(msg string) { e.event("turn_failed", member{"error", msg}) }

// Report emits the report line, {"subrun_report":v}; it must be the last
// line (docs/contracts.md § The report line, § Conformance checklist). v is written compact, as the reference engine
// writes the value it parsed: whitespace dropped and strings re-escaped as
// in every other line, while object key order and number literals stay as
// in v (the value is opaque to the runner:
// docs/contracts.md § The report line). v that is not JSON is written as it
// is.
func (e Emitter) Report(v json.RawMessage) {
	b := append(make([]byte, 0, len(v)+len(`{"subrun_report":}`)+1), `{"subrun_report":`...)
	if c, err := appendCompact(b, v); err == nil {
		b = c
	} else {
		b = append(b, v...)
	}
	e.W.Write(append(b, '}', '\n'))
}

// appendValue appends v as compact JSON: an object in its order, a
// map[string]any in wireOrder, strings escaped by jsonstr.Append, a
// json.RawMessage through appendCompact, anything else as encoding/json
// writes it, re-escaped by appendCompact.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case object:
		b = append(b, '{')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(jsonstr.Append(b, m.key), ':')
			var err error
			if b, err = appendValue(b, m.val); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			ri, rj := rank(keys[i]), rank(keys[j])
			if ri != rj {
				return ri < rj
			}
			return keys[i] < keys[j]
		})
		o := make(object, len(keys))
		for i, k := range keys {
			o[i] = member{k, v[k]}
		}
		return appendValue(b, o)
	case string:
		return jsonstr.Append(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case json.RawMessage:
		return appendCompact(b, v)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return appendCompact(b, raw)
}

func rank(key string) int {
	if r, ok := wireOrder[key]; ok {
		return r
	}
	return len(wireOrder) + 1
}

// appendCompact appends the one JSON value in raw, compact: no whitespace,
// strings re-escaped by jsonstr.Append, object keys in raw's order, numbers as
// raw spells them.
func appendCompact(b []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		obj bool
		n   int // tokens written inside: keys and values alike in an object
	}
	var stack []frame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			b = append(b, byte(d))
			continue
		}
		if len(stack) == 0 {
			if values++; values > 1 {
				return nil, fmt.Errorf("more than one JSON value")
			}
		} else {
			top := &stack[len(stack)-1]
			switch {
			case top.obj && top.n%2 == 1:
				b = append(b, ':')
			case top.n > 0:
				b = append(b, ',')
			}
			top.n++
		}
		switch t := tok.(type) {
		case json.Delim:
			b = append(b, byte(t))
			stack = append(stack, frame{obj: t == '{'})
		case string:
			b = jsonstr.Append(b, t)
		case json.Number:
			b = append(b, t...)
		case bool:
			b = strconv.AppendBool(b, t)
		case nil:
			b = append(b, "null"...)
		}
	}
	if values == 0 {
		return nil, fmt.Errorf("no JSON value")
	}
	return b, nil
}

// Echo runs the echo engine on stdin/stdout. It always returns nil: every
// handled failure is an event followed by a normal exit
// (docs/contracts.md § The reference engine).
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
