package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
)

// usageFields are the five usage fields that must all be present and
// integral (docs/contracts.md § The event stream).
var usageFields = [...]string{
	"prompt_tokens",
	"completion_tokens",
	"total_tokens",
	"prompt_cache_hit_tokens",
	"prompt_cache_miss_tokens",
}

// observed accumulates what the stdout stream said
// (docs/contracts.md § The event stream, § The report line).
type observed struct {
	steps            int
	promptTokens     int64
	completionTokens int64
	cost             float64
	costKnown        bool

	hasReport bool
	report    json.RawMessage

	hasFailure bool
	failure    string

	maxSteps bool
	yield    *Yield
}

func (o *observed) progress() Progress {
	p := Progress{Steps: o.steps, PromptTokens: o.promptTokens, CompletionTokens: o.completionTokens}
	if o.costKnown {
		c := o.cost
		p.CostUSD = &c
	}
	return p
}

// apply classifies one stdout line and reports whether the accounting
// (steps, tokens, cost) changed. Lines that are not a JSON object, unknown
// events and invalid known events are ignored. One pass over the line
// (scanObject) validates it and finds the members
// docs/contracts.md § The event stream reads.
func (o *observed) apply(line []byte) (accounting bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	var m members
	ok := scanObject(line, func(key, value []byte) {
		switch string(key) {
		case "event":
			m.event = value
		case "subrun_report":
			m.subrunReport = value
		case "step":
			m.step = value
		case "usage":
			m.usage = value
		case "to_sequence":
			m.toSequence = value
		case "answer":
			m.answer = value
		case "error":
			m.error = value
		case "reason":
			m.reason = value
		}
	})
	if !ok {
		return false
	}
	if m.subrunReport != nil { // docs/contracts.md § The report line: the last report wins
		// The line's buffer is reused for the next line: the report keeps a copy.
		o.hasReport, o.report = true, append(json.RawMessage(nil), m.subrunReport...)
		return false
	}
	tag := eventTag(m.event)
	switch string(tag) { // compared in place: no copy
	case "agent_step":
		step, ok := integral(m.step)
		if !ok {
			return false
		}
		if step > int64(o.steps) {
			o.steps = clampInt(step)
		}
		return true
	case "usage":
		return o.applyUsage(m.usage)
	case "max_steps_exhausted":
		o.maxSteps = true
	case "context_yield":
		seq, ok1 := integral(m.toSequence)
		answer, ok2 := jsonString(m.answer)
		if ok1 && ok2 {
			o.yield = &Yield{ToSequence: seq, Answer: answer}
		}
	case "turn_failed", "agent_setup_failed", "command_error":
		o.fail(string(tag), m.error)
	case "agent_aborted":
		o.fail("agent_aborted", m.reason)
	}
	return false
}

// eventTag is the event member's string, nil when it is absent or not a
// string. A tag written without escapes (every known one) is a slice of
// the line, read in place.
func eventTag(raw []byte) []byte {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	s, _ := jsonString(raw)
	return []byte(s)
}

func (o *observed) fail(tag string, raw json.RawMessage) {
	reason, ok := jsonString(raw)
	if !ok || o.hasFailure {
		return
	}
	if reason == "" {
		reason = tag + " (no reason given)"
	}
	o.hasFailure, o.failure = true, reason
}

// applyUsage charges one usage object, or nothing when it is invalid in any
// way (docs/contracts.md § The event stream: ignored WHOLE, never partially
// charged).
func (o *observed) applyUsage(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var u usageMembers
	scanObject(raw, func(key, value []byte) { // raw is valid: scanned with its line
		switch string(key) {
		case "prompt_tokens":
			u.fields[0] = value
		case "completion_tokens":
			u.fields[1] = value
		case "total_tokens":
			u.fields[2] = value
		case "prompt_cache_hit_tokens":
			u.fields[3] = value
		case "prompt_cache_miss_tokens":
			u.fields[4] = value
		case "cost_usd":
			u.cost = value
		}
	})
	var vals [len(usageFields)]int64
	for i := range usageFields {
		v, ok := integral(u.fields[i])
		if !ok || v < 0 {
			// A token count is a count: a negative one voids the line
			// like any other invalid field.
			return false
		}
		vals[i] = v
	}
	cost, hasCost := 0.0, false
	if u.cost != nil {
		v, ok := nonNegativeFinite(u.cost)
		if !ok {
			return false // a present but invalid cost voids the whole line
		}
		cost, hasCost = v, true
	}
	if o.promptTokens > math.MaxInt64-vals[0] || o.completionTokens > math.MaxInt64-vals[1] {
		// The totals would wrap around: void the line rather than charge
		// part of it or a wrong sum.
		return false
	}
	o.promptTokens += vals[0]
	o.completionTokens += vals[1]
	if hasCost {
		o.cost += cost
		o.costKnown = true
	}
	return true
}

// nonZeroMantissa reports whether a JSON number's digits before its
// exponent include a non-zero digit ("-0.0e5" has none, "-1e-400" has).
func nonZeroMantissa(raw []byte) bool {
	for _, c := range raw {
		if c == 'e' || c == 'E' {
			return false
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

func clampInt(v int64) int {
	if v > math.MaxInt {
		return math.MaxInt
	}
	return int(v)
}

// jsonString decodes raw when it is a JSON string (not null, not a number).
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNumber reports whether raw starts like a JSON number.
func isNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// nonNegativeFinite decodes raw when it is a JSON number that is finite as a
// float64 and not negative.
func nonNegativeFinite(raw json.RawMessage) (float64, bool) {
	raw = bytes.TrimSpace(raw)
	if !isNumber(raw) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v < 0 || (raw[0] == '-' && nonZeroMantissa(raw)) {
		// A negative number, even one that underflows to -0, is not a cost.
		return 0, false
	}
	return v + 0, true // +0 turns a literal -0 into 0
}

// integral decodes raw when it is a JSON number whose value is exactly a
// whole integer representable as int64 (docs/contracts.md § The event stream:
// 2.0 and 1e2 are integral, 1.5 is not). The check is exact, without float
// rounding.
func integral(raw json.RawMessage) (int64, bool) {
	if n := len(raw); n > 0 && n <= 18 && (raw[0] != '0' || n == 1) {
		// The common case, plain digits: read in place, no copy.
		var v int64
		for _, c := range raw {
			if !isDigit(c) {
				goto general
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
general:
	s := string(bytes.TrimSpace(raw))
	if !isNumber([]byte(s)) {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 {
		return 0, false
	}
	intPart, rest := s[:i], s[i:]
	frac := ""
	if rest != "" && rest[0] == '.' {
		j := 1
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		if j == 1 {
			return 0, false
		}
		frac, rest = rest[1:j], rest[j:]
	}
	var exp int64
	if rest != "" && (rest[0] == 'e' || rest[0] == 'E') {
		r := rest[1:]
		expNeg := false
		if r != "" && (r[0] == '+' || r[0] == '-') {
			expNeg, r = r[0] == '-', r[1:]
		}
		if r == "" {
			return 0, false
		}
		for k := 0; k < len(r); k++ {
			if !isDigit(r[k]) {
				return 0, false
			}
			if exp < 1<<50 { // saturate: such exponents are far out of range anyway
				exp = exp*10 + int64(r[k]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
		rest = ""
	}
	if rest != "" {
		return 0, false
	}
	// value = digits × 10^e, with digits stripped of leading and trailing zeros.
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true
	}
	e := exp - int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	e += int64(len(digits) - len(trimmed))
	digits = trimmed
	if e < 0 || int64(len(digits))+e > 19 {
		return 0, false // a fraction remains, or too large for int64
	}
	u, err := strconv.ParseUint(digits+strings.Repeat("0", int(e)), 10, 64)
	if err != nil {
		return 0, false
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	case neg && u <= 1<<63:
		return int64(-u), true // two's complement: -(1<<63) maps to MinInt64
	}
	return 0, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// readLines reads r line by line without a token limit
// (docs/contracts.md § The event stream): each complete line, and a final
// line without newline, is passed to handle without its '\n'. A line longer
// than max bytes is skipped, its size (bytes, without the newline) passed to
// dropped when not nil. It returns nil at EOF and the read error otherwise.
// handle must not retain the slice.
func readLines(r io.Reader, max int, handle func([]byte), dropped func(size int64)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	over := false
	var size int64 // of the current line
	for {
		chunk, err := br.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // drop the '\n'
		}
		size += int64(n)
		if !over {
			if len(line)+n > max {
				over, line = true, line[:0]
			} else {
				line = append(line, chunk[:n]...)
			}
		}
		switch {
		case err == nil:
			if !over {
				handle(line)
			} else if dropped != nil {
				dropped(size)
			}
			size = 0
			if cap(line) > 1<<20 {
				line = nil // do not pin a huge buffer for the rest of the run
			}
			line, over = line[:0], false
		case errors.Is(err, bufio.ErrBufferFull):
			// the line continues
		case errors.Is(err, io.EOF):
			if !over && len(line) > 0 {
				handle(line)
			} else if over && dropped != nil {
				dropped(size)
			}
			return nil
		default:
			return err
		}
	}
}
