package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/doctor"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/inprocess"
	"github.com/stratusflow/stratus/internal/launch/local"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/projection"
	localqueue "github.com/stratusflow/stratus/internal/queue/local"
	"github.com/stratusflow/stratus/internal/reaper"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runner"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
)

// session is one process's hold on one embedded run: the work dir's store
// and sink, the run's frozen environment and compiled definition, and what
// to release when it ends.
type session struct {
	o        Options
	dir      string            // absolute work dir
	state    string            // DIR/.stratus
	progress *progress.Display // lines and events (Options.Progress)
	// log is the run's logger (internal/logging): the operator's sentences
	// ("stratus: warning: …") among the progress lines.
	log *slog.Logger
	st  *sqlite.Store
	sk  *fs.Sink // the work dir: ctx files, logs, summaries
	key []byte

	run stratus.Run
	env *worker.RunEnv
	def []byte

	releases []func() // run last first by close
}

// open opens the work dir's store and HMAC key.
func open(dir string, o Options) (*session, error) {
	// Stratus's state (.stratus/) is reached through no link an engine planted.
	s := &session{o: o, dir: dir, state: filepath.Join(dir, StateDir), sk: fs.New(dir).Private(StateDir)}
	var release func()
	s.progress, release = progress.For(o.Progress)
	s.defer_(release)
	s.log = logging.Human(s.progress, "stratus")
	if err := statedir.Secure(s.state); err != nil {
		return nil, err
	}
	key, err := captoken.LoadOrCreateKey(filepath.Join(s.state, KeyFile))
	if err != nil {
		return nil, err
	}
	s.key = key
	if o.Shared != nil {
		s.st, err = o.Shared.store() // the host's, closed by the host
		return s, err
	}
	if s.st, err = sqlite.Open(filepath.Join(s.state, DBFile)); err != nil {
		return nil, err
	}
	s.defer_(func() { s.st.Close() })
	return s, nil
}

func (s *session) defer_(f func()) { s.releases = append(s.releases, f) }

func (s *session) close() {
	for i := len(s.releases) - 1; i >= 0; i-- {
		s.releases[i]()
	}
}

// lock holds the task's lock until close (lockTask).
func (s *session) lock(taskID string) error {
	unlock, err := lockTask(s.state, taskID)
	if err != nil {
		return err
	}
	s.defer_(unlock)
	return nil
}

// execute runs s.run on the embedded executor: one execution named name
// with input, the worker API served on loopback, workers as local
// `stratus runner` processes, until the execution ends (the run is then
// finished: its status, its summary) or ctx ends (the run is recorded
// interrupted: its workers stopped, its open steps canceled, a summary
// saying where it stopped; the Result comes with ctx's error).
func (s *session) execute(ctx context.Context, name string, input json.RawMessage) (*Result, error) {
	env, st, sk, progress, run := s.env, s.st, s.sk, s.progress, s.run
	printEvent := progress.Event
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the worker API: %w", err)
	}
	launcher, inproc := s.launcher()
	var exec *embedded.Executor
	log := s.log
	svc := worker.New(worker.Config{
		// The work dir's store and key are shared by its runs (a host's,
		// or two `stratus run`s): this API serves this run's credentials
		// only (docs/security.md § Handles).
		RunID:        run.ID,
		Store:        st,
		Sink:         sk,
		Launcher:     launcher,
		Minter:       &captoken.Minter{Key: s.key, TTL: time.Duration(env.Config.Worker.TokenTTLSeconds) * time.Second},
		APIURL:       "http://" + ln.Addr().String(),
		Env:          runEnv(run.ID, env),
		OnEvent:      printEvent,
		Log:          log,
		ResolveFiles: true,
		MaxBodyBytes: env.Config.Worker.MaxBodyBytes,
		// Embedded, the inline limit is the upload limit (worker/upload.go).
		MaxUploadBytes: env.Config.Worker.MaxBodyBytes,
		LocalLogs:      filepath.Join(s.state, "logs"),
		ReplyFlags:     DirFlag(s.dir),
		// The same check of a head move as on AWS (docs/security.md §
		// Workspace commits): an engine holds its step's handle here too.
		Commits: bundlecheck.Checker{},
		// Its engines run on this machine: with workspace: worktree, one
		// that writes into the work dir fails its step.
		WatchWorkDir: true,
		// A transient failure falls back only to a provider that can start
		// here (internal/retry; the preflight's checks of a provider).
		CanLaunch: func(cfg *config.Config, provider string) bool {
			return doctor.CanLaunch(doctor.Env{}, s.dir, provider, cfg.Agents.Providers[provider])
		},
	})
	// Observation turns go through a queue as on AWS, here one of this
	// process, handled as the dispatch function would.
	svc.Queue = localqueue.New(func(ctx context.Context, body []byte) {
		var m worker.Message
		if err := json.Unmarshal(body, &m); err == nil {
			if err := svc.Dispatch(ctx, m); err != nil {
				log.Warn(fmt.Sprintf("%s of %s: %v", m.Kind, m.StepRef, err), logging.KeyRunID, m.RunID, logging.KeyStepRef, m.StepRef)
			}
		}
	})
	svc.Publish = func(ctx context.Context, run stratus.Run, _ *worker.RunEnv) ([]string, error) {
		f, err := report.Collect(ctx, st, run, stratus.RunDone, worker.ReportEnv(env))
		if err != nil {
			return nil, err
		}
		return report.Write(ctx, sk, f)
	}
	// A write the disk refuses (ENOSPC, SQLite full) answers the worker 507
	// and stops the run (docs/security.md § Output that did not persist):
	// interrupted, resumable once space is freed, with its result said,
	// rather than left waiting for a step whose report cannot be kept.
	waitCtx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	// So does a step's output or a summary the disk refuses, where the
	// service would fail the step and so the run (worker.Service.DiskFull,
	// docs/security.md § Output that did not persist).
	svc.DiskFull = func(err error) { stopWait(&diskFullError{err}) }
	api := httpapi.New(svc)
	if inproc != nil {
		inproc.Handler = api
	}
	api.OnError = func(_ *http.Request, err error) {
		// A submit whose output did not persist has failed its step and
		// either stopped the run itself (a full disk: svc.DiskFull, whose
		// cause names the step) or, for another write error, told the
		// execution, which ends the run failed with that step's reason
		// (docs/security.md § Output that did not persist): stopping it
		// here would race that end.
		if stratus.StorageFull(err) && !errors.Is(err, worker.ErrNotPersisted) {
			stopWait(&diskFullError{err})
		}
	}
	srv := httpapi.NewServer(api)
	go srv.Serve(ln)
	defer srv.Close()

	var dispatches sync.WaitGroup
	dctx, cancelDispatch := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDispatch()
	exec = embedded.New(embedded.Options{
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
				var p struct {
					MessageBody worker.Message `json:"MessageBody"`
				}
				if err := json.Unmarshal(call.Parameters, &p); err != nil {
					return nil, fmt.Errorf("dispatch message: %w", err)
				}
				// The queue: dispatch runs outside the executor's goroutine.
				dispatches.Add(1)
				go func() {
					defer dispatches.Done()
					if err := svc.Dispatch(dctx, p.MessageBody); err != nil {
						log.Warn(fmt.Sprintf("dispatch %s: %v", p.MessageBody.Node, err), logging.KeyRunID, run.ID)
						if stratus.StorageFull(err) {
							// A step the disk will not let start stops the
							// run, as a write refused mid-step does; failing
							// its state would race that stop and end the
							// run failed (docs/security.md § Output that did
							// not persist).
							stopWait(&diskFullError{err})
							return
						}
						exec.SendTaskFailure(dctx, p.MessageBody.TaskToken, worker.ErrDispatch, err.Error())
					}
				}()
				return json.RawMessage(`{"MessageId":"embedded"}`), nil
			},
		},
	})
	svc.Tokens = exec

	// While the run runs, `stratus approve|reject|answer` find its API here.
	removeAddress, err := WriteRunAddress(s.state, run.ID, svc.APIURL)
	if err != nil {
		return s.stoppedEarly(ctx, err)
	}
	defer removeAddress()
	// What is left of the run's uploads once it ends was never named (each
	// is deleted when it is): deleted with the run's end
	// (docs/security.md § Upload size limits).
	defer func() {
		if err := worker.DropUploads(context.WithoutCancel(ctx), sk, run.ID); err != nil {
			log.Warn(fmt.Sprintf("delete the run's leftover uploads: %v", err))
		}
	}()
	x, err := exec.StartExecution(ctx, executor.StartInput{StateMachine: run.Flow, Definition: s.def, Name: name, Input: input})
	if err != nil {
		return s.stoppedEarly(ctx, fmt.Errorf("start execution: %w", err))
	}
	run.Execution = x.ARN
	if err := st.UpdateRun(ctx, run); stratus.StorageFull(err) {
		stopWait(&diskFullError{err}) // the execution runs: stopped below
	} else if err != nil {
		return nil, err
	}
	if w := supervisor.NarrowingWarning(env.Config.Supervisor, env.Flow); w != "" {
		svc.Log.Warn(w) // docs/contracts.md § What observe.mode costs: said once, at the start
	}

	x, err = exec.WaitExecution(waitCtx, x.ARN)
	ports := lifecycle.Ports{Store: st, Sink: sk, Exec: exec}
	var full *diskFullError
	if err != nil && ctx.Err() == nil && errors.As(context.Cause(waitCtx), &full) {
		log.Error(fmt.Sprintf("%v: stopping the run", full))
	} else {
		full = nil
	}
	if err != nil {
		// The caller was cancelled (or the disk is full): stop the
		// execution and the workers, record the run interrupted
		// (resumable) and leave a summary saying where it stopped.
		bg := context.WithoutCancel(ctx)
		why, cause := "stratus.Cancelled", "the run was interrupted"
		if full != nil {
			why, cause = "stratus.DiskFull", s.fullCause(full)
		}
		exec.StopExecution(bg, run.Execution, why, cause)
		svc.Drain()
		settleSupervisor(bg, st, run.ID, 0, printEvent) // interrupted: no grace
		// The open steps are canceled before their workers are stopped, so
		// a worker's last report is refused rather than taken for the
		// step's failure; each one's end is shown.
		open, _ := runview.Open(bg, st, run.ID)
		now := time.Now().UTC()
		var notRecorded error
		if r, ierr := lifecycle.Interrupt(bg, st, run, cause, now); ierr == nil {
			run = r
		} else {
			// Not recorded (a full disk): once this process is gone the run
			// reads interrupted all the same (lifecycle.Reconcile).
			run.Status, run.EndedAt, notRecorded = stratus.RunInterrupted, now, ierr
		}
		endEvents(bg, st, run.ID, open, printEvent)
		launcher.StopAll(cause) // each step's runner log says what stopped it
		cancelDispatch()
		dispatches.Wait()
		res := s.interrupted(run, why, cause)
		res.RecordErr = notRecorded
		if x, derr := exec.DescribeExecution(bg, run.Execution); derr == nil {
			fin, ferr := lifecycle.Finish(bg, ports, run, worker.ReportEnv(env), s.def, x)
			if fin != nil {
				res = s.ended(bg, fin, ferr)
			} else {
				res.SummaryErr = &lifecycle.SummaryError{Keys: s.summaryPaths(run.TaskID), Err: ferr}
			}
			if res.RecordErr == nil {
				res.RecordErr = notRecorded
			}
		}
		if full != nil {
			res.Error, res.Cause = why, cause
			return res, nil // the run ended (interrupted): its result is said
		}
		return res, err
	}
	svc.Drain() // no supervisor observation starts after the workers are stopped
	// An observation launched for the failure that ended the run is let
	// finish (bounded); what is left is recorded cut short, then stopped.
	settleSupervisor(ctx, st, run.ID, ObserveGrace, printEvent)
	launcher.StopAll(fmt.Sprintf("the run ended: its execution ended %s", x.Status))
	cancelDispatch()
	dispatches.Wait()
	open, _ := runview.Open(ctx, st, run.ID)
	fin, err := lifecycle.Finish(ctx, ports, run, worker.ReportEnv(env), s.def, x)
	if fin == nil {
		return nil, err
	}
	res := s.ended(ctx, fin, err)
	endEvents(ctx, st, run.ID, open, printEvent) // the steps Finish canceled
	s.pull(ctx, res.Run.ID)
	return res, nil
}

// ended is the Result of a run whose Finish returned fin with err: a run
// that ended says how, with its true status and why it stopped, even when
// that end did not persist (docs/security.md § Output that did not
// persist). A summary the disk refused does not keep the run from being
// recorded: nothing would run Finish again, and the run would read
// interrupted. What did not persist is said in fin (SummaryErr,
// RecordErr); paths are the work dir's.
func (s *session) ended(ctx context.Context, fin *Result, err error) *Result {
	var sum *lifecycle.SummaryError
	if errors.As(err, &sum) && fin.RecordErr == nil {
		lifecycle.RecordEnd(ctx, s.st, fin)
	} else if err != nil && fin.RecordErr == nil {
		fin.RecordErr = err
	}
	return s.paths(fin)
}

// interrupted is the Result of run stopped with why and cause before
// Finish could say more: its ctx dir, no summary yet.
func (s *session) interrupted(run stratus.Run, why, cause string) *Result {
	res := &Result{Run: run, Status: stratus.RunInterrupted, Error: why, Cause: cause}
	if cd, err := projection.RunCtxDir(s.env.Config.Projection.Placement, run); err == nil {
		res.CtxDir = s.sk.Path(cd)
	}
	return res
}

// fullCause is why a run stopped on a full disk, and how it goes on.
func (s *session) fullCause(full *diskFullError) string {
	resume := "stratus resume " + s.run.ID
	if f := DirFlag(s.dir); f != "" {
		resume += " " + f
	}
	return full.Error() + "; free space, then `" + resume + "` goes on"
}

// stoppedEarly ends s.run, recorded but stopped by err before its
// execution ran: a full disk (stratus.StorageFull) ends it as one met
// mid-run does — interrupted, resumable, recorded so when the store takes
// it, its result said (docs/security.md § Output that did not persist).
// Any other err is returned as it is.
func (s *session) stoppedEarly(ctx context.Context, err error) (*Result, error) {
	if !stratus.StorageFull(err) {
		return nil, err
	}
	full := &diskFullError{err}
	s.log.Error(fmt.Sprintf("%v: stopping the run", full))
	why, cause := "stratus.DiskFull", s.fullCause(full)
	now := time.Now().UTC()
	run := s.run
	r, ierr := lifecycle.Interrupt(context.WithoutCancel(ctx), s.st, run, cause, now)
	if ierr == nil {
		run = r
	} else {
		run.Status, run.EndedAt = stratus.RunInterrupted, now
	}
	res := s.interrupted(run, why, cause)
	res.RecordErr = ierr
	res.SummaryErr = &lifecycle.SummaryError{Keys: s.summaryPaths(run.TaskID), Err: errors.New("the run stopped before its first step")}
	return res, nil
}

// summaryPaths are where the summary of task taskID is written.
func (s *session) summaryPaths(taskID string) []string {
	keys := report.Keys(taskID)
	for i, k := range keys {
		keys[i] = s.sk.Path(k)
	}
	return keys
}

// runEnv is the Env of a service serving run runID alone: env for that
// run, ENOTFOUND for any other (whose flow, task and config env is not).
func runEnv(runID string, env *worker.RunEnv) func(context.Context, string) (*worker.RunEnv, error) {
	return func(_ context.Context, id string) (*worker.RunEnv, error) {
		if id != runID {
			return nil, stratus.Errorf(stratus.ENOTFOUND, "run %s is not served here (this process serves run %s)", id, runID)
		}
		return env, nil
	}
}

// launcher is what runs the workers of s's run (worker.isolation): a
// goroutine of this process per step (inproc, also returned, whose Handler
// the caller sets) or a runner process per step. In-process needs the
// process's reaper; one that cannot start is said, and the run's workers
// are processes (each watches this one), so that nothing outlives it.
func (s *session) launcher() (workers interface {
	launch.Launcher
	StopAll(why string)
}, inproc *inprocess.Launcher) {
	self, err := s.self()
	slots := launch.NewSlots(engineSlots(s.env.Config))
	if s.o.Shared != nil {
		slots = s.o.Shared.slots
	}
	process := &local.Launcher{Executable: self, WatchParent: true, Slots: slots}
	if err != nil || s.env.Config.Worker.Isolation == config.IsolationProcess {
		return process, nil
	}
	rp, err := processReaper(self)
	if err != nil {
		s.log.Warn(fmt.Sprintf("%v: this run's workers are processes (worker.isolation: %s)", err, config.IsolationProcess))
		return process, nil
	}
	inproc = &inprocess.Launcher{Runner: &runner.InProcess{}, Self: self, Reaper: rp, Slots: slots}
	return inproc, inproc
}

// engineSlots is worker.max_concurrent_engines, or its default.
func engineSlots(cfg *config.Config) int {
	if n := cfg.Worker.MaxConcurrentEngines; n > 0 {
		return n
	}
	return config.DefaultMaxConcurrentEngines()
}

// self is the stratus binary: Options.Self, else this executable.
func (s *session) self() (string, error) {
	if s.o.Self != "" {
		return s.o.Self, nil
	}
	return os.Executable()
}

// processReaper is this process's reaper (internal/reaper), started on
// first use with the runner binary beside self (`stratus-runner reap`, or
// `stratus runner reap`), and kept until the process ends: one serves
// every run the process hosts.
func processReaper(self string) (*reaper.Reaper, error) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if theReaper == nil {
		name, args := local.RunnerFor(self)
		r, err := reaper.Start(name, append(args, reaper.Arg)...)
		if err != nil {
			return nil, err // the next run tries again
		}
		theReaper = r
	}
	return theReaper, nil
}

var (
	reaperMu  sync.Mutex
	theReaper *reaper.Reaper
)

// diskFullError is why a run stopped on a full disk.
type diskFullError struct{ err error }

func (e *diskFullError) Error() string { return "the disk is full (" + e.err.Error() + ")" }

// endEvents shows the end of each step of open that has ended without
// the worker service (canceled by lifecycle.Interrupt or Finish).
func endEvents(ctx context.Context, st store.Store, runID string, open map[string]bool, show func(worker.Event)) {
	if len(open) == 0 {
		return
	}
	evs, _ := runview.EndEvents(ctx, st, runID, open)
	for _, e := range evs {
		show(e)
	}
}

// pull brings the commits of a run whose repository travelled back as
// branch stratus/<task_id>; a pull that cannot be made is a warning: the
// run's status stands, and stratus pull tries again.
func (s *session) pull(ctx context.Context, runID string) {
	run, err := s.st.GetRun(ctx, runID)
	if err != nil || run.Workspace == nil {
		return
	}
	if s.o.NoPull {
		s.log.Info(fmt.Sprintf("the run's commits were not pulled (--no-pull); stratus pull %s brings them back as branch %s", runID, lifecycle.PullBranch(run)))
		return
	}
	p, err := lifecycle.PullWorkspace(ctx, s.sk, run, s.dir, false)
	if err != nil {
		s.log.Warn(fmt.Sprintf("the run's commits were not pulled: %v (stratus pull %s tries again)", err, runID))
		return
	}
	s.log.Info(lifecycle.PulledLine(run, s.dir, p))
}

// paths turns a Finish result's sink keys into the work dir's paths.
func (s *session) paths(r *lifecycle.Result) *Result {
	for i, k := range r.Summary {
		r.Summary[i] = s.sk.Path(k)
	}
	if r.SummaryErr != nil {
		r.SummaryErr.Keys = s.summaryPaths(r.Run.TaskID)
	}
	if r.CtxDir != "" {
		r.CtxDir = s.sk.Path(r.CtxDir)
	}
	return r
}
