package asl

import (
	"fmt"
	"testing"
)

func parseState(t *testing.T, state string) *State {
	t.Helper()
	def := fmt.Sprintf(`{"StartAt":"s","States":{"s":%s,"n":{"Type":"Succeed"}}}`, state)
	sm, err := Parse([]byte(def))
	if err != nil {
		t.Fatalf("Parse(%s): %v", state, err)
	}
	return sm.States["s"]
}

// ASL spec § Input and Output Processing (InputPath, Parameters,
// ResultSelector, ResultPath, OutputPath), in the order a Task applies
// them, with ResultPath relative to the raw input.
func TestState_InputOutputProcessing(t *testing.T) {
	t.Parallel()
	raw := MustDecode(`{"a":{"b":1},"keep":"k"}`)
	result := MustDecode(`{"Payload":{"v":42},"Meta":"m"}`)
	cases := []struct {
		name, state, effective, output string
	}{
		{"defaults", `{"Type":"Task","Resource":"arn:x","Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{"Payload":{"v":42},"Meta":"m"}`},
		{"InputPath selects", `{"Type":"Task","Resource":"arn:x","InputPath":"$.a","Next":"n"}`,
			`{"b":1}`, `{"Payload":{"v":42},"Meta":"m"}`},
		{"InputPath null gives {}", `{"Type":"Task","Resource":"arn:x","InputPath":null,"Next":"n"}`,
			`{}`, `{"Payload":{"v":42},"Meta":"m"}`},
		{"Parameters after InputPath", `{"Type":"Task","Resource":"arn:x","InputPath":"$.a","Parameters":{"x.$":"$.b"},"Next":"n"}`,
			`{"x":1}`, `{"Payload":{"v":42},"Meta":"m"}`},
		{"ResultPath into raw input (not the InputPath selection)", `{"Type":"Task","Resource":"arn:x","InputPath":"$.a","ResultPath":"$.r","Next":"n"}`,
			`{"b":1}`, `{"a":{"b":1},"keep":"k","r":{"Payload":{"v":42},"Meta":"m"}}`},
		{"ResultPath null discards the result", `{"Type":"Task","Resource":"arn:x","ResultPath":null,"Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{"a":{"b":1},"keep":"k"}`},
		{"ResultPath replaces a field", `{"Type":"Task","Resource":"arn:x","ResultPath":"$.a","Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{"a":{"Payload":{"v":42},"Meta":"m"},"keep":"k"}`},
		{"ResultSelector then ResultPath", `{"Type":"Task","Resource":"arn:x","ResultSelector":{"v.$":"$.Payload.v"},"ResultPath":"$.last","Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{"a":{"b":1},"keep":"k","last":{"v":42}}`},
		{"OutputPath last", `{"Type":"Task","Resource":"arn:x","ResultPath":"$.r","OutputPath":"$.r.Payload","Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{"v":42}`},
		{"OutputPath null gives {}", `{"Type":"Task","Resource":"arn:x","OutputPath":null,"Next":"n"}`,
			`{"a":{"b":1},"keep":"k"}`, `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := parseState(t, tc.state)
			eff, f := st.EffectiveInput(raw, &Context{})
			if f != nil {
				t.Fatal(f)
			}
			if EncodeString(eff) != tc.effective {
				t.Errorf("effective input %s, want %s", EncodeString(eff), tc.effective)
			}
			out, f := st.ApplyResult(raw, result, &Context{})
			if f == nil {
				out, f = st.ApplyOutputPath(out)
			}
			if f != nil {
				t.Fatal(f)
			}
			if EncodeString(out) != tc.output {
				t.Errorf("output %s, want %s", EncodeString(out), tc.output)
			}
		})
	}
}

// ASL spec § Pass State: Result (or, without it, the effective input) is
// the result; ResultPath and OutputPath apply as for a Task.
func TestState_Pass(t *testing.T) {
	t.Parallel()
	raw := MustDecode(`{"x":1,"loops":{"review_fix":1}}`)
	cases := []struct{ state, want string }{
		{`{"Type":"Pass","Next":"n"}`, `{"x":1,"loops":{"review_fix":1}}`},
		{`{"Type":"Pass","Result":{"review_fix":0},"ResultPath":"$.loops","Next":"n"}`, `{"x":1,"loops":{"review_fix":0}}`},
		{`{"Type":"Pass","Parameters":{"review_fix.$":"States.MathAdd($.loops.review_fix, 1)"},"ResultPath":"$.loops","Next":"n"}`, `{"x":1,"loops":{"review_fix":2}}`},
		{`{"Type":"Pass","Result":"r","Next":"n"}`, `"r"`},
		{`{"Type":"Pass","InputPath":"$.loops","Next":"n"}`, `{"review_fix":1}`},
	}
	for _, tc := range cases {
		st := parseState(t, tc.state)
		eff, f := st.EffectiveInput(raw, &Context{})
		if f != nil {
			t.Fatal(f)
		}
		out, f := st.ApplyResult(raw, st.PassResult(eff), &Context{})
		if f == nil {
			out, f = st.ApplyOutputPath(out)
		}
		if f != nil || EncodeString(out) != tc.want {
			t.Errorf("%s: output %s (%v), want %s", tc.state, EncodeString(out), f, tc.want)
		}
	}
}

// ASL spec § Input and Output Processing, with AWS's errors: InputPath,
// OutputPath and ResultSelector paths that select nothing are
// States.Runtime; a ResultPath that cannot apply is
// States.ResultPathMatchFailure.
func TestState_ProcessingFailures(t *testing.T) {
	t.Parallel()
	raw := MustDecode(`{"a":"str"}`)
	st := parseState(t, `{"Type":"Task","Resource":"arn:x","InputPath":"$.nope","Next":"n"}`)
	if _, f := st.EffectiveInput(raw, nil); f == nil || f.Error != ErrRuntime || f.Cause != "Invalid path '$.nope' : No results for path: $['nope']" {
		t.Errorf("InputPath failure = %v", f)
	}
	st = parseState(t, `{"Type":"Task","Resource":"arn:x","ResultPath":"$.a.b","Next":"n"}`)
	if _, f := st.ApplyResult(raw, "r", nil); f == nil || f.Error != ErrResultPathMatchFailure {
		t.Errorf("ResultPath failure = %v", f)
	}
	st = parseState(t, `{"Type":"Task","Resource":"arn:x","OutputPath":"$.zz","Next":"n"}`)
	if _, f := st.ApplyOutputPath(raw); f == nil || f.Error != ErrRuntime {
		t.Errorf("OutputPath failure = %v", f)
	}
	st = parseState(t, `{"Type":"Task","Resource":"arn:x","ResultSelector":{"v.$":"$.nope"},"Next":"n"}`)
	if _, f := st.ApplyResult(raw, MustDecode(`{}`), nil); f == nil || f.Error != ErrRuntime {
		t.Errorf("ResultSelector failure = %v", f)
	}
}

// ASL spec § Catch / § Error Output: the catcher's ResultPath places
// {"Error","Cause"} into the raw input (default "$": replaces it).
func TestCatcher_Output(t *testing.T) {
	t.Parallel()
	raw := MustDecode(`{"run_id":"r"}`)
	fail := &Failure{Error: "States.Timeout", Cause: "late"}
	cases := []struct{ catch, want string }{
		{`{"ErrorEquals":["States.ALL"],"Next":"n"}`, `{"Error":"States.Timeout","Cause":"late"}`},
		{`{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"n"}`, `{"run_id":"r","error":{"Error":"States.Timeout","Cause":"late"}}`},
		{`{"ErrorEquals":["States.ALL"],"ResultPath":null,"Next":"n"}`, `{"run_id":"r"}`},
	}
	for _, tc := range cases {
		st := parseState(t, `{"Type":"Task","Resource":"arn:x","Next":"n","Catch":[`+tc.catch+`]}`)
		got, f := st.Catch[0].Output(raw, fail)
		if f != nil || EncodeString(got) != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.catch, EncodeString(got), f, tc.want)
		}
	}
	st := parseState(t, `{"Type":"Task","Resource":"arn:x","Next":"n","Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.run_id.x","Next":"n"}]}`)
	if _, f := st.Catch[0].Output(raw, fail); f == nil || f.Error != ErrResultPathMatchFailure {
		t.Errorf("catcher ResultPath failure = %v", f)
	}
}
