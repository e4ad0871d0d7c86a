// Package pool launches workers on a warm runner pool
// (README.md § Warm runners (pool mode)): the dispatch side of pool mode. A
// step's assignment (launch.Assignment: the API URL, the one-time bootstrap
// value, the task id) goes to the queue of the node's network profile, where
// a pooled runner — an ECS service's task, or `stratus runner pool` on any
// host — long-polls for it, in place of an ecs:RunTask that would wait 30–90
// s for a cold Fargate task.
//
// Nothing is lost in the queue (README.md § Warm runners (pool mode)):
//
//   - While the assignment waits, Launch calls Spec.Waiting when the
//     wait starts and every Heartbeat after (dispatch heartbeats the
//     step's task token), so the step does not time out queued.
//   - A runner picks an assignment up by exchanging its bootstrap value
//     for the step's handle, which works once (worker.Service.
//     ExchangeBootstrap, store.Store.TakeHandle). Launch watches for the
//     exchange (Config.Taken) and returns once it happened.
//   - If no runner takes it within Pickup (default 20 s), Launch falls
//     back to the cold launcher (RunTask) with the same spec. The
//     bootstrap still works once, so whichever of the cold task and a
//     late pooled runner exchanges it first runs the step; the other is
//     refused and ends (the cold runner with an error, the pooled one
//     deletes the message and polls again). The step never runs twice.
//   - A profile without a queue, or a queue that refuses the send, goes
//     cold at once.
//   - A publisher (launch.Spec.Publisher) always goes cold: its task
//     definition alone holds the git credential, which no pooled runner
//     has (docs/architecture.md § Publishing).
//
// Stop of a pooled worker does nothing here: a pooled runner learns its
// step is gone when the worker API refuses its next stats post or heartbeat
// (409, within the runner's heartbeat interval) and stops its engine, as
// a cold runner does (internal/runner).
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/queue"
)

// Defaults of Config.
const (
	DefaultPickup    = 20 * time.Second
	DefaultPoll      = 200 * time.Millisecond
	DefaultHeartbeat = 5 * time.Second
)

// IDPrefix starts the id Launch returns for a worker a pooled runner took
// ("pool:" + task id); any other id is the cold launcher's.
const IDPrefix = "pool:"

// Config is a pool launcher's.
type Config struct {
	// Offline and Online are the assignment queues of the two network
	// profiles (nodes without and with network_access); nil: no pool for
	// that profile, its steps go cold.
	Offline, Online queue.Queue
	// Cold launches a worker when no pooled runner takes the step in time
	// (on AWS the ECS launcher: RunTask). Required.
	Cold launch.Launcher
	// Taken reports whether the bootstrap value a spec carries has been
	// exchanged (a runner owns the step). Required.
	Taken func(ctx context.Context, bootstrap string) (bool, error)
	// Pickup bounds the wait for a pooled runner (0: DefaultPickup).
	Pickup time.Duration
	// Poll is how often Taken is asked (0: DefaultPoll).
	Poll time.Duration
	// Heartbeat is how often Spec.Waiting is called while the assignment
	// waits (0: DefaultHeartbeat).
	Heartbeat time.Duration
	// Now gives the time an assignment is sent (nil: time.Now).
	Now func() time.Time
	// Log gets a record for each fallback to the cold path (nil: none).
	Log *slog.Logger
}

// Launcher is launch.Launcher over a warm runner pool.
type Launcher struct{ c Config }

var (
	_ launch.Launcher    = (*Launcher)(nil)
	_ launch.TaskStopper = (*Launcher)(nil)
)

// New returns a pool launcher. Errors: Cold or Taken missing.
func New(c Config) (*Launcher, error) {
	if c.Cold == nil || c.Taken == nil {
		return nil, errors.New("pool: a pool launcher needs Cold (the cold path) and Taken (the pickup check)")
	}
	if c.Pickup <= 0 {
		c.Pickup = DefaultPickup
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Launcher{c: c}, nil
}

// Launch sends s as an assignment to its profile's pool and returns
// IDPrefix+s.TaskID once a pooled runner took it; after Pickup without a
// taker, or when the profile has no pool or its queue refuses the send, it
// returns the cold launcher's Launch of s. A publisher's spec goes to the
// cold launcher at once, never queued. Errors: the cold launcher's;
// Taken's when the pickup cannot be checked; launch.ErrStepGone when
// Spec.Waiting says the step no longer waits (its execution ended while
// the assignment waited: nothing is started for it); ctx's.
func (l *Launcher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	q := l.c.Offline
	if s.NetworkAccess {
		q = l.c.Online
	}
	if q == nil || s.Publisher {
		return l.c.Cold.Launch(ctx, s)
	}
	a := launch.Assignment{APIURL: s.APIURL, Handle: s.Handle, TaskID: s.TaskID, Attempt: s.Attempt,
		NetworkAccess: s.NetworkAccess, SentAtMS: l.c.Now().UnixMilli()}
	if err := q.Send(ctx, a.Encode()); err != nil {
		l.warn(fmt.Sprintf("the assignment of %s could not be queued (%v); a cold worker runs it", s.TaskID, err), s)
		return l.c.Cold.Launch(ctx, s)
	}
	// The wait starts with a heartbeat: the step's state has been waiting
	// since before this dispatch was delivered.
	if err := waiting(s); err != nil {
		return "", err
	}
	poll := time.NewTicker(l.c.Poll)
	defer poll.Stop()
	beat := time.NewTicker(l.c.Heartbeat)
	defer beat.Stop()
	deadline := time.NewTimer(l.c.Pickup)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-beat.C:
			if err := waiting(s); err != nil {
				return "", err
			}
		case <-poll.C:
			taken, err := l.c.Taken(ctx, s.Handle)
			if err != nil {
				return "", fmt.Errorf("pool: has a runner taken %s? %w", s.TaskID, err)
			}
			if taken {
				return IDPrefix + s.TaskID, nil
			}
		case <-deadline.C:
			// One last look: a runner may have taken it since the last tick.
			if taken, err := l.c.Taken(ctx, s.Handle); err == nil && taken {
				return IDPrefix + s.TaskID, nil
			}
			l.warn(fmt.Sprintf("no pooled runner took %s within %s; a cold worker runs it (a late pooled runner is refused)", s.TaskID, l.c.Pickup), s)
			return l.c.Cold.Launch(ctx, s)
		}
	}
}

// waiting heartbeats s's step; an error means it no longer waits for a
// worker: no cold task is started for it (a late pooled runner is refused
// its state's end all the same).
func waiting(s launch.Spec) error {
	if s.Waiting == nil {
		return nil
	}
	if err := s.Waiting(); err != nil {
		return fmt.Errorf("pool: %s: %w (%v)", s.TaskID, launch.ErrStepGone, err)
	}
	return nil
}

func (l *Launcher) warn(msg string, s launch.Spec) {
	if l.c.Log != nil {
		l.c.Log.Warn(msg, "task_id", s.TaskID, "attempt", s.Attempt)
	}
}

// Stop stops a cold worker through the cold launcher; a pooled worker's
// id is not an error and stops nothing (the runner's fence ends it: see
// the package doc).
func (l *Launcher) Stop(ctx context.Context, id string) error {
	if strings.HasPrefix(id, IDPrefix) {
		return nil
	}
	return l.c.Cold.Stop(ctx, id)
}

// StopTask stops the cold workers of taskID when the cold launcher can
// (launch.TaskStopper); none is not an error.
func (l *Launcher) StopTask(ctx context.Context, taskID string) error {
	if ts, ok := l.c.Cold.(launch.TaskStopper); ok {
		return ts.StopTask(ctx, taskID)
	}
	return nil
}
