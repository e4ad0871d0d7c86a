package fold

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/jsonstr"
)

// submit_format values (docs/contracts.md § The fold and submit_format). Any
// other value, the empty string included, folds like FormatDefault.
const (
	FormatDefault = ""     // lenient: JSON containers fold structured
	FormatJSON    = "json" // strict, final body only: any JSON value or 422
	FormatText    = "text" // opt-out: everything folds as its own string
)

// Role says which submitted string is being folded: the final body or a
// staged part. It matters only under FormatJSON, which is body-only.
type Role int

const (
	RoleBody Role = iota // the final body (POST /v1/worker/submit)
	RolePart             // a staged named part (POST /v1/worker/artifact)
)

func (r Role) String() string {
	switch r {
	case RoleBody:
		return "body"
	case RolePart:
		return "part"
	}
	return "Role(?)"
}

// echoMax caps how much of a refused body the 422 message echoes, in bytes.
const echoMax = 200

// KnownFormat reports whether s is a submit_format value with its own
// meaning ("", "json", "text"). For any other value Value folds as the
// default; docs/contracts.md § The fold and submit_format asks the caller
// to log a warning, so that a typo degrades visibly.
func KnownFormat(s string) bool {
	return s == FormatDefault || s == FormatJSON || s == FormatText
}

// Value folds one submitted string — the final body (RoleBody) or a staged
// part (RolePart) — under submit_format format, and returns the folded
// value as JSON: either a JSON string holding raw, or the compacted bytes
// of the JSON value raw holds (exact digits, key order and duplicates as
// submitted).
//
//   - default (and any unknown format, and parts under "json"): raw folds
//     structured only when, ASCII white space aside, it is a JSON object or
//     array, or one whole fenced block (``` or ~~~ + optional info string …
//     a closing fence at least as long as the opening one, of the same
//     character: CommonMark § Fenced code blocks) whose content is one;
//     otherwise it stays the string.
//   - "json", RoleBody: raw (or the content of one whole fenced block) must
//     be a JSON value of any kind, scalars included; otherwise the error is
//     a *stratus.Error EUNPROCESSABLE (Field "body") whose message names
//     agent and echoes the first 200 bytes of raw.
//   - "text": raw stays the string, even when it is JSON or fenced.
//
// JSON text must be valid UTF-8; a raw that is not cannot fold structured
// (and, as a string, has its invalid bytes replaced by U+FFFD, since a JSON
// string cannot hold them).
func Value(agent string, raw []byte, format string, role Role) (json.RawMessage, error) {
	return value(agent, raw, format, role, true)
}

// value is Value; without str, a raw that folds as a string is nil rather
// than written out as a JSON string (Object).
func value(agent string, raw []byte, format string, role Role, str bool) (json.RawMessage, error) {
	asString := func() json.RawMessage {
		if !str {
			return nil
		}
		return jsonString(raw)
	}
	switch {
	case format == FormatText:
		return asString(), nil
	case format == FormatJSON && role == RoleBody:
		if v, ok := parse(raw, false); ok {
			return v, nil
		}
		if inner, ok := unfence(raw); ok {
			if v, ok := parse(inner, false); ok {
				return v, nil
			}
		}
		return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "body",
			"agent %q declares submit_format \"json\" but its final body (%d bytes) is not a JSON value; it starts with %q",
			agent, len(raw), echo(raw))
	}
	if v, ok := parse(raw, true); ok {
		return v, nil
	}
	if inner, ok := unfence(raw); ok {
		if v, ok := parse(inner, true); ok {
			return v, nil
		}
	}
	return asString(), nil
}

// parse returns the compacted JSON value b holds (ASCII white space around
// it ignored); with containersOnly, only an object or array counts.
func parse(b []byte, containersOnly bool) (json.RawMessage, bool) {
	b = trimSpace(b)
	if len(b) == 0 || !utf8.Valid(b) || !json.Valid(b) {
		return nil, false
	}
	if containersOnly && b[0] != '{' && b[0] != '[' {
		return nil, false
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// jsonString encodes b as a JSON string without HTML escaping, so the
// folded string reads as submitted, byte for byte what encoding/json
// writes (jsonstr.AppendEncodingJSON).
func jsonString(b []byte) json.RawMessage {
	return jsonstr.AppendEncodingJSON(make([]byte, 0, len(b)+len(b)/16+2), string(b))
}

// echo returns at most echoMax bytes of b, cut on a rune boundary.
func echo(b []byte) string {
	if len(b) <= echoMax {
		return string(b)
	}
	cut := echoMax
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// trimSpace trims ASCII white space only (the cases README decision):
// bytes.TrimSpace would also eat Unicode spaces such as U+0085.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// unfence returns the content of b when b, ASCII white space aside, is
// exactly one fenced code block (CommonMark § Fenced code blocks): an
// opening line of n ≥ 3 backticks or n ≥ 3 tildes and an optional info
// string (without backticks after backticks), then content lines, then a
// closing line of at least n of the same character. A line that would
// close the block earlier makes the body more than one block; a line of
// fewer than n fence characters, or of the other one, is content.
func unfence(b []byte) ([]byte, bool) {
	b = trimSpace(b)
	if len(b) == 0 || (b[0] != '`' && b[0] != '~') {
		return nil, false
	}
	c := b[0]
	n := 0
	for n < len(b) && b[n] == c {
		n++
	}
	if n < 3 {
		return nil, false
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || (c == '`' && bytes.IndexByte(b[n:nl], '`') >= 0) {
		return nil, false
	}
	rest := b[nl+1:] // content lines, then the closing fence (no white space after it)
	last := bytes.LastIndexByte(rest, '\n')
	closing, content := rest[last+1:], rest[:last+1]
	if !closes(closing, c, n) {
		return nil, false
	}
	for line := range bytes.Lines(content) {
		if closes(line, c, n) {
			return nil, false
		}
	}
	return content, true
}

// closes reports whether line closes a block opened by n fence characters
// c (CommonMark § Fenced code blocks): up to three spaces of indentation,
// at least n of c, then nothing but spaces and tabs (and the line ending).
func closes(line []byte, c byte, n int) bool {
	for i := 0; i < 3 && len(line) > 0 && line[0] == ' '; i++ {
		line = line[1:]
	}
	run := 0
	for run < len(line) && line[run] == c {
		run++
	}
	return run >= n && len(bytes.TrimRight(line[run:], " \t\r\n")) == 0
}
