package logging

import (
	"context"
	"log/slog"
	"sync"
)

// Recorder keeps the messages of the records its Logger gets, in order: a
// test's view of what was logged. Safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	msgs []string
}

// Logger returns a logger whose records (every level) r keeps.
func (r *Recorder) Logger() *slog.Logger { return slog.New(recorderHandler{r}) }

// Messages returns a copy of the messages kept so far.
func (r *Recorder) Messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

type recorderHandler struct{ r *Recorder }

func (recorderHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recorderHandler) Handle(_ context.Context, rec slog.Record) error {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.msgs = append(h.r.msgs, rec.Message)
	return nil
}

func (h recorderHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recorderHandler) WithGroup(string) slog.Handler      { return h }
