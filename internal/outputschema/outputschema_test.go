package outputschema

import (
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

const plan = `{"type":"object","additionalProperties":false,"required":["steps"],
 "properties":{"steps":{"type":"array","items":{"type":"string"}}}}`

// issue 4 § 4: a report that does not match output_schema is refused with
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
