package asl

import (
	"strings"
	"testing"
)

func evalIntrinsic(t *testing.T, call string, input Value) (Value, *Failure) {
	t.Helper()
	in, err := ParseIntrinsic(call)
	if err != nil {
		t.Fatalf("ParseIntrinsic(%s): %v", call, err)
	}
	return in.Eval(input, &Context{ExecutionName: "exec-1", StateName: "s"})
}

// AWS developer guide § Intrinsic functions, one row per function and
// argument form.
func TestIntrinsic_Eval(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"name":"Arnav","template":"Hello, my name is {}.","n":41,"neg":-3,"f":1.5,"fn":-2.5,
		"escaped":"{\"foo\": \"bar\"}","obj":{"foo":"bar","l":[1,"x"]},"list":[1,2],"b":true,"z":null,"sp":"  ",
		"weird key":{"k":7}}`)
	cases := []struct {
		name, call, want string
	}{
		// States.Format
		{"format literal", `States.Format('Hello, my name is {}.', $.name)`, `"Hello, my name is Arnav."`},
		{"format template from path", `States.Format($.template, $.name)`, `"Hello, my name is Arnav."`},
		{"format no placeholders", `States.Format('plain')`, `"plain"`},
		{"format number bool null", `States.Format('{}-{}-{}-{}', $.n, $.b, $.z, 2.50)`, `"41-true-null-2.50"`},
		{"format array and object like Java", `States.Format('{} {}', $.list, $.obj)`, `"[1, 2] {foo=bar, l=[1, x]}"`},
		{"format escapes", `States.Format('it\'s \{not\} {} \\o/', $.name)`, `"it's {not} Arnav \\o/"`},
		{"format nested", `States.Format('{}', States.MathAdd($.n, 1))`, `"42"`},
		{"format context", `States.Format('{}/{}', $$.Execution.Name, $$.State.Name)`, `"exec-1/s"`},
		{"format bracket path with comma", `States.Format('{}', $['weird key'].k)`, `"7"`},
		// States.MathAdd
		{"mathadd", `States.MathAdd($.n, 1)`, `42`},
		{"mathadd negative", `States.MathAdd($.neg, -1)`, `-4`},
		{"mathadd literals", `States.MathAdd(2, 3)`, `5`},
		{"mathadd rounds half up", `States.MathAdd($.f, 0)`, `2`},
		{"mathadd rounds negative half towards +inf", `States.MathAdd($.fn, 0)`, `-2`},
		{"mathadd big exact", `States.MathAdd(9007199254740993, 1)`, `9007199254740994`},
		{"mathadd spaces", `States.MathAdd( $.n ,1 )`, `42`},
		// States.StringToJson / JsonToString
		{"stringtojson", `States.StringToJson($.escaped)`, `{"foo":"bar"}`},
		{"stringtojson blank is null", `States.StringToJson($.sp)`, `null`},
		{"jsontostring", `States.JsonToString($.obj)`, `"{\"foo\":\"bar\",\"l\":[1,\"x\"]}"`},
		{"jsontostring scalar", `States.JsonToString($.n)`, `"41"`},
		{"roundtrip", `States.StringToJson(States.JsonToString($.obj))`, `{"foo":"bar","l":[1,"x"]}`},
		// States.Array
		{"array empty", `States.Array()`, `[]`},
		{"array mixed", `States.Array($.n, 'a', 1.0, true, false, null, $.list)`, `[41,"a",1.0,true,false,null,[1,2]]`},
		{"array nested", `States.Array(States.Array(1), States.Format('{}', $.name))`, `[[1],"Arnav"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, f := evalIntrinsic(t, tc.call, input)
			if f != nil {
				t.Fatal(f)
			}
			if EncodeString(got) != tc.want {
				t.Errorf("got %s, want %s", EncodeString(got), tc.want)
			}
		})
	}
}

// Arguments a function cannot use fail with States.IntrinsicFailure; a
// path argument that selects nothing with States.Runtime.
func TestIntrinsic_RuntimeFailures(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"s":"x","n":1,"bad":"{nope","t":"{} {}"}`)
	cases := []struct{ call, name, cause string }{
		{`States.MathAdd($.s, 1)`, ErrIntrinsicFailure, `argument 1 is the string "x"; expected a number`},
		{`States.StringToJson($.n)`, ErrIntrinsicFailure, `expected a string`},
		{`States.StringToJson($.bad)`, ErrIntrinsicFailure, `not JSON text`},
		{`States.Format($.t, 1)`, ErrIntrinsicFailure, `2 {} placeholder(s) but 1 value argument(s)`},
		{`States.Format($.n)`, ErrIntrinsicFailure, `expected a string`},
		{`States.MathAdd($.missing, 1)`, ErrRuntime, `$.missing`},
	}
	for _, tc := range cases {
		_, f := evalIntrinsic(t, tc.call, input)
		if f == nil || f.Error != tc.name || !strings.Contains(f.Cause, tc.cause) {
			t.Errorf("%s: failure %v, want %s containing %q", tc.call, f, tc.name, tc.cause)
		}
	}
}

// ASL spec § Intrinsic Functions: argument syntax, arity and the
// reserved characters ' { } \ in string literals.
func TestParseIntrinsic_Rejects(t *testing.T) {
	t.Parallel()
	cases := []struct{ call, want string }{
		{`States.UUID()`, `function "States.UUID" is not supported`},
		{`States.MathAdd(1)`, `takes 2 argument(s), got 1`},
		{`States.MathAdd(1, 2, 3)`, `takes 2 argument(s), got 3`},
		{`States.JsonToString('x')`, `takes a path argument`},
		{`States.StringToJson()`, `takes 1 argument(s), got 0`},
		{`States.Format()`, `at least 1`},
		{`States.Format(1)`, `must be a string`},
		{`States.Format('{} {}', 1)`, `2 {} placeholder(s) but 1 value argument(s)`},
		{`States.Format('a { b')`, `unescaped '{'`},
		{`States.Format('a } b')`, `unescaped '}'`},
		{`States.Format('\n')`, `unsupported escape`},
		{`States.Format('open`, `unterminated string literal`},
		{`States.Array(1`, `missing ')'`},
		{`States.Array(1 2)`, `expected ',' or ')'`},
		{`States.Array(foo)`, `an argument is`},
		{`States.Array(-)`, `not a JSON number`},
		{`States.Array($..x)`, `recursive descent`},
		{`States.Array($$.Nope.X)`, `context path`},
		{`States.Array() extra`, `after the call`},
		{`States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Format('{}', States.Array())))))))))))`, `more than 10 nested`},
	}
	for _, tc := range cases {
		_, err := ParseIntrinsic(tc.call)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseIntrinsic(%s) = %v, want an error containing %q", tc.call, err, tc.want)
		}
	}
}
