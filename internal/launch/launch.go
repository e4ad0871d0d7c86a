// Package launch defines how a worker is started for one attempt: on AWS an ECS
// RunTask with the handle and API URL as environment overrides, in embedded
// mode a local `stratus runner` subprocess with the same environment
// (docs/architecture.md § The path of one step, step 4). The worker never
// receives the task token or any AWS credential: only what Spec carries.
package launch

import (
	"context"
	"errors"
	"time"
)

// Environment variables a worker receives.
const (
	EnvAPIURL = "STRATUS_API_URL" // base URL of the worker API, no trailing slash
	EnvHandle = "STRATUS_HANDLE"  // the attempt's wh- handle (Bearer value)
	EnvTaskID = "STRATUS_TASK_ID" // the dispatch task id
	// EnvAttempt is the attempt number a worker task was launched for:
	// the runner does not read it (its exchange says it); a task's stop
	// event carries it back (awsapp.TaskStopped).
	EnvAttempt = "STRATUS_ATTEMPT"
	// EnvParentPID, when set, is the pid of the process that started the
	// runner and owns its run (embedded mode): the runner stops its engine
	// and exits once its parent is no longer that process.
	EnvParentPID = "STRATUS_PARENT_PID"
	// EnvStratus, when set, is the stratus binary a runner substitutes for
	// "{stratus}" in an engine's launch spec: the small stratus-runner
	// binary is not it (unset: the runner's own executable).
	EnvStratus = "STRATUS_BIN"
	// EnvSpoolDir, when set, is where the runner keeps a report the
	// worker API did not take (Spec.SpoolDir); unset, a directory of the
	// runner's user under the temporary directory.
	EnvSpoolDir = "STRATUS_SPOOL_DIR"
	// GitTokenEnv is the git host token of the publisher
	// (Spec.Publisher), the one worker that pushes the task branch and
	// opens its pull request (docs/architecture.md § Publishing). On AWS
	// only the publisher task definition's container gets it, from the
	// Secrets Manager secret template.yaml's GitTokenSecretArn names; it is
	// never a RunTask override, an assignment or an engine's variable.
	GitTokenEnv = "STRATUS_GIT_TOKEN"
)

// Environment variables the runner always sets for the engine: the
// attempt's resolved per-node overrides
// (docs/contracts.md § Per-node overrides). An empty model or reasoning means
// the engine's own default.
const (
	EnvModel             = "STRATUS_MODEL"
	EnvReasoning         = "STRATUS_REASONING"
	EnvPermissionProfile = "STRATUS_PERMISSION_PROFILE" // read-only | workspace-write
	EnvNetworkAccess     = "STRATUS_NETWORK_ACCESS"     // true | false
)

// Spec is what one worker needs.
type Spec struct {
	APIURL  string
	Handle  string
	TaskID  string // dispatch task id
	Attempt int
	LogPath string // embedded mode: where the runner's stdout/stderr go ("" = discard)
	// SpoolDir, embedded, is a directory of the state dir, the operator's
	// alone, where the runner keeps a report the worker API did not take
	// (docs/security.md § Files under .stratus); "" = the runner's own
	// per-user spool directory (ECS and pooled runners, with no state dir).
	SpoolDir string
	// NetworkAccess is the node's resolved network grant
	// (docs/contracts.md § Per-node overrides: network_access). On AWS it
	// chooses the ECS network profile: online subnets and security group, or
	// the offline ones that reach only the worker API.
	NetworkAccess bool
	// Publisher marks the worker of a publish node: the one worker that
	// holds the git credential (docs/architecture.md § Publishing). On AWS
	// it runs the publisher task definition, whose container alone gets
	// the token secret, on the online network profile, and never goes to a
	// warm pool (a pooled runner holds no credential); embedded the runner
	// reads the token from the operator's environment.
	Publisher bool
	// OnExit, when set, is called once the worker has ended, with its exit
	// error (nil for status 0). The server uses it to fail an attempt whose
	// worker died without a result, instead of waiting for the heartbeat to
	// lapse (on AWS the ECS task-stopped event plays this part).
	OnExit func(err error)
	// Waiting, when set, is called each time a launch waits (to try again
	// under throttling or for capacity, for a slot, for a pooled runner):
	// the dispatcher heartbeats the step's task token, so a launch that
	// waits for minutes does not time the step out. An error says the step no
	// longer waits for a worker (its state timed out, its execution ended): a
	// launcher that can stops launching and returns ErrStepGone.
	Waiting func() error
}

// ErrInfrastructure marks (errors.Is) a Launch that failed for want of
// capacity or under throttling after the launcher's own retries: an
// infrastructure failure, not the step's. Dispatch reports it as
// compiler.ErrInfrastructure, which parks the run at
// manual_action_required and is never charged to a rework budget.
var ErrInfrastructure = errors.New("infrastructure failure")

// ErrStepGone marks (errors.Is) a Launch given up because Spec.Waiting
// said the step no longer waits for a worker: nothing is started for it.
var ErrStepGone = errors.New("the step no longer waits for a worker")

// TaskStopper is implemented by a Launcher that can find and stop the
// worker of a dispatch task by its id alone, without the id Launch
// returned: on AWS the dispatch invocation that handles a stop message is
// not, in general, the one that launched the worker (internal/launch/ecs).
type TaskStopper interface {
	// StopTask stops every worker still running for taskID; none is not
	// an error.
	StopTask(ctx context.Context, taskID string) error
}

// InMemory is implemented by a Launcher whose workers get their Spec in
// this process's memory, with no environment, task definition or queue
// message between (the in-process twin, docs/contracts.md § The in-process
// twin): dispatch hands such a worker its wh- handle itself, and the
// worker skips the one-time bootstrap exchange, which exists for a launch
// whose environment others can read (docs/contracts.md § Bearer
// authentication).
type InMemory interface {
	// HandsHandleInMemory says the launcher's workers get Spec.Handle in
	// memory only.
	HandsHandleInMemory() bool
}

// Launcher starts workers. Launch returns once the worker is started (not
// finished) with an id Stop accepts; it returns an error when it could not
// be started, which the caller reports as an infrastructure failure.
type Launcher interface {
	Launch(ctx context.Context, s Spec) (id string, err error)
	// Stop ends a worker: a graceful stop first (SIGTERM, so the runner can
	// stop its engine), then a kill after a grace. Best effort; a finished
	// worker is not an error. Why it is stopped rides on ctx
	// (WithStopCause), for the worker's log to say.
	Stop(ctx context.Context, id string) error
}

type stopCauseKey struct{}

// WithStopCause returns ctx carrying why a worker is stopped ("the run
// was interrupted", "the run's execution ended FAILED"), for
// Launcher.Stop to hand on: the step's runner log then says what stopped
// it, never a bare "context canceled".
func WithStopCause(ctx context.Context, why string) context.Context {
	return context.WithValue(ctx, stopCauseKey{}, why)
}

// StopCause is the why WithStopCause put on ctx; DefaultStopCause when
// there is none.
func StopCause(ctx context.Context) string {
	if why, _ := ctx.Value(stopCauseKey{}).(string); why != "" {
		return why
	}
	return DefaultStopCause
}

// DefaultStopCause is what a worker stopped without a stated cause is
// told.
const DefaultStopCause = "its worker was stopped"

// Heartbeat is waiting (a Spec.Waiting) as a plain call, its error
// dropped, for a wait that cannot be given up (a slot's, whose place in
// line is kept); nil stays nil.
func Heartbeat(waiting func() error) func() {
	if waiting == nil {
		return nil
	}
	return func() { _ = waiting() }
}

// SlotWaitHeartbeat is how often a worker waiting for a slot says so, so a
// step queued behind others does not time out.
var SlotWaitHeartbeat = 20 * time.Second

// Slots bound how many workers of a process run at once, across every run
// it hosts (worker.max_concurrent_engines), whichever launcher starts them. A
// worker over the bound waits for a slot, first come first served: the
// waiting goroutines of a channel send are woken in the order they came.
type Slots struct{ ch chan struct{} }

// NewSlots returns n slots (n < 1 is 1).
func NewSlots(n int) *Slots { return &Slots{ch: make(chan struct{}, max(n, 1))} }

// Acquire takes a slot, calling waiting (Spec.Waiting: the dispatcher
// heartbeats the step's task token) every SlotWaitHeartbeat while it waits;
// it returns ctx's error if ctx ends first. The wait is one blocked send
// from start to end, so its place in the queue is kept.
func (s *Slots) Acquire(ctx context.Context, waiting func()) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	default:
	}
	got := make(chan struct{})
	go func() {
		s.ch <- struct{}{}
		close(got)
	}()
	t := time.NewTicker(SlotWaitHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-got:
			return nil
		case <-ctx.Done():
			go func() {
				<-got // the slot, once it comes, goes to the next in line
				s.Release()
			}()
			return ctx.Err()
		case <-t.C:
			if waiting != nil {
				waiting()
			}
		}
	}
}

// Release gives a slot back.
func (s *Slots) Release() { <-s.ch }
