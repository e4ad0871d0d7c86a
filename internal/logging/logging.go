// Package logging is Stratus's one structured logger (README.md § Logs):
// log/slog records everywhere something is logged, written as JSON lines
// where a machine reads them (a Lambda function's and an ECS runner's
// stderr, which CloudWatch Logs Insights queries; an embedded runner's
// runner.log, which the viewer and `stratus logs` render) and as plain
// sentences on an operator's terminal.
//
// Every record about one step carries the same three attributes (KeyRunID,
// KeyStepRef, KeyAttempt: see Step), and every record says which part of
// Stratus wrote it (KeyComponent: "runner", "dispatch", "workerapi",
// "events", "stratus").
package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/stratusflow/stratus/internal/safetext"
)

// Attribute keys shared by every writer and reader of records.
const (
	KeyComponent = "component"
	KeyRunID     = "run_id"
	KeyStepRef   = "step_ref"
	KeyAttempt   = "attempt"
)

// EnvFormat forces the format of New's records: "json" or "text". Unset,
// New writes text to a terminal and JSON anywhere else.
const EnvFormat = "STRATUS_LOG_FORMAT"

// New returns the logger of component on w: JSON lines (slog's
// JSONHandler: time, level, msg, then attributes), or, when w is a
// terminal (or EnvFormat is "text"), Human's sentences. Each record
// carries component under KeyComponent. A nil w is os.Stderr.
func New(w io.Writer, component string) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	switch os.Getenv(EnvFormat) {
	case "json":
		return JSON(w, component)
	case "text":
		return Human(w, component)
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return Human(w, component)
	}
	return JSON(w, component)
}

// JSON returns component's logger writing one JSON object per record on w.
func JSON(w io.Writer, component string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil)).With(KeyComponent, component)
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Step returns l with the attributes that name one attempt of one step.
func Step(l *slog.Logger, runID, stepRef string, attempt int) *slog.Logger {
	var attrs []any
	if runID != "" {
		attrs = append(attrs, KeyRunID, runID)
	}
	if stepRef != "" {
		attrs = append(attrs, KeyStepRef, stepRef)
	}
	if attempt > 0 {
		attrs = append(attrs, KeyAttempt, attempt)
	}
	return l.With(attrs...)
}

// Human returns a logger whose records are sentences for an operator, as
// the CLI has always written them: "<prefix>: <msg>" for INFO,
// "<prefix>: warning: <msg>" for WARN, "<prefix>: error: <msg>" for ERROR,
// followed by the record's attributes as key=value, except those that name
// the step (its sentence already does) and the component (the prefix).
// DEBUG records are dropped. Safe for concurrent use; one Write per record.
// A record is one line: its message and values pass through safetext, as
// they may quote what an engine wrote (docs/security.md § Text an engine
// wrote).
func Human(w io.Writer, prefix string) *slog.Logger {
	return slog.New(&human{w: w, prefix: prefix, mu: &sync.Mutex{}})
}

type human struct {
	w      io.Writer
	prefix string
	attrs  []slog.Attr
	mu     *sync.Mutex
}

func (h *human) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *human) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(h.prefix)
	b.WriteString(": ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(safetext.Line(r.Message))
	write := func(a slog.Attr) bool {
		if a.Key == "" || quiet[a.Key] {
			return true
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, textValue(a.Value.Resolve().String()))
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b.Bytes())
	return err
}

func (h *human) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

// WithGroup flattens groups: the sentences have no nesting.
func (h *human) WithGroup(string) slog.Handler { return h }

// quiet are the keys a sentence leaves out: its prefix says the component,
// and a step's sentence names the step.
var quiet = map[string]bool{KeyComponent: true, KeyRunID: true, KeyStepRef: true, KeyAttempt: true}

// textValue is a record's value as key=value writes it: quoted when it
// is empty, holds a space, a quote or an equals sign, or anything
// safetext escapes.
func textValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \"=") || strings.ContainsFunc(s, safetext.Unsafe) || !utf8.ValidString(s) {
		return safetext.Quote(s)
	}
	return s
}

// IsRecord reports whether line is a JSON record a Stratus logger wrote:
// an object with the time, level, msg and component keys.
func IsRecord(line string) bool {
	_, ok := parse(line)
	return ok
}

func parse(line string) (map[string]any, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, `{"time":`) {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return nil, false
	}
	for _, k := range []string{slog.TimeKey, slog.LevelKey, slog.MessageKey, KeyComponent} {
		if _, ok := m[k]; !ok {
			return nil, false
		}
	}
	return m, true
}

// Lines splits a log's text into its lines, and a line where a record
// follows text that did not end in a newline (an engine's last stderr
// write, sharing the runner's log) into that text and the record.
func Lines(text string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if i := strings.Index(l, `{"time":"`); i > 0 && IsRecord(l[i:]) {
			out = append(out, l[:i], l[i:])
			continue
		}
		out = append(out, l)
	}
	return out
}

// Render is line as an operator reads it: a record as
// "15:04:05 <component>: [warning: ]<msg> key=value…" (UTC; the keys that
// name the step left out, the others sorted) on one line through
// safetext.Line (an engine shares the runner's log and can write a line
// that parses as a record; docs/security.md § Text an engine wrote), any
// other line — an engine's stderr — unchanged.
func Render(line string) string {
	m, ok := parse(line)
	if !ok {
		return line
	}
	var b strings.Builder
	if t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m[slog.TimeKey])); err == nil {
		b.WriteString(t.UTC().Format("15:04:05 "))
	}
	fmt.Fprintf(&b, "%v: ", m[KeyComponent])
	switch fmt.Sprint(m[slog.LevelKey]) {
	case "WARN":
		b.WriteString("warning: ")
	case "ERROR":
		b.WriteString("error: ")
	}
	fmt.Fprint(&b, m[slog.MessageKey])
	var keys []string
	for k := range m {
		switch k {
		case slog.TimeKey, slog.LevelKey, slog.MessageKey:
		default:
			if !quiet[k] {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		s, ok := v.(string)
		if !ok {
			j, _ := json.Marshal(v)
			s = string(j)
		}
		fmt.Fprintf(&b, " %s=%s", k, textValue(s))
	}
	return safetext.Line(b.String())
}
