package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// Network profiles a pool serves (issue 17 § 4): a node's network_access
// routes its step to the pool of that profile.
const (
	ProfileOffline = "offline" // nodes without network_access
	ProfileOnline  = "online"  // nodes with network_access
)

// Defaults of PoolOptions.
const (
	DefaultPoolVisibility = 60 * time.Second
	DefaultPoolExtend     = 20 * time.Second
)

// PoolOptions configure Pool.
type PoolOptions struct {
	// Queue is the pool's assignment queue (launch.Assignment messages).
	Queue queue.Polled
	// Profile is the pool's network profile, ProfileOffline or
	// ProfileOnline: an assignment of the other is deleted, not run.
	Profile string
	// WorkRoot holds each step's fresh directory ("" = os.TempDir()).
	WorkRoot string
	// Self is the stratus binary substituted for "{stratus}".
	Self string
	// Log gets the pool's records and each step's runner records.
	Log *slog.Logger
	// Wait is each receive's long poll (0: queue.MaxWait, 20 s).
	Wait time.Duration
	// Visibility hides a received assignment from other runners (0:
	// DefaultPoolVisibility); Extend renews it while the step runs (0:
	// DefaultPoolExtend).
	Visibility, Extend time.Duration
	// Grace is how long a step under way may go on once ctx ends (a
	// SIGTERM: a scale-in, a deployment) before its engine is stopped; no
	// assignment is taken after ctx ends. 0: stopped at once.
	Grace time.Duration
	// MaxSteps ends Pool after that many assignments taken (0: never).
	MaxSteps int
	// HTTP carries the runner's calls to the worker API (nil: default).
	HTTP *http.Client
	// Reap, set when the process is the pool's alone (stratus runner
	// pool, after BecomeSubreaper), kills every child process left once a
	// step ended (Reap); never in a process whose other children are not
	// the step's.
	Reap bool
	// OnStep, when set, is called after each assignment this runner ran,
	// with its pickup latency (dispatch's send to the exchange) and Run's
	// error; for tests and figures.
	OnStep func(a launch.Assignment, pickup time.Duration, err error)
}

// Pool is a warm runner (issue 17 § 1, § 3): it long-polls its pool's
// queue and runs each assignment it receives exactly as a cold runner runs
// the environment RunTask gave it (Run), one at a time, until ctx ends (a
// step under way may end within Grace, then is stopped as a cold runner's
// is on SIGTERM) or MaxSteps were taken. For each assignment:
//
//   - It is decoded (launch.DecodeAssignment) and checked against the
//     pool's profile; one that fails either is never run here: it is
//     deleted, with an error record (left in the queue it would keep the
//     pool's scale-out alarm firing until its dead-letter queue took it),
//     and its step, never exchanged, goes cold when dispatch's pickup
//     window ends.
//   - The step gets a fresh directory under WorkRoot: the engine's working
//     directory, HOME and TMPDIR, and where a travelling repository is
//     checked out. The engine's environment holds the step's handle and
//     nothing of the pool's credentials (the caller removes them from the
//     process environment before Pool: cmd/stratus runner pool).
//   - The bootstrap exchange is the pickup: the first runner to exchange
//     wins. Refused (4xx: a cold task, or another runner, exchanged it
//     first, or it expired), the message is deleted and Pool polls again.
//     An exchange that could not be made (the worker API unreachable)
//     hands the message back at once, for another runner or the cold
//     fallback.
//   - While the step runs its message stays in flight (Extend every
//     Extend), so the queue counts this runner busy; once the step ended
//     — delivered, refused, or failed — the message is deleted, the
//     directory removed and (PoolOptions.Reap) every process the step
//     left behind killed, before the next receive. A runner stopped
//     mid-step leaves the message to come back, as a killed one does.
//
// Errors: ctx's end is not one (nil); a receive error is retried with
// backoff; Pool returns an error only for options it cannot run with.
func Pool(ctx context.Context, o PoolOptions) error {
	if o.Queue == nil {
		return errors.New("runner pool: no queue")
	}
	if o.Profile != ProfileOffline && o.Profile != ProfileOnline {
		return fmt.Errorf("runner pool: profile %q; valid: %s (nodes without network access), %s (nodes with it)", o.Profile, ProfileOffline, ProfileOnline)
	}
	if o.Log == nil {
		o.Log = logging.Discard()
	}
	if o.Wait <= 0 || o.Wait > queue.MaxWait {
		o.Wait = queue.MaxWait
	}
	if o.Visibility <= 0 {
		o.Visibility = DefaultPoolVisibility
	}
	if o.Extend <= 0 {
		o.Extend = DefaultPoolExtend
	}
	if o.WorkRoot == "" {
		o.WorkRoot = os.TempDir()
	}
	// A step runs under stepCtx: it outlives ctx by Grace.
	stepCtx, stopSteps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSteps()
	go func() {
		select {
		case <-ctx.Done():
		case <-stepCtx.Done():
			return
		}
		t := time.NewTimer(o.Grace)
		defer t.Stop()
		select {
		case <-t.C:
			stopSteps()
		case <-stepCtx.Done():
		}
	}()
	backoff := time.Duration(0)
	for taken := 0; o.MaxSteps == 0 || taken < o.MaxSteps; {
		if ctx.Err() != nil {
			return nil
		}
		m, ok, err := o.Queue.Receive(ctx, o.Wait, o.Visibility)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			o.Log.Warn(fmt.Sprintf("receive: %v; polling again in %s", err, backoff))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if !ok {
			continue
		}
		if ctx.Err() != nil { // told to stop as the message came: not this runner's
			o.handBack(m)
			return nil
		}
		a, err := launch.DecodeAssignment(m.Body)
		if err != nil {
			o.Log.Error(fmt.Sprintf("deleted a message that is not an assignment (its step, if any, goes cold when dispatch's pickup window ends): %v; the body: %.300q", err, m.Body))
			o.delete(m, a)
			continue
		}
		if a.NetworkAccess != (o.Profile == ProfileOnline) {
			o.Log.Error(fmt.Sprintf("deleted assignment %s: its network_access %v is not this %s pool's; it goes cold when dispatch's pickup window ends", a.TaskID, a.NetworkAccess, o.Profile), "task_id", a.TaskID)
			o.delete(m, a)
			continue
		}
		if o.runAssignment(stepCtx, m, a) {
			taken++
		}
	}
	return nil
}

// runAssignment runs one received assignment; it reports whether this
// runner took the step (exchanged its bootstrap value).
func (o PoolOptions) runAssignment(ctx context.Context, m queue.Message, a launch.Assignment) (took bool) {
	dir, err := os.MkdirTemp(o.WorkRoot, "step-")
	if err != nil {
		o.Log.Error(fmt.Sprintf("assignment %s: a directory for the step: %v; handed back", a.TaskID, err))
		o.handBack(m)
		return false
	}
	defer func() {
		os.RemoveAll(dir)
		if o.Reap {
			Reap()
		}
	}()
	for _, d := range []string{"home", "tmp", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			o.Log.Error(fmt.Sprintf("assignment %s: %v; handed back", a.TaskID, err))
			o.handBack(m)
			return false
		}
	}
	var pickup time.Duration
	keep := make(chan struct{})
	var kept sync.WaitGroup
	opts := Options{APIURL: a.APIURL, Handle: a.Handle, TaskID: a.TaskID, Self: o.Self, Log: o.Log, HTTP: o.HTTP,
		WorkRoot: filepath.Join(dir, "work"), SpoolDir: o.WorkRoot, EngineDir: filepath.Join(dir, "work"), TempDir: filepath.Join(dir, "tmp"),
		EngineEnv: map[string]string{"HOME": filepath.Join(dir, "home"), "TMPDIR": filepath.Join(dir, "tmp")},
		OnExchanged: func(worker.Bootstrapped) {
			took = true
			pickup = time.Since(time.UnixMilli(a.SentAtMS))
			o.Log.Info(fmt.Sprintf("took %s (attempt %d) %d ms after dispatch sent it", a.TaskID, a.Attempt, pickup.Milliseconds()),
				"task_id", a.TaskID, "pickup_ms", pickup.Milliseconds(), "receives", m.Receives)
			kept.Add(1)
			go func() { // the message stays in flight while the step runs
				defer kept.Done()
				t := time.NewTicker(o.Extend)
				defer t.Stop()
				for {
					select {
					case <-keep:
						return
					case <-t.C:
						if err := o.Queue.Extend(context.WithoutCancel(ctx), m.Receipt, o.Visibility); err != nil {
							o.Log.Warn(fmt.Sprintf("keep %s in flight: %v", a.TaskID, err))
						}
					}
				}
			}()
		}}
	err = Run(ctx, opts)
	close(keep)
	kept.Wait()
	var ae *workerclient.APIError
	switch {
	case !took && errors.Is(err, ErrBootstrap) && errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
		o.Log.Info(fmt.Sprintf("%s was not this runner's (%v); polling again", a.TaskID, err), "task_id", a.TaskID)
		o.delete(m, a)
	case !took:
		o.Log.Error(fmt.Sprintf("%s: %v; handed back to the queue", a.TaskID, err), "task_id", a.TaskID)
		o.handBack(m)
	case ctx.Err() != nil:
		// Stopped mid-step (SIGTERM: a scale-in, a redeploy): as if the
		// runner had died, the assignment is left to come back after its
		// visibility timeout, when the next runner is refused its used
		// bootstrap value and deletes it. The step's Task state times out
		// on its heartbeat and is retried, as a cold task's would be.
		o.Log.Warn(fmt.Sprintf("stopped during %s; the step is left to its heartbeat", a.TaskID), "task_id", a.TaskID)
	default:
		if err != nil {
			o.Log.Error(err.Error(), "task_id", a.TaskID)
		}
		o.delete(m, a)
	}
	if o.OnStep != nil && took {
		o.OnStep(a, pickup, err)
	}
	return took
}

func (o PoolOptions) delete(m queue.Message, a launch.Assignment) {
	if err := o.Queue.Delete(context.Background(), m.Receipt); err != nil {
		o.Log.Warn(fmt.Sprintf("delete the assignment of %s: %v (it comes back, and its bootstrap is refused)", a.TaskID, err))
	}
}

// handBack makes a message visible again almost at once (the shortest
// visibility, 1 s), for another runner or the cold fallback.
func (o PoolOptions) handBack(m queue.Message) {
	if err := o.Queue.Extend(context.Background(), m.Receipt, time.Second); err != nil {
		o.Log.Warn(fmt.Sprintf("hand an assignment back: %v", err))
	}
}
