package asl

import (
	"strings"
	"testing"
)

func compileForTest(t *testing.T, tmpl string) (*Template, []string) {
	t.Helper()
	var problems []string
	tp := compileTemplate(MustDecode(tmpl), "Parameters", func(field, msg string) {
		problems = append(problems, field+": "+msg)
	})
	return tp, problems
}

// ASL spec § Payload Template: ".$" fields take a path (from the input
// or $$) or an intrinsic and lose the suffix; other fields are copied;
// nested objects and arrays are templates too.
func TestTemplate_Eval(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"run_id":"r1","n":2,"obj":{"k":[1,2]}}`)
	ctx := &Context{StateName: "review", TaskToken: "tok-1", ExecutionName: "e"}
	cases := []struct {
		name, tmpl, want string
	}{
		{"static copied", `{"QueueUrl":"https://q","n":1,"b":true,"z":null}`, `{"QueueUrl":"https://q","n":1,"b":true,"z":null}`},
		{"path field", `{"id.$":"$.run_id"}`, `{"id":"r1"}`},
		{"root path", `{"all.$":"$"}`, `{"all":{"run_id":"r1","n":2,"obj":{"k":[1,2]}}}`},
		{"object value", `{"o.$":"$.obj"}`, `{"o":{"k":[1,2]}}`},
		{"context path", `{"token.$":"$$.Task.Token","state.$":"$$.State.Name"}`, `{"token":"tok-1","state":"review"}`},
		{"nested object", `{"MessageBody":{"run_id.$":"$.run_id","node":"review","task_token.$":"$$.Task.Token"}}`, `{"MessageBody":{"run_id":"r1","node":"review","task_token":"tok-1"}}`},
		{"objects inside arrays", `{"list":[{"a.$":"$.n"},"lit",[{"b.$":"$.run_id"}]]}`, `{"list":[{"a":2},"lit",[{"b":"r1"}]]}`},
		{"path-looking string without .$ is literal", `{"p":"$.run_id"}`, `{"p":"$.run_id"}`},
		{"intrinsic", `{"next.$":"States.MathAdd($.n, 1)"}`, `{"next":3}`},
		{"key order kept", `{"z":1,"a.$":"$.n","m":2}`, `{"z":1,"a":2,"m":2}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp, problems := compileForTest(t, tc.tmpl)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			got, f := tp.Eval(input, ctx)
			if f != nil {
				t.Fatal(f)
			}
			if EncodeString(got) != tc.want {
				t.Errorf("got %s, want %s", EncodeString(got), tc.want)
			}
		})
	}
}

// A path that selects nothing fails the state with States.Runtime and
// AWS's wording (the spec names States.ParameterPathFailure; AWS raises
// States.Runtime).
func TestTemplate_MissingPathIsRuntime(t *testing.T) {
	t.Parallel()
	tp, _ := compileForTest(t, `{"x":{"id.$":"$.missing"}}`)
	_, f := tp.Eval(MustDecode(`{"a":1}`), &Context{})
	if f == nil || f.Error != ErrRuntime {
		t.Fatalf("failure = %v, want %s", f, ErrRuntime)
	}
	want := `The JSONPath '$.missing' specified for the field 'id.$' could not be found in the input '{"a":1}'`
	if f.Cause != want {
		t.Errorf("cause = %q, want %q", f.Cause, want)
	}
	// $$.Task.Token outside a waitForTaskToken Task.
	tp, _ = compileForTest(t, `{"t.$":"$$.Task.Token"}`)
	if _, f := tp.Eval(MustDecode(`{}`), &Context{}); f == nil || f.Error != ErrRuntime {
		t.Errorf("failure = %v, want %s", f, ErrRuntime)
	}
}

// ASL spec § Payload Template: ".$" fields take a string; paths and
// intrinsics are checked at load, and two fields may not produce one key.
func TestTemplate_LoadTimeProblems(t *testing.T) {
	t.Parallel()
	cases := []struct{ tmpl, want string }{
		{`{"a.$":1}`, `Parameters.a.$: a field ending in ".$" takes a path or an intrinsic function as a string`},
		{`{"a.$":"$..x"}`, `Parameters.a.$: path "$..x"`},
		{`{"a.$":"$$.Execution.RoleArn"}`, `context path "$$.Execution.RoleArn" is not supported`},
		{`{"a.$":"States.UUID()"}`, `function "States.UUID" is not supported`},
		{`{"a":1,"a.$":"$"}`, `Parameters.a.$: produces the key "a" already produced by "a"`},
		{`{"o":{"deep":[{"x.$":5}]}}`, `Parameters.o.deep[0].x.$`},
	}
	for _, tc := range cases {
		_, problems := compileForTest(t, tc.tmpl)
		if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tc.want) {
			t.Errorf("%s: problems %q, want one containing %q", tc.tmpl, problems, tc.want)
		}
	}
	if _, problems := compileForTest(t, `[1]`); len(problems) == 0 {
		t.Error("a non-object template was accepted")
	}
}
