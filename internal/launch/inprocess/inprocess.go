// Package inprocess runs an embedded run's workers inside the stratus
// process (docs/contracts.md § The in-process twin): the runner's work —
// fetch the payload, drive the engine through child contract v1, stage
// parts, submit — runs on a goroutine, calling the worker API's handler
// directly (Direct: the same handlers, fencing and fold, without a
// socket). The engine is still a process of its own and still gets
// STRATUS_API_URL and STRATUS_HANDLE: the loopback API stays up for the
// `stratus worker` calls an engine makes.
//
// The runner's work is internal/runner's, but this package sits below it:
// the launcher names only the Runner it needs (one attempt, its end, what
// the attempts share), and the wiring (internal/orchestrator) gives it
// runner.InProcess.
//
// What a runner process gave for free is kept: each step's runner log
// gets the runner's records and the engine's stderr (JSON records, as
// internal/logging writes them on ECS); an end without a result reaches
// the service as the runner process's exit status would (Spec.OnExit);
// and a reaper (internal/reaper) ends every engine's process group if this
// process dies, SIGKILL included.
package inprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/reaper"
	"github.com/stratusflow/stratus/internal/statedir"
)

// Attempt is one worker's attempt as the launcher hands it to its Runner.
type Attempt struct {
	APIURL   string // launch.Spec.APIURL
	Handle   string // launch.Spec.Handle
	TaskID   string // launch.Spec.TaskID
	Self     string // Launcher.Self: the stratus binary an engine's "{stratus}" runs
	SpoolDir string // launch.Spec.SpoolDir
	// HTTP carries the attempt's calls to the worker API: its transport
	// is Direct(Launcher.Handler).
	HTTP *http.Client
	// Log gets the runner's records: JSON records to the step's runner
	// log (launch.Spec.LogPath); a discarding logger when there is none.
	Log *slog.Logger
	// EngineStderr is where the engine's stderr goes: the step's runner
	// log; nil when there is none (the engine inherits this process's).
	EngineStderr io.Writer
}

// Runner does the work of in-process workers: internal/runner's
// InProcess. Its methods are called from many workers at once.
type Runner interface {
	// Run runs one attempt to its end: nil once its result (report or
	// failure) is delivered, else why not.
	Run(ctx context.Context, a Attempt) error
	// Ended says on log, once, how an attempt ended without a delivered
	// result (err: Run's, or why it never got a slot), as a runner
	// process says it, and returns the exit status that process would
	// have had.
	Ended(log *slog.Logger, err error) (exitCode int)
	// Close releases what the attempts shared (their engine files);
	// StopAll calls it once every worker has ended. The Runner is ready
	// again after Close.
	Close() error
}

// Launcher runs each worker as a goroutine of this process.
type Launcher struct {
	// Handler is the worker API (internal/httpapi), called directly.
	Handler http.Handler
	// Runner runs each worker's attempt (runner.InProcess); Launch fails
	// without one.
	Runner Runner
	// Self is the stratus binary an engine's "{stratus}" runs.
	Self string
	// Reaper, when set, tracks each engine's and command's process group,
	// so that none outlives this process.
	Reaper *reaper.Reaper
	// Slots, when set, bound the workers running at once (shared by every
	// run of a process); nil: no bound.
	Slots *launch.Slots
	// StopGrace bounds how long Stop waits for a worker once its engine
	// is stopped (0: 7 s, as the process launcher's).
	StopGrace time.Duration

	seq     atomic.Uint64
	mu      sync.Mutex
	workers map[string]*worker
	wg      sync.WaitGroup
}

var (
	_ launch.Launcher = (*Launcher)(nil)
	_ launch.InMemory = (*Launcher)(nil)
)

// HandsHandleInMemory is true: a worker here gets its Spec on a goroutine
// of this process, so dispatch gives it the handle itself and no bootstrap
// exchange is made (launch.InMemory).
func (l *Launcher) HandsHandleInMemory() bool { return true }

type worker struct {
	cancel context.CancelCauseFunc // with why it is stopped: the runner's log says it
	done   chan struct{}
}

// ExitError is how a worker's end without a delivered result reaches
// Spec.OnExit: the exit status its runner process would have had
// (Runner.Ended), so the step's failure reads as it does with
// worker.isolation: process.
type ExitError struct {
	Code int
	Err  error // what Runner.Run returned, or why the worker got no slot
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }
func (e *ExitError) Unwrap() error { return e.Err }

// Launch starts the worker of one attempt and returns at once with its id
// ("inproc-N"). It fails only when the launcher has no Runner or the
// step's log file cannot be opened.
func (l *Launcher) Launch(_ context.Context, s launch.Spec) (string, error) {
	if l.Runner == nil {
		return "", errors.New("the in-process launcher has no Runner: the wiring gives it runner.InProcess")
	}
	logf, err := openLog(s.LogPath)
	if err != nil {
		return "", err
	}
	id := fmt.Sprintf("inproc-%d", l.seq.Add(1))
	// The worker belongs to the run, not to the call that launched it.
	ctx, cancel := context.WithCancelCause(reaper.NewContext(context.Background(), l.Reaper))
	w := &worker{cancel: cancel, done: make(chan struct{})}
	l.mu.Lock()
	if l.workers == nil {
		l.workers = map[string]*worker{}
	}
	l.workers[id] = w
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		a := Attempt{APIURL: s.APIURL, Handle: s.Handle, TaskID: s.TaskID, Self: l.Self, SpoolDir: s.SpoolDir,
			HTTP: &http.Client{Transport: Direct(l.Handler)}, Log: logging.Discard()}
		if logf != nil {
			a.Log = logging.JSON(logf, "runner")
			a.EngineStderr = logf
		}
		err := l.run(ctx, s, a)
		var exit error
		if err != nil {
			exit = &ExitError{Code: l.Runner.Ended(a.Log, err), Err: err}
		}
		cancel(nil)
		if logf != nil {
			logf.Close()
		}
		l.mu.Lock()
		delete(l.workers, id)
		l.mu.Unlock()
		close(w.done)
		if s.OnExit != nil {
			s.OnExit(exit)
		}
	}()
	return id, nil
}

// run is one worker's Run, inside a slot when there are Slots.
func (l *Launcher) run(ctx context.Context, s launch.Spec, a Attempt) error {
	if l.Slots != nil {
		if err := l.Slots.Acquire(ctx, launch.Heartbeat(s.Waiting)); err != nil {
			return err
		}
		defer l.Slots.Release()
	}
	return l.Runner.Run(ctx, a)
}

func openLog(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	// In the state dir: the owner's alone (docs/security.md § Files under .stratus).
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirPerm); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, statedir.FilePerm)
}

// Stop stops a worker: its engine is stopped as a runner stops it on
// SIGTERM (docs/contracts.md § Process lifecycle: the process group
// killed), told why
// (launch.StopCause of ctx), and Stop waits for the worker to end, at most
// StopGrace. An ended worker is not an error.
func (l *Launcher) Stop(ctx context.Context, id string) error {
	l.mu.Lock()
	w := l.workers[id]
	l.mu.Unlock()
	if w == nil {
		return nil
	}
	w.cancel(errors.New(launch.StopCause(ctx)))
	grace := l.StopGrace
	if grace == 0 {
		grace = 7 * time.Second
	}
	select {
	case <-w.done:
		return nil
	case <-time.After(grace):
		return fmt.Errorf("worker %s did not end within %s of its stop", id, grace)
	}
}

// StopAll stops every worker still running, telling each why ("" is
// launch.DefaultStopCause), waits for all to end, and has the Runner
// release what they shared (Runner.Close: their engine files).
func (l *Launcher) StopAll(why string) {
	if why == "" {
		why = launch.DefaultStopCause
	}
	l.mu.Lock()
	for _, w := range l.workers {
		w.cancel(errors.New(why))
	}
	l.mu.Unlock()
	l.wg.Wait()
	if l.Runner != nil {
		l.Runner.Close()
	}
}
