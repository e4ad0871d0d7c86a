package outputschema

import (
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

const plan = `{"type":"object","additionalProperties":false,"required":["steps"],
 "properties":{"steps":{"type":"array","items":{"type":"string"}}}}`

// A report that does not match output_schema is refused with
// the validation errors; one that matches passes.
func TestValidate_ReportAgainstOutputSchema(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"steps":["a","b"]}`)); err != nil {
		t.Errorf("matching report: %v", err)
	}
	for _, bad := range []string{`{"steps":"a"}`, `{"steps":[],"extra":1}`, `{}`, `"text"`} {
		err := s.Validate([]byte(bad))
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), "output_schema") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func TestCompile_RejectsBadSchemas(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`not json`, `[1]`, `{"type":"nosuch"}`, `{"$ref":"http://example.com/s.json"}`} {
		if _, err := Compile([]byte(bad)); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// The jsonschema fork (third_party/jsonschema) compiles the
// metaschemas on first use instead of at init; a schema the metaschema
// refuses is still refused, from the first compile on, by every
// goroutine compiling at once.
func TestCompile_MetaschemaRefusesAnInvalidSchemaFromTheFirstCompile(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			_, err := Compile([]byte(`{"type":5}`))
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "is not a valid JSON Schema") {
			t.Errorf(`{"type":5}: err = %v`, err)
		}
	}
	if _, err := Compile([]byte(plan)); err != nil {
		t.Errorf("a valid schema after: %v", err)
	}
}
