package asl

import (
	"strings"
	"testing"
)

// compileRule compiles one top-level rule (Next added) through the checker.
func compileRule(t *testing.T, rule string) *ChoiceRule {
	t.Helper()
	c := &checker{}
	obj := MustDecode(rule).(*Object).With("Next", "n")
	r := c.rule("choice", "Choices[0]", obj, true)
	if len(c.problems) > 0 {
		t.Fatalf("rule %s: %v", rule, c.problems)
	}
	return r
}

// ASL spec § Choice Rules, one row per operator and outcome. AWS: a value
// of the wrong type makes a comparison false.
func TestChoiceRule_Operators(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"s":"beta","s2":"beta","s3":"alpha","n":10,"n2":10.0,"n3":3,"f":2.5,"b":true,"b2":false,
		"z":null,"o":{},"l":[],"file":"log-2024.txt","star":"a*b","emoji":"😀","bmp":"\uffff","outcome":"accept"}`)
	cases := []struct {
		rule string
		want bool
	}{
		// String comparisons.
		{`{"Variable":"$.s","StringEquals":"beta"}`, true},
		{`{"Variable":"$.s","StringEquals":"Beta"}`, false},
		{`{"Variable":"$.n","StringEquals":"10"}`, false}, // mistyped
		{`{"Variable":"$.s","StringLessThan":"gamma"}`, true},
		{`{"Variable":"$.s","StringLessThan":"alpha"}`, false},
		{`{"Variable":"$.s","StringGreaterThan":"alpha"}`, true},
		{`{"Variable":"$.s","StringLessThanEquals":"beta"}`, true},
		{`{"Variable":"$.s","StringGreaterThanEquals":"beta"}`, true},
		{`{"Variable":"$.s","StringGreaterThanEquals":"c"}`, false},
		{`{"Variable":"$.s","StringEqualsPath":"$.s2"}`, true},
		{`{"Variable":"$.s","StringEqualsPath":"$.s3"}`, false},
		{`{"Variable":"$.s","StringEqualsPath":"$.n"}`, false}, // operand mistyped
		{`{"Variable":"$.s","StringGreaterThanPath":"$.s3"}`, true},
		{`{"Variable":"$.s3","StringLessThanPath":"$.s"}`, true},
		{`{"Variable":"$.s","StringLessThanEqualsPath":"$.s2"}`, true},
		{`{"Variable":"$.s","StringGreaterThanEqualsPath":"$.s2"}`, true},
		// Strings order by UTF-16 code units (Java), not bytes.
		{`{"Variable":"$.emoji","StringLessThanPath":"$.bmp"}`, true},
		// StringMatches: * is any run, \* a literal star.
		{`{"Variable":"$.file","StringMatches":"log-*.txt"}`, true},
		{`{"Variable":"$.file","StringMatches":"*"}`, true},
		{`{"Variable":"$.file","StringMatches":"log-*.csv"}`, false},
		{`{"Variable":"$.file","StringMatches":"*2024*"}`, true},
		{`{"Variable":"$.file","StringMatches":"log-?024.txt"}`, false}, // ? is literal
		{`{"Variable":"$.star","StringMatches":"a\\*b"}`, true},
		{`{"Variable":"$.file","StringMatches":"a\\*b"}`, false},
		{`{"Variable":"$.n","StringMatches":"*"}`, false},
		// Numeric comparisons, exact.
		{`{"Variable":"$.n","NumericEquals":10}`, true},
		{`{"Variable":"$.n","NumericEquals":1e1}`, true},
		{`{"Variable":"$.n2","NumericEquals":10}`, true},
		{`{"Variable":"$.s","NumericEquals":10}`, false}, // mistyped
		{`{"Variable":"$.n","NumericLessThan":11}`, true},
		{`{"Variable":"$.n","NumericLessThan":10}`, false},
		{`{"Variable":"$.f","NumericGreaterThan":2.4999}`, true},
		{`{"Variable":"$.n","NumericLessThanEquals":10}`, true},
		{`{"Variable":"$.n","NumericGreaterThanEquals":10}`, true},
		{`{"Variable":"$.n3","NumericGreaterThanEquals":10}`, false},
		{`{"Variable":"$.n","NumericEqualsPath":"$.n2"}`, true},
		{`{"Variable":"$.n","NumericGreaterThanPath":"$.n3"}`, true},
		{`{"Variable":"$.n3","NumericLessThanPath":"$.n"}`, true},
		{`{"Variable":"$.n","NumericLessThanEqualsPath":"$.n2"}`, true},
		{`{"Variable":"$.n","NumericGreaterThanEqualsPath":"$.n3"}`, true},
		{`{"Variable":"$.n","NumericEqualsPath":"$.s"}`, false}, // operand mistyped
		// Booleans.
		{`{"Variable":"$.b","BooleanEquals":true}`, true},
		{`{"Variable":"$.b2","BooleanEquals":true}`, false},
		{`{"Variable":"$.s","BooleanEquals":true}`, false},
		{`{"Variable":"$.b","BooleanEqualsPath":"$.b2"}`, false},
		// Type tests.
		{`{"Variable":"$.s","IsPresent":true}`, true},
		{`{"Variable":"$.missing","IsPresent":true}`, false},
		{`{"Variable":"$.missing","IsPresent":false}`, true},
		{`{"Variable":"$.z","IsPresent":true}`, true},
		{`{"Variable":"$.z","IsNull":true}`, true},
		{`{"Variable":"$.s","IsNull":true}`, false},
		{`{"Variable":"$.s","IsNull":false}`, true},
		{`{"Variable":"$.s","IsString":true}`, true},
		{`{"Variable":"$.n","IsString":false}`, true},
		{`{"Variable":"$.n","IsNumeric":true}`, true},
		{`{"Variable":"$.s","IsNumeric":true}`, false},
		{`{"Variable":"$.b","IsBoolean":true}`, true},
		{`{"Variable":"$.z","IsBoolean":true}`, false},
		{`{"Variable":"$.o","IsString":true}`, false},
		// Boolean expressions.
		{`{"And":[{"Variable":"$.s","StringEquals":"beta"},{"Variable":"$.n","NumericEquals":10}]}`, true},
		{`{"And":[{"Variable":"$.s","StringEquals":"beta"},{"Variable":"$.n","NumericEquals":11}]}`, false},
		{`{"Or":[{"Variable":"$.s","StringEquals":"x"},{"Variable":"$.n","NumericEquals":10}]}`, true},
		{`{"Or":[{"Variable":"$.s","StringEquals":"x"},{"Variable":"$.n","NumericEquals":11}]}`, false},
		{`{"Not":{"Variable":"$.s","StringEquals":"x"}}`, true},
		{`{"Not":{"Not":{"Variable":"$.s","StringEquals":"x"}}}`, false},
		// The guard idiom: IsPresent first protects the rest (short circuit).
		{`{"And":[{"Variable":"$.missing","IsPresent":true},{"Variable":"$.missing","StringEquals":"x"}]}`, false},
		{`{"Or":[{"Variable":"$.s","IsPresent":true},{"Variable":"$.missing","StringEquals":"x"}]}`, true},
		// Context object as Variable.
		{`{"Variable":"$$.State.Name","StringEquals":"route"}`, true},
	}
	ctx := &Context{StateName: "route"}
	for _, tc := range cases {
		r := compileRule(t, tc.rule)
		got, f := r.Eval(input, ctx)
		if f != nil {
			t.Errorf("%s: failed: %v", tc.rule, f)
			continue
		}
		if got != tc.want {
			t.Errorf("%s = %v, want %v", tc.rule, got, tc.want)
		}
	}
}

// AWS: a comparison whose Variable, or ...Path operand, selects nothing
// fails the state with States.Runtime ("Invalid path ... The choice
// state's condition path references an invalid value."), for every
// operator but IsPresent.
func TestChoiceRule_MissingVariableIsRuntime(t *testing.T) {
	t.Parallel()
	input := MustDecode(`{"left":8}`)
	cases := []struct{ rule, path string }{
		{`{"Variable":"$.approved","BooleanEquals":true}`, "$.approved"},
		{`{"Variable":"$.x","StringEquals":"a"}`, "$.x"},
		{`{"Variable":"$.x","NumericEquals":1}`, "$.x"},
		{`{"Variable":"$.x","IsNull":false}`, "$.x"},
		{`{"Variable":"$.x","IsString":false}`, "$.x"},
		{`{"Variable":"$.left","NumericLessThanPath":"$.right"}`, "$.right"},
		{`{"Not":{"Variable":"$.x","StringEquals":"a"}}`, "$.x"},
		{`{"And":[{"Variable":"$.left","IsPresent":true},{"Variable":"$.x","StringEquals":"a"}]}`, "$.x"},
	}
	for _, tc := range cases {
		_, f := compileRule(t, tc.rule).Eval(input, nil)
		want := "Invalid path '" + tc.path + "': The choice state's condition path references an invalid value."
		if f == nil || f.Error != ErrRuntime || f.Cause != want {
			t.Errorf("%s: failure %v, want %s: %s", tc.rule, f, ErrRuntime, want)
		}
	}
}

// ASL spec § Choice state: first matching rule wins; else Default; else
// States.NoChoiceMatched.
func TestState_Choose(t *testing.T) {
	t.Parallel()
	def := `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[
		{"Variable":"$.v","NumericGreaterThan":5,"Next":"big"},
		{"Variable":"$.v","NumericGreaterThan":1,"Next":"mid"}],"Default":"small"},
		"big":{"Type":"Succeed"},"mid":{"Type":"Succeed"},"small":{"Type":"Succeed"},
		"nod":{"Type":"Choice","Choices":[{"Variable":"$.v","NumericEquals":0,"Next":"big"}]}}}`
	// "nod" is unreachable, so parse a variant where it is the start.
	_, err := Parse([]byte(def))
	if err == nil || !strings.Contains(err.Error(), `state "nod": not reachable`) {
		t.Fatalf("unreachable state not reported: %v", err)
	}
	_, err = Parse([]byte(strings.Replace(def, `"Default":"small"},`, `"Default":"nod"},`, 1)))
	if err == nil {
		t.Fatal(`"small" is now unreachable and must be reported`)
	}
	sm, err := Parse([]byte(strings.Replace(def, `"small":{"Type":"Succeed"},`, `"small":{"Type":"Pass","Next":"nod"},`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	c, nod := sm.States["c"], sm.States["nod"]
	for _, tc := range []struct {
		v, want string
	}{{`{"v":9}`, "big"}, {`{"v":3}`, "mid"}, {`{"v":0}`, "small"}} {
		got, f := c.Choose(MustDecode(tc.v), nil)
		if f != nil || got != tc.want {
			t.Errorf("Choose(%s) = %q, %v; want %q", tc.v, got, f, tc.want)
		}
	}
	if _, f := nod.Choose(MustDecode(`{"v":1}`), nil); f == nil || f.Error != ErrNoChoiceMatched {
		t.Errorf("no match without Default: failure %v, want %s", f, ErrNoChoiceMatched)
	}
}
