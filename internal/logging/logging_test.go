package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// README.md § Logs: a record about a step, written where a machine reads it,
// is one JSON object carrying the component, run_id, step_ref and attempt.
func TestJSON_StepRecordCarriesItsStep(t *testing.T) {
	var b bytes.Buffer
	Step(JSON(&b, "runner"), "run-1", "draft#2", 3).Warn("stats: refused", "status", 409)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON object: %q (%v)", b.String(), err)
	}
	want := map[string]any{"level": "WARN", "msg": "stats: refused", "component": "runner", "run_id": "run-1", "step_ref": "draft#2", "attempt": 3.0, "status": 409.0}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (record %s)", k, m[k], v, b.String())
		}
	}
	if !IsRecord(b.String()) {
		t.Errorf("IsRecord(%q) = false", b.String())
	}
}

// On a terminal (or with STRATUS_LOG_FORMAT=text) a record is the
// sentence the CLI has always printed; the step's own attributes are left
// out (the sentence names it), any other is key=value.
func TestHuman_Sentences(t *testing.T) {
	var b bytes.Buffer
	l := Step(Human(&b, "stratus"), "run-1", "draft#2", 1)
	l.Info("run r1: task t through flow f")
	l.Warn("draft#2: renew the worker's handle: gone", "path", "a b")
	l.Error("disk full")
	l.Debug("not shown")
	want := "stratus: run r1: task t through flow f\n" +
		"stratus: warning: draft#2: renew the worker's handle: gone path=\"a b\"\n" +
		"stratus: error: disk full\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestNew_FormatFromEnv(t *testing.T) {
	var b bytes.Buffer
	t.Setenv(EnvFormat, "text")
	New(&b, "runner").Info("hello")
	t.Setenv(EnvFormat, "")
	New(&b, "runner").Info("hello") // a buffer is no terminal: JSON
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || lines[0] != "runner: hello" || !IsRecord(lines[1]) {
		t.Errorf("lines %q: want a sentence, then a JSON record", lines)
	}
}

// Render shows a record as a timed sentence and leaves an engine's stderr
// (which shares the runner's log) as it was — a JSON line of the engine's
// included.
func TestRender(t *testing.T) {
	rec := `{"time":"2026-12-02T10:14:29.123456Z","level":"WARN","msg":"stats: refused","component":"runner","run_id":"r","step_ref":"a#1","attempt":1,"wall_ms":12,"terminal":"Captured"}`
	if got, want := Render(rec), `10:14:29 runner: warning: stats: refused terminal=Captured wall_ms=12`; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	for _, l := range []string{"plain stderr", `{"event":"progress"}`, `{"time":"x","level":"INFO","msg":"no component"}`, `{"time": broken`} {
		if got := Render(l); got != l {
			t.Errorf("Render(%q) = %q, want it unchanged", l, got)
		}
		if IsRecord(l) {
			t.Errorf("IsRecord(%q) = true", l)
		}
	}
}

func TestRecorder(t *testing.T) {
	var r Recorder
	r.Logger().With("k", "v").Warn("one")
	r.Logger().Debug("two")
	if got := r.Messages(); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Errorf("Messages = %q", got)
	}
}

// An engine's stderr that did not end in a newline leaves the runner's
// next record on its line: Lines splits them apart.
func TestLines_SplitsARecordOffUnfinishedText(t *testing.T) {
	rec := `{"time":"2026-12-02T10:14:29Z","level":"INFO","msg":"the engine ended","component":"runner"}`
	got := Lines("one\nx\x1b[2J" + rec + "\n" + rec + "\n")
	if len(got) != 4 || got[1] != "x\x1b[2J" || got[2] != rec || got[3] != rec {
		t.Errorf("Lines = %q", got)
	}
}

// docs/security.md § Text an engine wrote: a record on a terminal is one
// line whatever its message and values quote, and a record an engine
// forged in the runner's log renders as one escaped line too.
func TestHuman_ARecordIsOneLineWithEngineTextEscaped(t *testing.T) {
	const forged = "bad \x1b]0;PWNED\x07\x1b[2J\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	var b bytes.Buffer
	Human(&b, "stratus").Warn("supervisor observation failed: "+forged, "reason", forged, "path", "a\u202eb")
	want := `stratus: warning: supervisor observation failed: bad \x1b]0;PWNED\x07\x1b[2J\r\nstratus: end fake#1 verdict=done\u202egnp.exe` +
		` reason="bad \x1b]0;PWNED\x07\x1b[2J\r\nstratus: end fake#1 verdict=done\u202egnp.exe" path="a\u202eb"` + "\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	rec := `{"time":"2026-12-02T10:14:29Z","level":"INFO","msg":` + q(forged) + `,"component":` + q("run\u202ener") + `,` + q("k\x1b") + `:` + q(forged) + `}`
	if !IsRecord(rec) {
		t.Fatalf("%s is not a record", rec)
	}
	got := Render(rec)
	if strings.ContainsAny(got, "\x1b\x07\r\n\u202e") || !strings.Contains(got, `verdict=done\u202egnp.exe`) {
		t.Errorf("Render of a forged record = %q; want one line, its controls escaped", got)
	}
}
