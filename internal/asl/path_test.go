package asl

import (
	"strings"
	"testing"
	"time"
)

// ASL spec § Paths and § Reference Paths: the subset the compiler emits.
func TestParsePath_Subset(t *testing.T) {
	t.Parallel()
	ok := []string{"$", "$.a", "$.a.b", "$.a['x']", `$.a["x"]`, "$.a[0]", "$.a[10].b", "$['a b']['c.d']", "$.review_fix", "$$", "$$.Task.Token", "$.a-b", "$.ä"}
	for _, s := range ok {
		p, err := ParsePath(s)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", s, err)
			continue
		}
		if p.String() != s {
			t.Errorf("ParsePath(%q).String() = %q", s, p.String())
		}
	}
	bad := map[string]string{
		"":          "must start with $",
		"a.b":       "must start with $",
		"$.":        "empty name",
		"$..a":      "recursive descent",
		"$.*":       "wildcards",
		"$.a[*]":    "inside [ ]",
		"$.a[-1]":   "inside [ ]",
		"$.a[0:2]":  "single non-negative index",
		"$.a[?(@)]": "inside [ ]",
		"$.a['x]":   "unterminated",
		"$.a b":     "unexpected",
		"$a":        "unexpected",
	}
	for s, want := range bad {
		_, err := ParsePath(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePath(%q) error = %v, want it to mention %q", s, err, want)
		}
	}
}

// ASL spec § Paths: a path selects one node of the input or of the
// context object ($$, § Context Object).
func TestPathGet_EachOperation(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"a":{"b":"v","x y":1,"n":null,"arr":[10,{"c":"deep"}]},"s":"str"}`)
	ctx := &Context{
		ExecutionID: "arn:aws:states:local:0:execution:sm:e1", ExecutionName: "e1",
		ExecutionInput: MustDecode(`{"run_id":"r1"}`), StateName: "review",
		StateEnteredTime: time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC),
		StateMachineID:   "arn:aws:states:local:0:stateMachine:sm", TaskToken: "tok",
	}
	cases := []struct {
		path  string
		want  string // JSON; "" means not found
		found bool
	}{
		{"$", EncodeString(input), true},
		{"$.a.b", `"v"`, true},
		{"$.a['b']", `"v"`, true},
		{`$.a["x y"]`, `1`, true},
		{"$.a.n", `null`, true},
		{"$.a.arr[0]", `10`, true},
		{"$.a.arr[1].c", `"deep"`, true},
		{"$.a.arr[2]", ``, false},
		{"$.a.missing", ``, false},
		{"$.s.length", ``, false},
		{"$.s[0]", ``, false},
		{"$.a[0]", ``, false},
		{"$$.Execution.Id", `"arn:aws:states:local:0:execution:sm:e1"`, true},
		{"$$.Execution.Input.run_id", `"r1"`, true},
		{"$$.Execution.Name", `"e1"`, true},
		{"$$.State.Name", `"review"`, true},
		{"$$.State.EnteredTime", `"2024-01-02T03:04:05.006Z"`, true},
		{"$$.State.RetryCount", `0`, true},
		{"$$.StateMachine.Id", `"arn:aws:states:local:0:stateMachine:sm"`, true},
		{"$$.Task.Token", `"tok"`, true},
	}
	for _, tc := range cases {
		p, err := ParsePath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, found := p.Get(input, ctx)
		if found != tc.found || (found && EncodeString(got) != tc.want) {
			t.Errorf("Get(%s) = %s, %v; want %s, %v", tc.path, EncodeString(got), found, tc.want, tc.found)
		}
	}
	// No task token outside a waitForTaskToken Task: $$.Task is absent.
	noTask := &Context{StateName: "x"}
	if _, found := mustPath(t, "$$.Task.Token").Get(input, noTask); found {
		t.Error("$$.Task.Token found without a token")
	}
}

func mustPath(t *testing.T, s string) *Path {
	t.Helper()
	p, err := ParsePath(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ASL spec § ResultPath: the result goes at the path, intermediate
// objects are created, "$" replaces the input; otherwise
// States.ResultPathMatchFailure.
func TestPathSet_ResultPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, input, path, value, want string // want "" means failure
	}{
		{"root replaces", `{"a":1}`, "$", `{"r":2}`, `{"r":2}`},
		{"new key appended", `{"a":1}`, "$.b", `2`, `{"a":1,"b":2}`},
		{"existing key replaced in place", `{"a":1,"b":0}`, "$.a", `9`, `{"a":9,"b":0}`},
		{"intermediate objects created", `{"a":1}`, "$.x.y.z", `true`, `{"a":1,"x":{"y":{"z":true}}}`},
		{"into existing object", `{"x":{"k":1}}`, "$.x.y", `2`, `{"x":{"k":1,"y":2}}`},
		{"bracket name", `{}`, "$['a.b']", `1`, `{"a.b":1}`},
		{"array element replaced", `{"l":[1,2]}`, "$.l[1]", `"x"`, `{"l":[1,"x"]}`},
		{"array out of range", `{"l":[1]}`, "$.l[1]", `0`, ``},
		{"index into object", `{"l":{}}`, "$.l[0]", `0`, ``},
		{"through a scalar", `{"a":"s"}`, "$.a.b", `1`, ``},
		{"scalar input", `"s"`, "$.a", `1`, ``},
		{"array input, key", `[1]`, "$.a", `1`, ``},
		{"null intermediate", `{"a":null}`, "$.a.b", `1`, ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := MustDecode(tc.input)
			before := EncodeString(in)
			got, ok := mustPath(t, tc.path).Set(in, MustDecode(tc.value))
			if tc.want == "" {
				if ok {
					t.Fatalf("Set succeeded with %s, want failure", EncodeString(got))
				}
				return
			}
			if !ok || EncodeString(got) != tc.want {
				t.Fatalf("Set = %s, %v; want %s", EncodeString(got), ok, tc.want)
			}
			if EncodeString(in) != before {
				t.Errorf("Set modified its input: %s", EncodeString(in))
			}
		})
	}
}
