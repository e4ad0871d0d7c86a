package asl

import (
	"testing"
)

// Payloads must re-encode as they came: Step Functions keeps key order
// and number text, and the parity test compares what both executors emit.
func TestDecodeEncode_KeepsOrderNumbersAndText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"key order", `{"b":1,"a":2,"c":{"z":0,"y":1}}`, `{"b":1,"a":2,"c":{"z":0,"y":1}}`},
		{"number text", `[1.0, 1e3, -0, 12345678901234567890123, 0.1]`, `[1.0,1e3,-0,12345678901234567890123,0.1]`},
		{"whitespace dropped", " { \"a\" : [ true , false , null ] } ", `{"a":[true,false,null]}`},
		{"duplicate key keeps first position, last value", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{"escapes", `"q\" b\\ n\n t\t c\u0001 é € 😀 <&>"`, `"q\" b\\ n\n t\t c\u0001 é € 😀 <&>"`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"scalar", `"x"`, `"x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := EncodeString(v); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// ASL spec § Structure of a State Machine: input and definitions are JSON
// texts; anything else is rejected.
func TestDecode_RejectsInvalid(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":1} {}`, `[1,]`, `{1:2}`, `nul`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) succeeded, want an error", in)
		}
	}
}

// JSON value equality: numbers by value, exactly; objects regardless of
// key order.
func TestEqual_NumbersByValueObjectsUnordered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b string
		want bool
	}{
		{`1`, `1.0`, true},
		{`1e2`, `100`, true},
		{`9007199254740993`, `9007199254740992`, false},
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{`[1,2]`, `[2,1]`, false},
		{`null`, `{}`, false},
		{`"1"`, `1`, false},
	}
	for _, tc := range cases {
		if got := Equal(MustDecode(tc.a), MustDecode(tc.b)); got != tc.want {
			t.Errorf("Equal(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// Values are immutable: ResultPath builds new objects and shares the rest
// (ASL spec § Input and Output Processing: ResultPath).
func TestObject_WithCopiesAndLargeObjectsIndex(t *testing.T) {
	t.Parallel()
	o := NewObject()
	for i := 0; i < 40; i++ {
		o = o.With(string(rune('A'+i)), numberOf(i))
	}
	n := o.With("B", "changed")
	if v, _ := o.Get("B"); EncodeString(v) != "1" {
		t.Errorf("With modified the original: B = %v", v)
	}
	if v, _ := n.Get("B"); v != "changed" {
		t.Errorf("With did not set B: %v", v)
	}
	if n.Len() != 40 || n.Members()[1].Key != "B" {
		t.Errorf("With changed the key order: len %d, second key %q", n.Len(), n.Members()[1].Key)
	}
	if _, ok := n.Get("zz"); ok {
		t.Error("Get found a missing key")
	}
}
