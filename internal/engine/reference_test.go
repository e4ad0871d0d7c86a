package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

// transcriptCase is one command of the reference engine's transcript: the
// kind it ran, the one stdin line it was given, and its stdout.
type transcriptCase struct {
	kind, input string
	want        string // the expected lines, each ending in "\n"
}

var transcriptCommand = regexp.MustCompile(`^\$ \(printf '(.*)\\n'; sleep 1\) \| openseek\.exe subrun (\S+)$`)

// readTranscript reads testdata/reference/subrun.txt (openseek's
// tests/cram/subrun.md, copied: see its header).
func readTranscript(t *testing.T) []transcriptCase {
	t.Helper()
	data, err := os.ReadFile("testdata/reference/subrun.txt")
	if err != nil {
		t.Fatal(err)
	}
	var cases []transcriptCase
	var cur *transcriptCase
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "$ "):
			m := transcriptCommand.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("transcript command not understood: %s", l)
			}
			cases = append(cases, transcriptCase{kind: m[2], input: m[1]})
			cur = &cases[len(cases)-1]
		case l == "":
			cur = nil
		default:
			if cur == nil {
				t.Fatalf("transcript line outside a case: %s", l)
			}
			cur.want += l + "\n"
		}
	}
	if len(cases) == 0 {
		t.Fatal("no cases in the transcript")
	}
	return cases
}

// The bundled echo engine is openseek's echo subrun kind byte for byte
// (docs/contracts.md § The reference engine;
// docs/contracts.md § The reference engine, § Conformance checklist): on each
// of the transcript's echo inputs, sent bare (as the transcript does) or in
// the v1 envelope (docs/contracts.md § The request line), its stdout is
// exactly the transcript's lines.
func TestReference_EchoMatchesOpenseekTranscript(t *testing.T) {
	t.Parallel()
	n := 0
	for _, tc := range readTranscript(t) {
		if tc.kind != "echo" {
			continue
		}
		n++
		for _, req := range []string{
			tc.input,
			`{"workflow_contract": 1, "id": "cr-1", "kind": "echo", "input": ` + tc.input + `}`,
		} {
			var out bytes.Buffer
			if err := Echo(strings.NewReader(req+"\n"), &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("request %s:\ngot:\n%swant (openseek tests/cram/subrun.md):\n%s", req, out.String(), tc.want)
			}
		}
	}
	if n == 0 {
		t.Fatal("the transcript has no echo case")
	}
}

// The script engine shares the Emitter: answering the echo case's input with
// the echo kind's canned numbers, it prints the same bytes.
func TestReference_ScriptLinesMatchOpenseekTranscript(t *testing.T) {
	t.Parallel()
	for _, tc := range readTranscript(t) {
		if tc.kind != "echo" {
			continue
		}
		var report any
		if err := json.Unmarshal([]byte(tc.input), &report); err != nil {
			t.Fatal(err)
		}
		s := &Scenario{Default: &Answer{Report: report, Steps: 1, PromptTokens: 7, CompletionTokens: 3}}
		var out bytes.Buffer
		if err := Script(context.Background(), s, strings.NewReader(tc.input+"\n"), &out); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("got:\n%swant:\n%s", out.String(), tc.want)
		}
	}
}

// The transcript's other kinds (unknown `nope`, `worker`) are openseek's,
// not echo's; what the bundled engines share with them is the command_error
// line, which the Emitter writes byte for byte the same for the same text.
func TestReference_CommandErrorLinesMatchOpenseekTranscript(t *testing.T) {
	t.Parallel()
	n := 0
	for _, tc := range readTranscript(t) {
		if tc.kind == "echo" {
			continue
		}
		var ev struct{ Event, Error string }
		if err := json.Unmarshal([]byte(tc.want), &ev); err != nil || ev.Event != "command_error" {
			t.Fatalf("%s: not one command_error line: %q (%v)", tc.kind, tc.want, err)
		}
		n++
		var out bytes.Buffer
		Emitter{W: &out}.CommandError(ev.Error)
		if out.String() != tc.want {
			t.Errorf("%s: got %swant %s", tc.kind, out.String(), tc.want)
		}
	}
	if n == 0 {
		t.Fatal("the transcript has no command_error case")
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// Every line the Emitter writes has the reference shape
// (docs/contracts.md § The event stream, § The report line): compact, `event`
// first, the fields in the reference order, strings escaped as the reference
// escapes them; one Write per line.
func TestEmit_ReferenceWireShape(t *testing.T) {
	t.Parallel()
	cost, nan := 0.0123, math.NaN()
	for _, tc := range []struct {
		name string
		emit func(Emitter)
		want string
	}{
		{"agent_step", func(e Emitter) { e.Step(3) }, `{"event":"agent_step","step":3}`},
		{"usage", func(e Emitter) { e.Usage(100, 20) },
			`{"event":"usage","usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":100}}`},
		{"usage with cost_usd last", func(e Emitter) { e.UsageCost(5, 1, &cost) },
			`{"event":"usage","usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":5,"cost_usd":0.0123}}`},
		{"usage with a cost that is no number: cost unknown", func(e Emitter) { e.UsageCost(5, 1, &nan) },
			`{"event":"usage","usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":5}}`},
		{"command_error", func(e Emitter) { e.CommandError("unknown subrun kind: nope") },
			`{"event":"command_error","error":"unknown subrun kind: nope"}`},
		{"turn_failed, escaped as the reference escapes", func(e Emitter) { e.TurnFailed("got <nil> & \"q\"\\\n\t\x1b\u2028é") },
			`{"event":"turn_failed","error":"got <nil> & \"q\"\\\n\t\u001b` + "\u2028é" + `"}`},
		{"report: compact, key order and number literals kept, strings re-escaped",
			func(e Emitter) {
				e.Report(json.RawMessage(" {\"b\": 1, \"a\": [ 1 , 2.50, 1e3 ], \"s\": \"\\u003c\\/x\\u00e9\"}\n"))
			},
			`{"subrun_report":{"b":1,"a":[1,2.50,1e3],"s":"</xé"}}`},
		{"report: a bare string", func(e Emitter) { e.Report(json.RawMessage(`"done"`)) }, `{"subrun_report":"done"}`},
		{"report: not JSON is written as it is", func(e Emitter) { e.Report(json.RawMessage(`{nope`)) }, `{"subrun_report":{nope}`},
		{"a map line (the shims' own events): event first, usage in order",
			func(e Emitter) {
				e.line(map[string]any{"usage": map[string]any{"cost_usd": 0.5, "total_tokens": int64(3), "prompt_cache_miss_tokens": int64(2),
					"completion_tokens": int64(1), "prompt_cache_hit_tokens": int64(0), "prompt_tokens": int64(2)}, "event": "usage"})
			},
			`{"event":"usage","usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":2,"cost_usd":0.5}}`},
		{"a map line: event first, then the other fields", func(e Emitter) {
			e.line(map[string]any{"steps": 3, "event": "max_steps_exhausted"})
		}, `{"event":"max_steps_exhausted","steps":3}`},
	} {
		var w countingWriter
		tc.emit(Emitter{W: &w})
		if got := w.String(); got != tc.want+"\n" {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.name, got, tc.want)
		}
		if w.writes != 1 {
			t.Errorf("%s: %d writes, want 1", tc.name, w.writes)
		}
	}
}
