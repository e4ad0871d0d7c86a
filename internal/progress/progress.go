// Package progress shows a run's live progress to its operator
// (README.md § Live progress: "a 40-minute step is never silent"). A Display
// takes the run's events (worker.Event: step start, progress, wait, end, the
// supervisor's turns) from whichever side sees them — the embedded worker
// service, runview.Tracker reading a deployed stack's records — and renders
// them three ways:
//
//   - a line per start, wait and end on Out (stderr), as `stratus run`
//     has always printed them (Line);
//   - while steps run: on a terminal, a ticking line per running step
//     (elapsed, agent steps, tokens, cost) redrawn in place every second
//     below those lines; elsewhere (a log, a pipe, run.log of a detached
//     run) a "busy" line per running step every Every, whether or not its
//     engine said anything since;
//   - with JSON set, one JSON object per event on that writer (JSON lines;
//     `--json` puts them on stdout, the run's end last: RunEnded).
//
// A Display is safe for concurrent use; Close stops its ticker and erases
// the ticking lines.
package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/worker"
)

// DefaultEvery is how often a running step gets a progress line where the
// display cannot tick (not a terminal).
const DefaultEvery = 30 * time.Second

// Options configure a Display.
type Options struct {
	Out io.Writer // the operator's lines (stderr); nil = none
	// Live redraws a ticking line per running step in place on Out (Out is
	// a terminal: see Terminal). Off: a busy line per running step every
	// Every instead.
	Live bool
	// Width is Out's width in columns (0 = asked of Out when it is a
	// terminal, else 100); ticking lines are cut to it so that redrawing
	// in place stays exact.
	Width int
	JSON  io.Writer     // one JSON object per event; nil = none
	Every time.Duration // busy line period when not Live (0 = DefaultEvery)
	Tick  time.Duration // how often running steps are looked at (0 = 1 s)
	Now   func() time.Time
}

// Terminal reports whether w is a terminal the display may draw on: a
// character device, with TERM not "dumb". w is an *os.File, or a writer
// that wraps one and says its descriptor (Fd).
func Terminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// Display renders a run's events. Its zero value is not usable: see New.
type Display struct {
	o    Options
	mu   sync.Mutex
	runs map[string]*running // by step ref
	// drawn is how many ticking lines are on the screen below the last
	// printed line (Live).
	drawn     int
	frame     int
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	part      []byte // an unfinished line written through Write
}

// running is a step (or a supervisor turn) between its start and its end.
type running struct {
	worker.Event           // the latest: start or progress
	started      time.Time // the attempt's start
	lastLine     time.Time // the last progress line printed (not Live)
}

// New returns a display; it ticks until Close.
func New(o Options) *Display {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Out == nil {
		o.Out, o.Live = io.Discard, false
	}
	if o.Width <= 0 {
		o.Width = 100
		if f, ok := o.Out.(*os.File); ok && o.Live {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 10 {
				o.Width = w
			}
		}
	}
	d := &Display{o: o, runs: map[string]*running{}, stop: make(chan struct{}), done: make(chan struct{})}
	go d.tick()
	return d
}

func (d *Display) tick() {
	defer close(d.done)
	t := time.NewTicker(d.o.Tick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.mu.Lock()
			d.ticked()
			d.mu.Unlock()
		}
	}
}

// ticked redraws the ticking lines (Live) or prints the busy line of
// each running step last shown Every ago.
func (d *Display) ticked() {
	if len(d.runs) == 0 {
		return
	}
	if d.o.Live {
		d.frame++
		d.redraw(nil)
		return
	}
	now := d.o.Now()
	for _, ref := range d.refs() {
		r := d.runs[ref]
		if now.Sub(r.lastLine) >= d.o.Every {
			r.lastLine = now
			e := r.Event
			e.Type, e.Duration = worker.EventStepProgress, now.Sub(r.started)
			io.WriteString(d.o.Out, Line(e)+"\n")
		}
	}
}

// Close stops the ticker and erases the ticking lines; later events still
// print their lines. Close is idempotent.
func (d *Display) Close() {
	d.closeOnce.Do(func() {
		close(d.stop)
		<-d.done
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	d.erase()
	if len(d.part) > 0 {
		io.WriteString(d.o.Out, safetext.Block(string(d.part))+"\n")
		d.part = nil
	}
	d.o.Live = false
}

// Write prints other lines (warnings, notes) above the ticking lines.
// A line is printed once it ends ('\n'), through safetext.Block: whatever
// engine text a line quotes, none of it reaches the terminal raw
// (docs/security.md § Text an engine wrote; a writer that quotes engine
// text inside one line escapes its newlines itself).
func (d *Display) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.part = append(d.part, p...)
	i := strings.LastIndexByte(string(d.part), '\n')
	if i < 0 {
		return len(p), nil
	}
	lines := d.part[:i+1]
	d.part = append([]byte(nil), d.part[i+1:]...)
	d.print(safetext.Block(string(lines)))
	return len(p), nil
}

// Event renders e (and writes it as a JSON line when JSON is set).
func (d *Display) Event(e worker.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.o.Now()
	if e.At.IsZero() {
		e.At = now
	}
	if d.o.JSON != nil {
		b, _ := json.Marshal(jsonEvent(e))
		d.o.JSON.Write(append(b, '\n'))
	}
	switch e.Type {
	case worker.EventStepStarted, worker.EventSupervisorStarted:
		d.runs[e.StepRef] = &running{Event: e, started: e.At, lastLine: now}
		d.print(Line(e) + "\n")
	case worker.EventStepProgress:
		r := d.runs[e.StepRef]
		if r == nil { // followed from mid-step
			r = &running{started: e.At.Add(-e.Duration), lastLine: now}
			d.runs[e.StepRef] = r
		}
		if e.Attempt < r.Attempt {
			return // a late post of an earlier attempt
		}
		if r.Node != "" {
			e.Node = r.Node // a supervisor turn keeps its job's name
		}
		r.Event = e
		if d.o.Live {
			d.redraw(nil)
		}
	case worker.EventStepEnded, worker.EventSupervisorEnded, worker.EventStepRetrying, worker.EventStepParked:
		// A retried or parked step runs no attempt until its next one
		// starts (internal/retry): its ticking line goes too.
		delete(d.runs, e.StepRef)
		d.print(Line(e) + "\n")
	default:
		d.print(Line(e) + "\n")
	}
}

// RunEnded writes the run's end as the last JSON line: {"event":
// "run_ended", …result's fields}. result must marshal to a JSON object.
func (d *Display) RunEnded(result any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.o.JSON == nil {
		return
	}
	b, err := json.Marshal(result)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return
	}
	line := `{"event":"run_ended","at":"` + d.o.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`
	if len(b) > 2 {
		line += ","
	}
	d.o.JSON.Write([]byte(line + string(b[1:]) + "\n"))
}

// print writes text (whole lines) above the ticking lines.
func (d *Display) print(text string) {
	if !d.o.Live {
		io.WriteString(d.o.Out, text)
		return
	}
	d.redraw(&text)
}

// redraw erases the ticking lines, prints text (when given), and draws
// the ticking lines again.
func (d *Display) redraw(text *string) {
	var b strings.Builder
	for range d.drawn {
		b.WriteString("\x1b[1A\x1b[2K") // up one line, clear it
	}
	if text != nil {
		b.WriteString(*text)
	}
	refs := d.refs()
	now := d.o.Now()
	for _, ref := range refs {
		b.WriteString(cut(d.ticking(d.runs[ref], now), d.o.Width-1))
		b.WriteString("\n")
	}
	d.drawn = len(refs)
	io.WriteString(d.o.Out, b.String())
}

// refs are the running steps' refs, sorted.
func (d *Display) refs() []string {
	refs := make([]string, 0, len(d.runs))
	for ref := range d.runs {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	return refs
}

func (d *Display) erase() {
	if !d.o.Live || d.drawn == 0 {
		return
	}
	io.WriteString(d.o.Out, strings.Repeat("\x1b[1A\x1b[2K", d.drawn))
	d.drawn = 0
}

var spinner = []string{"|", "/", "-", "\\"}

// ticking is the live line of a running step: what changes first, so a
// narrow terminal cuts the attempt number rather than the figures.
func (d *Display) ticking(r *running, now time.Time) string {
	who := r.StepRef
	if node, _, _ := strings.Cut(r.StepRef, "#"); r.Node != "" && r.Node != node {
		who += " " + r.Node // a supervisor turn: its job
	}
	who = safetext.Line(who)
	line := fmt.Sprintf("  %s %s  %s  %s", spinner[d.frame%len(spinner)], who, english.Duration(now.Sub(r.started)), counters(r.Event))
	if r.Attempt > 0 { // a publish step has none
		line += fmt.Sprintf("  (attempt %d)", r.Attempt)
	}
	return line
}

// counters is "N steps, P/C tokens[, $X]" of a progress event (tokens:
// prompt/completion; cost in US dollars).
func counters(e worker.Event) string {
	unit := "steps"
	if e.Steps == 1 {
		unit = "step"
	}
	s := fmt.Sprintf("%d %s, %d/%d tokens", e.Steps, unit, e.PromptTokens, e.CompletionTokens)
	if e.CostUSD != nil {
		s += fmt.Sprintf(", $%.4f", *e.CostUSD)
	}
	return s
}

// cut shortens s to n runes, ending in "…" when cut.
func cut(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Line renders one event as the operator's progress line. Its text fields
// pass through safetext (a reason quoted, the others as one line): an
// engine chose the reason and the terminal of its own result
// (docs/security.md § Text an engine wrote).
func Line(e worker.Event) string {
	e.StepRef, e.Node, e.Terminal, e.Outcome = safetext.Line(e.StepRef), safetext.Line(e.Node), safetext.Line(e.Terminal), safetext.Line(e.Outcome)
	switch e.Type {
	case worker.EventSupervisorStarted:
		return fmt.Sprintf("stratus: supervisor %s %s (%s)", e.StepRef, e.Node, orDash(safetext.Line(e.Reason)))
	case worker.EventSupervisorEnded:
		line := fmt.Sprintf("stratus: supervisor %s %s ended: %s", e.StepRef, e.Node, orDash(e.Outcome))
		if e.Reason != "" && e.Outcome == "failed" {
			line += " reason=" + safetext.Quote(e.Reason)
		}
		return line
	case worker.EventStepStarted:
		return fmt.Sprintf("stratus: start %-16s node=%s attempt=%d", e.StepRef, e.Node, e.Attempt)
	case worker.EventStepWaiting:
		return fmt.Sprintf("stratus: wait  %-16s node=%s %s", e.StepRef, e.Node, safetext.Line(e.Reason))
	case worker.EventStepRetrying:
		return fmt.Sprintf("stratus: retry %-16s node=%s attempt=%d terminal=%s duration=%s tokens=%d/%d reason=%s",
			e.StepRef, e.Node, e.Attempt, orDash(e.Terminal), english.Duration(e.Duration), e.PromptTokens, e.CompletionTokens, safetext.Quote(e.Reason))
	case worker.EventStepParked:
		return fmt.Sprintf("stratus: park  %-16s node=%s attempt=%d terminal=%s reason=%s", e.StepRef, e.Node, e.Attempt, orDash(e.Terminal), safetext.Quote(e.Reason))
	case worker.EventStepProgress:
		return fmt.Sprintf("stratus: busy  %-16s node=%s attempt=%d elapsed=%s %s", e.StepRef, e.Node, e.Attempt, english.Duration(e.Duration), counters(e))
	default:
		line := fmt.Sprintf("stratus: end   %-16s node=%s attempt=%d terminal=%s verdict=%s duration=%s tokens=%d/%d",
			e.StepRef, e.Node, e.Attempt, orDash(e.Terminal), orDash(e.Outcome), english.Duration(e.Duration), e.PromptTokens, e.CompletionTokens)
		if e.Reason != "" && e.Outcome != "done" {
			line += " reason=" + safetext.Quote(e.Reason)
		}
		return line
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Event is the JSON line of one event. Counters and durations appear on
// the events that carry them: progress (steps, tokens, cost, elapsed_ms)
// and ends (tokens, cost, duration_ms).
type Event struct {
	Event            string   `json:"event"`
	At               string   `json:"at"` // RFC 3339, UTC, ms
	RunID            string   `json:"run_id"`
	Node             string   `json:"node,omitempty"`
	StepRef          string   `json:"step_ref,omitempty"`
	Attempt          int      `json:"attempt,omitempty"`
	Terminal         string   `json:"terminal,omitempty"`
	Outcome          string   `json:"outcome,omitempty"`
	Reason           string   `json:"reason,omitempty"`
	Steps            *int     `json:"steps,omitempty"`
	PromptTokens     *int64   `json:"prompt_tokens,omitempty"`
	CompletionTokens *int64   `json:"completion_tokens,omitempty"`
	CostUSD          *float64 `json:"cost_usd,omitempty"`
	ElapsedMS        *int64   `json:"elapsed_ms,omitempty"`
	DurationMS       *int64   `json:"duration_ms,omitempty"`
}

func jsonEvent(e worker.Event) Event {
	j := Event{Event: e.Type, At: e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), RunID: e.RunID, Node: e.Node, StepRef: e.StepRef,
		Attempt: e.Attempt, Terminal: e.Terminal, Outcome: e.Outcome, Reason: e.Reason}
	ms := e.Duration.Milliseconds()
	switch e.Type {
	case worker.EventStepProgress:
		j.Steps, j.PromptTokens, j.CompletionTokens, j.CostUSD, j.ElapsedMS = &e.Steps, &e.PromptTokens, &e.CompletionTokens, e.CostUSD, &ms
	case worker.EventStepEnded, worker.EventSupervisorEnded, worker.EventStepRetrying, worker.EventStepParked:
		if e.Attempt > 0 {
			j.PromptTokens, j.CompletionTokens, j.CostUSD = &e.PromptTokens, &e.CompletionTokens, e.CostUSD
		}
		j.DurationMS = &ms
	}
	return j
}

// For returns w when it is a Display, else a Display printing lines (no
// ticking, no JSON) on w (nil = none); close releases what For made.
func For(w io.Writer) (d *Display, close func()) {
	if d, ok := w.(*Display); ok {
		return d, func() {}
	}
	d = New(Options{Out: w})
	return d, d.Close
}
