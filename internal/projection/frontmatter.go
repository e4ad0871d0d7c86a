package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// FrontMatter heads <ctx-dir>/<step>.md: who produced the body and its
// checksum (docs/contracts.md § Files are the server's job).
type FrontMatter struct {
	TaskID      string    `yaml:"task_id"`      // the run's task id ({task_id})
	Step        string    `yaml:"step"`         // node id; the file is <step>.md
	StepRef     string    `yaml:"step_ref"`     // "<node>#<visit>", e.g. "review#2"
	Attempt     int       `yaml:"attempt"`      // 1-based attempt number
	Agent       string    `yaml:"agent"`        // the node whose role the worker played
	Format      string    `yaml:"format"`       // submit_format as declared ("" = default)
	SHA256      string    `yaml:"sha256"`       // lowercase hex SHA-256 of the body
	Bytes       int       `yaml:"bytes"`        // body length in bytes
	SubmittedAt time.Time `yaml:"submitted_at"` // RFC 3339 (nanoseconds when present), UTC
}

// Checksum returns the lowercase hex SHA-256 of body and its length in
// bytes, as FrontMatter.SHA256 and FrontMatter.Bytes hold them.
func Checksum(body []byte) (sha string, n int) {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), len(body)
}

const delim = "---\n"

// Encode returns "---\n" + fm as YAML + "---\n" + body, body verbatim.
// SubmittedAt is written in UTC. Strings that plain YAML would not read back
// identically (tabs, line breaks, "? x", ".inf", ...) are written
// double-quoted. Errors: *stratus.Error EINVALID (Field "front_matter")
// when a field cannot be represented — a string that is not valid UTF-8.
//
// Front matter whose strings are all of the common shapes (fastScalar) is
// written directly, byte for byte what the YAML library writes for it
// (FuzzEncode_FastPathIsTheLibrarysBytes holds the two equal), so a
// submit does not pay a YAML marshal and read-back per field
// (README.md § Performance: they were a quarter of submit's CPU); anything
// else takes the library and the read-back below.
func Encode(fm FrontMatter, body []byte) ([]byte, error) {
	fm.SubmittedAt = fm.SubmittedAt.UTC()
	if out, ok := encodeFast(fm, body); ok {
		return out, nil
	}
	return encodeSlow(fm, body)
}

// encodeSlow is Encode through the YAML library, its output read back.
func encodeSlow(fm FrontMatter, body []byte) ([]byte, error) {
	y, err := yaml.MarshalWithOptions(fm, yaml.CustomMarshaler[string](yamlString))
	if err != nil {
		return nil, fmt.Errorf("projection: encode front matter: %w", err)
	}
	// docs/contracts.md § Files are the server's job promises a round trip
	// (the body front-matter wrapped, round-trippable); prove it rather than trust every
	// corner of the YAML library.
	var back FrontMatter
	if err := yaml.Unmarshal(y, &back); err != nil || !sameFrontMatter(back, fm) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "front_matter",
			"front matter %+v cannot be written as YAML that reads back identically; want valid UTF-8 strings", fm)
	}
	out := make([]byte, 0, len(delim)*2+len(y)+len(body))
	out = append(out, delim...)
	out = append(out, y...)
	out = append(out, delim...)
	return append(out, body...), nil
}

// Decode splits a document Encode wrote into its front matter and body
// (the bytes after the closing "---\n", verbatim: a body may be empty,
// start with "---", hold "---" lines or lack a final newline — the YAML
// Encode writes never holds a line that is exactly "---"). Errors:
// *stratus.Error EINVALID (Field "front_matter") when doc does not start
// with "---\n", has no closing "---" line, or its front matter is not YAML
// of this shape.
func Decode(doc []byte) (FrontMatter, []byte, error) {
	var fm FrontMatter
	bad := func(format string, args ...any) (FrontMatter, []byte, error) {
		return FrontMatter{}, nil, stratus.FieldErrorf(stratus.EINVALID, "front_matter", format, args...)
	}
	if !bytes.HasPrefix(doc, []byte(delim)) {
		return bad("document does not start with a %q line; want front matter written by projection.Encode", "---")
	}
	rest := doc[len(delim):]
	var y, body []byte
	if bytes.HasPrefix(rest, []byte(delim)) {
		y, body = nil, rest[len(delim):]
	} else if i := bytes.Index(rest, []byte("\n"+delim)); i >= 0 {
		y, body = rest[:i+1], rest[i+1+len(delim):]
	} else {
		return bad("front matter has no closing %q line", "---")
	}
	if err := yamlast.Unmarshal(y, &fm); err != nil {
		return bad("front matter is not valid YAML: %v", err)
	}
	return fm, body, nil
}

// encodeFast is Encode for front matter whose every string fastScalar
// writes; ok is false (and nothing is returned) for any other. fm's
// SubmittedAt is in UTC already.
func encodeFast(fm FrontMatter, body []byte) (out []byte, ok bool) {
	out = make([]byte, 0, 256+len(body))
	out = append(out, delim...)
	for _, f := range [...]struct {
		key string
		s   string
		n   int
		num bool
	}{
		{"task_id", fm.TaskID, 0, false}, {"step", fm.Step, 0, false}, {"step_ref", fm.StepRef, 0, false},
		{"attempt", "", fm.Attempt, true}, {"agent", fm.Agent, 0, false}, {"format", fm.Format, 0, false},
		{"sha256", fm.SHA256, 0, false}, {"bytes", "", fm.Bytes, true},
	} {
		out = append(out, f.key...)
		out = append(out, ": "...)
		if f.num {
			out = strconv.AppendInt(out, int64(f.n), 10)
		} else if out, ok = fastScalar(out, f.s); !ok {
			return nil, false
		}
		out = append(out, '\n')
	}
	out = append(out, "submitted_at: "...)
	out = fm.SubmittedAt.AppendFormat(out, time.RFC3339Nano)
	out = append(out, '\n')
	out = append(out, delim...)
	return append(out, body...), true
}

// fastScalar appends s as the YAML library writes it, for the shapes a
// front matter's strings take; ok is false for any other string:
//
//   - "" → `""`;
//   - a name: a letter or "_", then letters, digits, "_", "-" or "." (a
//     task id, node id, agent, format), not a word YAML reads as a bool
//     or null → plain;
//   - a name, "#", digits (a step ref "review#2") → double-quoted;
//   - lowercase hex holding a letter other than "e", not starting "0b" (a
//     SHA-256: never a number in any YAML schema) → plain.
func fastScalar(out []byte, s string) ([]byte, bool) {
	switch {
	case s == "":
		return append(out, `""`...), true
	case isName(s):
		return append(out, s...), true
	case isStepRef(s):
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"'), true
	case isPlainHex(s):
		return append(out, s...), true
	}
	return out, false
}

// yamlWords are the words some YAML schema reads as a bool or null (YAML
// 1.1 and 1.2), compared in lower case: a name equal to one is quoted by
// the library, so fastScalar leaves it to the slow path.
var yamlWords = map[string]bool{"y": true, "yes": true, "n": true, "no": true, "true": true, "false": true, "on": true, "off": true, "null": true}

func isName(s string) bool {
	if s == "" || !(s[0] == '_' || 'a' <= s[0]|0x20 && s[0]|0x20 <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z') {
			return false
		}
	}
	return len(s) > 5 || !yamlWords[strings.ToLower(s)]
}

func isStepRef(s string) bool {
	i := strings.LastIndexByte(s, '#')
	if i <= 0 || i == len(s)-1 || !isName(s[:i]) {
		return false
	}
	for _, c := range []byte(s[i+1:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isPlainHex(s string) bool {
	letter := false
	for _, c := range []byte(s) {
		switch {
		case '0' <= c && c <= '9', c == 'e':
		case 'a' <= c && c <= 'f':
			letter = true
		default:
			return false
		}
	}
	return letter && !strings.HasPrefix(s, "0b")
}

// yamlString keeps goccy's plain or quoted style when it reads back as
// the same one-line string, and writes a double-quoted scalar otherwise: a
// JSON string is a valid YAML double-quoted scalar with the same escapes.
func yamlString(s string) ([]byte, error) {
	if b, err := yaml.Marshal(s); err == nil && bytes.Count(b, []byte("\n")) == 1 {
		var back string
		if yaml.Unmarshal(b, &back) == nil && back == s {
			return bytes.TrimSuffix(b, []byte("\n")), nil
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func sameFrontMatter(a, b FrontMatter) bool {
	eq := a.SubmittedAt.Equal(b.SubmittedAt)
	a.SubmittedAt, b.SubmittedAt = time.Time{}, time.Time{}
	return eq && a == b
}
