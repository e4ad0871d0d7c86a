// Package outputschema compiles a node's output_schema (a JSON Schema,
// given inline in the flow as a JSON-encoded string: worc flow reference §
// agent node) and validates engine reports against it ("the report
// is validated with a maintained JSON Schema library"). It uses
// santhosh-tekuri/jsonschema (drafts 4 to 2020-12, the draft named by
// $schema, else 2020-12). It does not fetch remote references.
package outputschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stratusflow/stratus"
)

// Schema is a compiled output schema.
type Schema struct {
	s *jsonschema.Schema
}

// Compile parses and compiles raw, which must be a JSON object. Errors are
// *stratus.Error EINVALID naming what is wrong.
func Compile(raw []byte) (*Schema, error) {
	var probe map[string]any
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "output_schema", "is not a JSON object: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "output_schema", "is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const url = "stratus:///output_schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "output_schema", "%v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "output_schema", "is not a valid JSON Schema: %v", oneLine(err))
	}
	return &Schema{s: s}, nil
}

// Validate checks a report (JSON) against the schema. The error, when the
// report does not match, is *stratus.Error EUNPROCESSABLE listing every
// violation with its instance location.
func (s *Schema) Validate(report json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(report))
	if err != nil {
		return stratus.Errorf(stratus.EUNPROCESSABLE, "report is not JSON: %v", err)
	}
	if err := s.s.Validate(inst); err != nil {
		return stratus.Errorf(stratus.EUNPROCESSABLE, "report does not match output_schema: %s", oneLine(err))
	}
	return nil
}

// oneLine flattens the library's multi-line error tree.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// noLoader refuses every external reference: a schema is self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not loaded; output_schema must be self-contained", url)
}
