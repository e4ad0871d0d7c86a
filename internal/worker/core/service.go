package core

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/task"
)

// RunEnv is what the service needs to know about a run beyond its store
// record: the validated flow, the directory its role files resolve in, the
// task and the configuration.
type RunEnv struct {
	Flow    *flow.Flow
	FlowDir string // DIR/.stratus/flows: role_file paths resolve here
	Task    *task.Task
	Config  *config.Config
	// ToolsDir is the tool registry tool nodes run from: the run's frozen
	// copy of DIR/.stratus/tools (worc WRI-010: prompts and tools are frozen
	// per run, so an edit mid-run, or by a workspace-write agent, does not
	// reach a later step); "" = <work dir>/.stratus/tools, read live.
	ToolsDir string
	// EngineFiles maps each arg or env value of a provider's launch spec
	// that names a file (runenv: frozen with the run) to the frozen copy's
	// path here; the prompt payload carries those files to the worker
	// (EngineSpec.Files), which needs nothing from the operator's disk.
	EngineFiles map[string]string
}

// Event types reported to Service.OnEvent.
const (
	EventStepStarted = "step_started"
	EventStepEnded   = "step_ended"
	// EventStepProgress is a running attempt's counters as its runner
	// posts them (POST /v1/worker/stats: as the engine's agent_step and
	// usage lines stream, and every heartbeat interval while it is
	// silent): Steps, the tokens and cost so far, Duration = elapsed since
	// the attempt started (pinned by TestRecordStats_ReportsProgress).
	EventStepProgress = "step_progress"
)

// Event is one line of live progress: what `stratus run` prints and
// `--json` streams (README.md § Live progress).
type Event struct {
	Type             string
	At               time.Time
	RunID            string
	Node             string
	StepRef          string
	TID              string // the step's dispatch task id (a key, not shown)
	Attempt          int
	Terminal         string // docs/contracts.md § Terminal classification; "" for non-worker steps
	Outcome          string // accept/rework for evaluators, done/skipped otherwise
	Reason           string
	Duration         time.Duration
	Steps            int // agent steps so far (progress)
	PromptTokens     int64
	CompletionTokens int64
	CostUSD          *float64
}

// Config is how a Service is wired: its ports and its settings. All fields
// are required except OnEvent, Publish and Now.
type Config struct {
	// CanLaunch, when set, reports whether a provider of cfg can start an
	// engine where this service launches workers (embedded: this
	// machine); the retry policy falls back only to one that can
	// (Service.policy). nil: every allowed provider can (AWS: the runner
	// image holds the engines).
	CanLaunch func(cfg *config.Config, provider string) bool

	// RunID is the one run this service's API serves (embedded: each run
	// serves its own worker API, though the runs of a work dir share its
	// store and HMAC key); "" serves every run of the store (AWS: one API
	// for all runs). A credential of another run is refused
	// (docs/security.md § Handles).
	RunID    string
	Store    store.Store
	Sink     sink.Sink
	Tokens   executor.TaskTokens
	Launcher launch.Launcher
	Minter   *captoken.Minter
	APIURL   string // what workers are told to call
	// Env returns the RunEnv of a run (ENOTFOUND when unknown).
	Env func(ctx context.Context, runID string) (*RunEnv, error)
	// Publish runs a publish node: writes the run's summary. It returns the
	// paths written (sink keys).
	Publish func(ctx context.Context, run stratus.Run, env *RunEnv) ([]string, error)
	OnEvent func(Event)
	// DiskFull, when set, is told of a write the disk refused
	// (stratus.StorageFull) where the service would otherwise fail the
	// step's Task state: a submit's output that did not persist
	// (notPersisted), a publish's summary or its completed record. err
	// names the step and the write. The step's state is then not told:
	// the caller stops the run — embedded, interrupted and resumable once
	// space is freed, the step run again (docs/security.md § Output that
	// did not persist). nil (AWS, whose store and sink are not a disk): the
	// step fails and its state is told so.
	DiskFull func(err error)
	// Queue takes the work a request must not wait for — a supervisor
	// observation turn, whose launch may retry for minutes — as a KindObserve
	// dispatch message: on AWS the dispatch queue, whose function runs it
	// (Dispatch); embedded, a queue/local whose handler calls Dispatch. nil: a
	// goroutine of this process, which Drain waits for.
	Queue queue.Queue
	// Log gets the service's warnings (an unknown submit_format, a
	// supervisor turn that failed, ...) as slog records (internal/logging):
	// JSON in a Lambda, the operator's sentences embedded. nil: none.
	Log *slog.Logger

	// ResolveFiles lets the server resolve an `@file:<abs-path>` body itself,
	// for paths inside the run's work dir only (embedded mode). When false
	// (AWS) such a body is refused: the worker resolves the sentinel.
	ResolveFiles bool
	// MaxBodyBytes bounds a submitted body or part, bytes (0 = no bound here;
	// the HTTP layer enforces its own limit before reading further).
	MaxBodyBytes int64
	// MaxUploadBytes bounds a body sent through an upload, bytes (0:
	// DefaultMaxUploadBytes); see upload.go for the limits of each runtime.
	MaxUploadBytes int64
	Now            func() time.Time
	// ReplyFlags are the flags the reply commands a waiting gate prints
	// need to reach the run from the operator's shell ("--dir DIR" when
	// the work dir is not its working directory); "" none.
	ReplyFlags string
	// Commits checks every move of a run's workspace head before it is
	// recorded (docs/security.md § Workspace commits); nil refuses every
	// move (EINTERNAL). The worker API sets it (workspace/bundlecheck);
	// what serves no worker API (the dispatch and events functions) need
	// not link it.
	Commits CommitChecker
	// WatchWorkDir: for a run whose repository travels (Run.Workspace)
	// while its engines run on this machine (embedded, workspace:
	// worktree), the operator's work dir is stamped before each worker
	// starts, and a worker that reports after a file of it changed fails
	// its step naming the files (docs/security.md § Workspace commits): its
	// engine works in a checkout of its own and must not write there. Off
	// on AWS, where no worker has that disk.
	WatchWorkDir bool
	// LocalLogs, when set, is the directory (absolute) under which runner logs
	// are written in embedded mode: <LocalLogs>/<task_id>/stages/<node>/run-NNNNNN/runner.log.
	LocalLogs string
}

// Service is the worker service's shared context: its Config (the ports:
// store, sink, task tokens, launcher, minter, clock, logger) and the state
// its operations share in this process. The operations (the packages
// beside this one under internal/worker) take it as their first argument;
// the facade (internal/worker) wires them onto it.
type Service struct {
	Config

	notes sync.Map // run id + "\x00" + note kind → said (noteOnce)
	// RunTrees keeps each run's work tree and diff base (run id →
	// runTree); WarnedFacts the unknown `when` facts already warned about
	// (factKey). Fields, not package state: a host's services (one per
	// run) are freed with their runs.
	RunTrees, WarnedFacts sync.Map
	watched               sync.Map // watchKey → watchStart

	mu       sync.Mutex
	workers  map[string]string // tid -> launcher id
	roleMeta sync.Map          // flowDir\x00role_file -> the role file's submit_format
	// Layers: see Layers.
	Layers Layers

	Supervisor SupervisorState // the supervisor layer's in-flight work (internal/worker/supervise)
	// staging serializes the stagings of one attempt in this process
	// (striped by task id, so it needs no cleanup): the case check reads
	// the names staged so far and must not interleave with another
	// staging of the same attempt (stageArtifact).
	staging [32]sync.Mutex
	// hitl serialises, in this process, the completion of waiting steps
	// (a reply racing the deadline's timer); across processes the
	// conditional write of Human decides (hitl.go).
	gates sync.Mutex
}

// LockGates serialises, in this process, the completion of waiting steps
// (a human's reply racing the deadline's timer); across processes the
// conditional write of the reply decides. It returns the unlock.
func (s *Service) LockGates() (unlock func()) {
	s.gates.Lock()
	return s.gates.Unlock
}

// Files returns the sink of run's work-dir Files: its ctx dir, its logs
// and its report dir (sink.ForRun: on a stack's bucket, under the run, so
// that runs of one task id never share one; embedded, the work dir's sink
// itself). The run's workspace bundles and uploads are Sink's own keys.
func (s *Service) Files(run stratus.Run) sink.Sink { return sink.ForRun(s.Sink, run.ID) }

// NowUTC is the service's clock (Config.Now, else the system's) in UTC.
func (s *Service) NowUTC() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// NoteOnce reports whether note kind of run runID is said for the first
// time by this Service.
func (s *Service) NoteOnce(runID, kind string) bool {
	_, seen := s.notes.LoadOrStore(runID+"\x00"+kind, true)
	return !seen
}

// ReportDiskFull tells DiskFull of err when it is a write the disk refused, and
// reports whether it did (false: DiskFull is nil, or err is another
// error, which the caller handles as before).
func (s *Service) ReportDiskFull(err error) bool {
	if s.DiskFull == nil || !stratus.StorageFull(err) {
		return false
	}
	s.DiskFull(err)
	return true
}

// Warnf logs a warning about the service (not about one step: WarnCall) on
// Config.Log, formatted as fmt.Sprintf does; nothing without a Log.
func (s *Service) Warnf(format string, args ...any) {
	if s.Log != nil {
		s.Log.Warn(fmt.Sprintf(format, args...))
	}
}

// WarnCall is warnf about the step of c: the record carries its run_id,
// step_ref and attempt.
func (s *Service) WarnCall(c *Caller, format string, args ...any) {
	if s.Log != nil {
		logging.Step(s.Log, c.Run.ID, c.Step.StepRef, c.Attempt.N).Warn(fmt.Sprintf(format, args...))
	}
}

// Emit reports e: it ends the work-dir watch of e's task when the event
// ends a step or a supervisor turn, hands e to Config.OnEvent (its At set
// to now when zero) and, for a step_ended event, to the supervisor layer
// (Layers.StepEnded: the prompt audit, the observation decision).
func (s *Service) Emit(e Event) {
	if e.Type == EventStepEnded || e.Type == EventSupervisorEnded {
		s.watchDone(e.TID)
	}
	if s.OnEvent != nil {
		if e.At.IsZero() {
			e.At = s.NowUTC()
		}
		s.OnEvent(e)
	}
	if e.Type == EventStepEnded && s.Layers.StepEnded != nil {
		s.Layers.StepEnded(e) // prompt audit, observe decision (internal/worker/supervise)
	}
}

// Layers are the parts of the service above this package that the shared
// context calls back into: the supervisor layer, which reacts to the end
// of every step and launches turns whose failures it handles itself. New
// (internal/worker) sets them; nil: no supervisor layer.
type Layers struct {
	// StepEnded is told of every step_ended event, after OnEvent: the
	// prompt audit and the observation decision.
	StepEnded func(Event)
	// SupervisorFailed fails an attempt of a supervisor turn (a step of
	// kind SupervisorKind) where a worker's attempt would fail its step.
	SupervisorFailed func(ctx context.Context, c *Caller, att stratus.Attempt, f Failure, reason string) (*StepValue, error)
}

// StepContext loads a step with its run and env.
func (s *Service) StepContext(ctx context.Context, tid string) (stratus.Step, stratus.Run, *RunEnv, error) {
	st, err := s.Store.GetStep(ctx, tid)
	if err != nil {
		return st, stratus.Run{}, nil, err
	}
	run, err := s.Store.GetRun(ctx, st.RunID)
	if err != nil {
		return st, run, nil, err
	}
	env, err := s.Env(ctx, run.ID)
	if err != nil {
		return st, run, nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	return st, run, env, nil
}

// RememberWorker records id, the launcher's id of the worker of dispatch
// task tid, so that StopWorker can stop it later from this process.
func (s *Service) RememberWorker(tid, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers == nil {
		s.workers = map[string]string{}
	}
	s.workers[tid] = id
}

// StopWorker stops the worker of tid if one is known (docs/architecture.md
// § The path of one step, 10: a Catch on a timed-out worker state stops its
// task).
func (s *Service) StopWorker(ctx context.Context, tid string) error {
	s.mu.Lock()
	id := s.workers[tid]
	delete(s.workers, tid)
	s.mu.Unlock()
	if id == "" {
		return nil
	}
	return s.Launcher.Stop(ctx, id)
}

// LogTail returns the last n non-empty lines of a log file, joined by " | ".
func LogTail(path string, n int) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range logging.Lines(strings.TrimSpace(string(b))) {
		// The runner's own records (internal/logging) say what the step's
		// reason already says; the engine's stderr is what is new.
		if l = strings.TrimSpace(l); l != "" && !logging.IsRecord(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// LockStaging takes the staging lock of task tid's stripe and returns
// its release.
func (s *Service) LockStaging(tid string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(tid))
	mu := &s.staging[h.Sum32()%uint32(len(s.staging))]
	mu.Lock()
	return mu.Unlock
}

// Progress events of the retry policy.
const (
	// EventStepRetrying: an attempt failed transiently and the step goes
	// on with another attempt (Reason says on which provider, and when).
	EventStepRetrying = "step_retrying"
	// EventStepParked: every provider the step may run on is unavailable
	// or rate-limited; the step waits (Reason says why and until when).
	EventStepParked = "step_parked"
)
