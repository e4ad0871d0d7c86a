package progress

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/worker"
)

// buffer is a Display's Out, read while the display writes.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func started(ref string) worker.Event {
	return worker.Event{Type: worker.EventStepStarted, At: t0, RunID: "r-1", Node: "implementation", StepRef: ref, Attempt: 1}
}

func progressed(ref string, steps int, elapsed time.Duration) worker.Event {
	cost := 0.0125
	return worker.Event{Type: worker.EventStepProgress, At: t0.Add(elapsed), RunID: "r-1", Node: "implementation", StepRef: ref, Attempt: 1,
		Duration: elapsed, Steps: steps, PromptTokens: 1200, CompletionTokens: 34, CostUSD: &cost}
}

func ended(ref string) worker.Event {
	return worker.Event{Type: worker.EventStepEnded, At: t0.Add(time.Minute), RunID: "r-1", Node: "implementation", StepRef: ref, Attempt: 1,
		Terminal: "Captured", Outcome: "done", Duration: time.Minute, PromptTokens: 1200, CompletionTokens: 34}
}

// README.md § Live progress: where the display cannot tick (a log, a pipe), a
// running step gets a busy line every Every — elapsed growing, with the
// counters its runner last posted — even when its engine says nothing, and
// none once it ended.
func TestDisplay_NotATerminal_BusyLinesWhileAStepRuns(t *testing.T) {
	var out buffer
	c := &clock{t: t0}
	d := New(Options{Out: &out, Every: time.Minute, Tick: 5 * time.Millisecond, Now: c.now})
	defer d.Close()
	d.Event(started("implementation#1"))
	d.Event(progressed("implementation#1", 3, 20*time.Second))
	c.add(90 * time.Second) // a silent minute and a half
	waitFor(t, &out, "elapsed=1m30s")
	c.add(30 * time.Second)
	time.Sleep(50 * time.Millisecond) // ticks: under a minute since the last line
	c.add(31 * time.Second)
	waitFor(t, &out, "elapsed=2m31s")
	d.Event(ended("implementation#1"))
	c.add(10 * time.Minute)
	time.Sleep(50 * time.Millisecond)

	want := "stratus: start implementation#1 node=implementation attempt=1\n" +
		"stratus: busy  implementation#1 node=implementation attempt=1 elapsed=1m30s 3 steps, 1200/34 tokens, $0.0125\n" +
		"stratus: busy  implementation#1 node=implementation attempt=1 elapsed=2m31s 3 steps, 1200/34 tokens, $0.0125\n" +
		"stratus: end   implementation#1 node=implementation attempt=1 terminal=Captured verdict=done duration=1m00s tokens=1200/34\n"
	if got := out.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

func waitFor(t *testing.T, out *buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", s, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// README.md § Live progress: on a terminal, each running step has a ticking
// line below the printed lines, redrawn in place (cursor up, clear line) on
// each event and tick; other lines print above it; Close erases it.
func TestDisplay_Terminal_TickingLinesRedrawnInPlace(t *testing.T) {
	var out buffer
	c := &clock{t: t0}
	d := New(Options{Out: &out, Live: true, Width: 200, Tick: time.Hour, Now: c.now})
	d.Event(started("implementation#1"))
	c.add(65 * time.Second)
	d.Event(progressed("implementation#1", 2, 65*time.Second))
	d.Write([]byte("stratus: warning: "))
	d.Write([]byte("something\n"))
	d.Event(ended("implementation#1"))
	d.Close()

	const up = "\x1b[1A\x1b[2K"
	want := "stratus: start implementation#1 node=implementation attempt=1\n" +
		"  | implementation#1  0ms  0 steps, 0/0 tokens  (attempt 1)\n" +
		up + "  | implementation#1  1m05s  2 steps, 1200/34 tokens, $0.0125  (attempt 1)\n" +
		up + "stratus: warning: something\n" +
		"  | implementation#1  1m05s  2 steps, 1200/34 tokens, $0.0125  (attempt 1)\n" +
		up + "stratus: end   implementation#1 node=implementation attempt=1 terminal=Captured verdict=done duration=1m00s tokens=1200/34\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%q\nwant:\n%q", got, want)
	}
}

// A ticking line longer than the terminal is cut to its width, so that
// redrawing one line up stays exact.
func TestDisplay_Terminal_LinesCutToTheWidth(t *testing.T) {
	var out buffer
	d := New(Options{Out: &out, Live: true, Width: 30, Tick: time.Hour})
	d.Event(started("implementation#1"))
	d.Close()
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimPrefix(l, "\x1b[1A\x1b[2K")
		if strings.HasPrefix(l, "  |") && len([]rune(l)) > 29 {
			t.Errorf("ticking line %q is wider than 29 columns", l)
		}
	}
}

// README.md § Live progress: --json is one JSON object per event, the run's end last.
func TestDisplay_JSONLines(t *testing.T) {
	var out, js buffer
	d := New(Options{Out: &out, JSON: &js, Tick: time.Hour, Now: func() time.Time { return t0.Add(2 * time.Minute) }})
	d.Event(started("review#1"))
	d.Event(progressed("review#1", 1, 1500*time.Millisecond))
	d.Event(ended("review#1"))
	d.RunEnded(struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}{"r-1", "done"})
	d.Close()
	want := []string{
		`{"event":"step_started","at":"2026-12-02T10:00:00.000Z","run_id":"r-1","node":"implementation","step_ref":"review#1","attempt":1}`,
		`{"event":"step_progress","at":"2026-12-02T10:00:01.500Z","run_id":"r-1","node":"implementation","step_ref":"review#1","attempt":1,"steps":1,"prompt_tokens":1200,"completion_tokens":34,"cost_usd":0.0125,"elapsed_ms":1500}`,
		`{"event":"step_ended","at":"2026-12-02T10:01:00.000Z","run_id":"r-1","node":"implementation","step_ref":"review#1","attempt":1,"terminal":"Captured","outcome":"done","prompt_tokens":1200,"completion_tokens":34,"duration_ms":60000}`,
		`{"event":"run_ended","at":"2026-12-02T10:02:00.000Z","run_id":"r-1","status":"done"}`,
	}
	got := strings.Split(strings.TrimSpace(js.String()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("JSON lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got {
		if !json.Valid([]byte(l)) {
			t.Errorf("not JSON: %s", l)
		}
	}
	if strings.Contains(out.String(), "{") {
		t.Errorf("JSON reached the operator's lines:\n%s", out.String())
	}
}

// docs/security.md § Text an engine wrote: an engine chooses the terminal
// and the reason of the result it posts; every progress line shows them
// escaped, on one line, and so does a warning written through the display.
func TestLine_EngineTextEscapedOnOneLine(t *testing.T) {
	t.Parallel()
	const forged = "bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	end := ended("draft#1")
	end.Outcome, end.Terminal, end.Reason = "failed", "Failed\u202e", forged
	wait := started("gate#1")
	wait.Type, wait.Reason = worker.EventStepWaiting, forged
	supEnd := end
	supEnd.Type = worker.EventSupervisorEnded
	supStart := started("supervisor#1")
	supStart.Type, supStart.Reason = worker.EventSupervisorStarted, forged
	for _, e := range []worker.Event{end, wait, supEnd, supStart} {
		l := Line(e)
		if strings.ContainsAny(l, "\x1b\x07\r\n\u202e") || !strings.Contains(l, `verdict=done\u202egnp.exe`) {
			t.Errorf("%s: Line = %q; want the engine's text escaped on one line", e.Type, l)
		}
	}
	var out buffer
	d := New(Options{Out: &out})
	d.Write([]byte("stratus: warning: " + forged + "\n"))
	d.Close()
	if strings.ContainsAny(out.String(), "\x1b\x07\r\u202e") {
		t.Errorf("a line written through the display = %q; want its controls escaped", out.String())
	}
}
