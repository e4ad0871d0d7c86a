package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// FrontMatter heads <ctx-dir>/<step>.md: who produced the body and its
// checksum (seed 000 § Files are the server's job).
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
func Encode(fm FrontMatter, body []byte) ([]byte, error) {
	fm.SubmittedAt = fm.SubmittedAt.UTC()
	y, err := yaml.MarshalWithOptions(fm, yaml.CustomMarshaler[string](yamlString))
	if err != nil {
		return nil, fmt.Errorf("projection: encode front matter: %w", err)
	}
	// The seed promises a round trip; prove it rather than trust every
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
