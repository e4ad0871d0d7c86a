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

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// Network profiles a pool serves (README § Warm runners (pool mode)): a
// node's network_access routes its step to the pool of that profile.
const (
	ProfileOffline = "offline" // nodes without network_access
	ProfileOnline  = "online"  // nodes with network_access
)

// ErrPoolSetup wraps why Pool cannot run, or stopped: a work root it
// cannot write, an assignment of the other network profile (the runner
// polls the wrong queue). The command exits with a usage status.
var ErrPoolSetup = errors.New("runner pool")

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
	// Force, when it closes after ctx ended (a second SIGTERM or Ctrl-C),
	// ends the grace at once.
	Force <-chan struct{}
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

// Pool is a warm runner (README § Warm runners (pool mode)): it
// long-polls its pool's queue and runs each assignment it receives
// exactly as a cold runner runs the environment RunTask gave it (Run), one
// at a time, until ctx ends (a step under way may end within Grace, then
// is stopped as a cold runner's is on SIGTERM) or MaxSteps were taken.
// For each assignment:
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
//     left behind killed, before the next receive. A step still under
//     way when ctx ends has Grace to end; then its engine is stopped and
//     the step reported failed (the run stops there, to be resumed).
//
// Pool does not start with a work root it cannot write, and stops at a
// step directory it cannot make or an assignment of the other profile
// (the wrong queue): each would otherwise bounce every assignment it
// took. These errors wrap ErrPoolSetup.
//
// A step whose report could not be delivered (spooled: Run's ErrSpooled)
// stops the pool: its worker API is out of reach, and every further step
// would end the same way.
//
// Errors: ctx's end is not one (nil); ErrPoolSetup's; ErrSpooled (wrapped,
// naming the spool file) after a spooled report; a receive error
// that will not pass (a coded *stratus.Error: a queue that does not
// exist, credentials refused); other receive errors are retried with
// backoff.
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
	// A runner that cannot make a step's directory would take assignment
	// after assignment only to hand each back, until the queue's
	// dead-letter queue held them all: it does not start.
	probe, err := os.MkdirTemp(o.WorkRoot, "probe-")
	if err != nil {
		return fmt.Errorf("%w: the work root %s cannot hold a step's directory: %v", ErrPoolSetup, o.WorkRoot, err)
	}
	os.Remove(probe)
	// A step runs under stepCtx: it outlives ctx by Grace.
	stepCtx, stopSteps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSteps()
	go func() {
		select {
		case <-ctx.Done():
		case <-stepCtx.Done():
			return
		}
		if o.Grace > 0 {
			o.Log.Info(fmt.Sprintf("stopping: no more assignments; a step under way has %s to end (stop again to end it now)", o.Grace))
		}
		t := time.NewTimer(o.Grace)
		defer t.Stop()
		select {
		case <-t.C:
			stopSteps()
		case <-o.Force:
			o.Log.Info("stopping now: a step under way is stopped")
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
			if stratus.ErrorCode(err) != "" {
				return fmt.Errorf("receive from the pool's queue: %w", err)
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
			// The queue is the other profile's: this runner is pointed at
			// the wrong queue. The assignment goes back to the runners it
			// is for, and this one stops rather than keep taking theirs.
			o.handBack(m)
			want := ProfileOffline
			if a.NetworkAccess {
				want = ProfileOnline
			}
			return fmt.Errorf("%w: %s has network_access %v, a step for the %s pool, but this runner serves --profile %s: is --queue the %s pool's queue? (the assignment was handed back)",
				ErrPoolSetup, a.TaskID, a.NetworkAccess, want, o.Profile, o.Profile)
		}
		took, err := o.runAssignment(stepCtx, m, a)
		if err != nil {
			return err
		}
		if took {
			taken++
		}
	}
	return nil
}

// runAssignment runs one received assignment; it reports whether this
// runner took the step (exchanged its bootstrap value). An error (a step
// directory it cannot make: a full disk, a work root gone) stops the pool,
// the assignment handed back.
func (o PoolOptions) runAssignment(ctx context.Context, m queue.Message, a launch.Assignment) (took bool, _ error) {
	dir, err := os.MkdirTemp(o.WorkRoot, "step-")
	if err != nil {
		o.handBack(m)
		return false, fmt.Errorf("%w: a directory for step %s under %s: %v (the assignment was handed back)", ErrPoolSetup, a.TaskID, o.WorkRoot, err)
	}
	defer func() {
		os.RemoveAll(dir)
		if o.Reap {
			Reap()
		}
	}()
	for _, d := range []string{"home", "tmp", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			o.handBack(m)
			return false, fmt.Errorf("%w: a directory for step %s: %v (the assignment was handed back)", ErrPoolSetup, a.TaskID, err)
		}
	}
	var pickup time.Duration
	var handle string
	keep := make(chan struct{})
	var kept sync.WaitGroup
	opts := Options{APIURL: a.APIURL, Handle: a.Handle, TaskID: a.TaskID, Self: o.Self, Log: o.Log, HTTP: o.HTTP,
		WorkRoot: filepath.Join(dir, "work"), SpoolDir: SpoolDirFor(o.WorkRoot), EngineDir: filepath.Join(dir, "work"), TempDir: filepath.Join(dir, "tmp"),
		EngineEnv: map[string]string{"HOME": filepath.Join(dir, "home"), "TMPDIR": filepath.Join(dir, "tmp")},
		OnExchanged: func(b worker.Bootstrapped) {
			took, handle = true, b.Handle
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
		// Stopped mid-step (SIGTERM and its grace ran out: a scale-in, a
		// deployment): the step fails now, said by its own handle — a
		// cold runner's end is reported by ECS's task-stopped event, a
		// pooled runner's by nobody else — rather than when its heartbeat
		// window lapses.
		reason := fmt.Sprintf("the pooled runner was stopped (SIGTERM) before %s ended, and its grace ran out", a.TaskID)
		c := &workerclient.Client{BaseURL: a.APIURL, Credential: handle, HTTP: o.HTTP, Retries: 1}
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if ferr := c.Fail(fctx, a.TaskID, ownFailure(reason)); ferr != nil {
			o.Log.Warn(fmt.Sprintf("%s; its failure could not be reported (%v): the step ends when its heartbeat window lapses", reason, ferr), "task_id", a.TaskID)
		} else {
			o.Log.Warn(reason+"; reported failed", "task_id", a.TaskID)
		}
		cancel()
		o.delete(m, a)
	default:
		if err != nil {
			o.Log.Error(err.Error(), "task_id", a.TaskID)
		}
		o.delete(m, a)
	}
	if o.OnStep != nil && took {
		o.OnStep(a, pickup, err)
	}
	if took && errors.Is(err, ErrSpooled) {
		// The worker API did not take this step's report: the next
		// step's would go the same way, each spooled on this host and its
		// step left to time out. The pool stops (README § Warm runners (pool mode)).
		return took, fmt.Errorf("stopped taking steps: %s's %w", a.TaskID, err)
	}
	return took, nil
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
