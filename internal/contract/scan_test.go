package contract

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzScanObject holds the one-pass scanner to encoding/json, the rules it
// replaces (README.md § Performance): for any line it accepts exactly what
// json.Unmarshal into map[string]json.RawMessage accepts, and finds the
// same members with the same raw values (the last of a repeated key).
func FuzzScanObject(f *testing.F) {
	for _, l := range vectorLines(f) {
		f.Add(l)
	}
	for _, l := range malformedLines {
		f.Add(l)
	}
	for _, l := range []string{`{}`, ` {"a":1} `, `{"a":1}x`, `{"a":01}`, `{"a":-0.5e+3}`, `{"a":1.}`, `{"a":"\u00e9\n"}`, `{"a":"\x"}`, `{"\u0065vent":"usage"}`,
		`{"a":[1,{"b":[]},"c",true,false,null]}`, `{"a":1,"a":2}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", `{"a":1,}`, `{"a" 1}`, `{"a":tru}`, `[1]`, `{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var want map[string]json.RawMessage
		wantOK := json.Unmarshal([]byte(line), &want) == nil && strings.HasPrefix(strings.TrimLeft(line, " \t\r\n"), "{")
		got := map[string][]byte{}
		gotOK := scanObject([]byte(line), func(key, value []byte) { got[string(key)] = value })
		if gotOK != wantOK {
			t.Fatalf("line %q: scanObject %v, encoding/json %v", line, gotOK, wantOK)
		}
		if !gotOK {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("line %q: members %q, encoding/json %q", line, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("line %q: member %q = %q, encoding/json %q", line, k, got[k], v)
			}
		}
	})
}

// One agent_step line, one usage line: no allocation
// (README.md § Performance: at most 2 a line).
func TestApply_Allocations(t *testing.T) {
	for _, l := range []string{`{"event":"agent_step","step":7}`,
		`{"event":"usage","usage":{"prompt_tokens":1200,"completion_tokens":34,"total_tokens":1234,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1200,"cost_usd":0.02}}`,
		`{"event":"tool_call","name":"read","input":{"path":"a.go"}}`} {
		var o observed
		line := []byte(l)
		if n := testing.AllocsPerRun(100, func() { o.apply(line) }); n > 2 {
			t.Errorf("%s: %v allocations a line; want at most 2", l, n)
		}
	}
}
