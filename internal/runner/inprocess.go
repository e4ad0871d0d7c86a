package runner

import (
	"context"
	"log/slog"

	"github.com/stratusflow/stratus/internal/launch/inprocess"
)

// InProcess is the runner of in-process workers (internal/launch/inprocess,
// worker.isolation: in-process): each attempt is Run on the launcher's
// goroutine, with the launcher's transport and log, and the engine files
// of every attempt are shared (EngineFileCache) until Close. The zero
// value is ready; safe for concurrent use; not to be copied once used.
type InProcess struct {
	files EngineFileCache
}

var _ inprocess.Runner = (*InProcess)(nil)

// Run is Run with a's address, handle, task, transport and logs, and the
// shared engine files.
func (r *InProcess) Run(ctx context.Context, a inprocess.Attempt) error {
	return Run(ctx, Options{APIURL: a.APIURL, Handle: a.Handle, TaskID: a.TaskID, Self: a.Self, SpoolDir: a.SpoolDir,
		HTTP: a.HTTP, Log: a.Log, EngineStderr: a.EngineStderr, EngineFiles: &r.files})
}

// Ended says err on log as a runner process says it (LogEnd) and returns
// that process's exit status (ExitCode).
func (r *InProcess) Ended(log *slog.Logger, err error) int {
	LogEnd(log, err)
	return ExitCode(err)
}

// Close removes the engine files the attempts shared
// (EngineFileCache.Close).
func (r *InProcess) Close() error { return r.files.Close() }
