// Package runner is the worker entrypoint (`stratus runner`, the ECS task's
// command): it fetches its prompt with its handle, drives the node's engine
// through child contract v1 (internal/contract), relays usage and steps as
// stats (which double as heartbeats), and returns the report through the
// worker API (docs/architecture.md § The path of one step). A report that
// is an `@file:<abs-path>` sentinel is resolved here, on the worker side
// (docs/contracts.md § Output is a tool call), and submitted as the file's
// bytes.
//
// It never loses a report: when submit still fails after retries, the
// report is written to a spool file whose path is printed, and Run returns
// an error. It does not fold, project or route: the server does.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/outputschema"
	"github.com/stratusflow/stratus/internal/private"
	"github.com/stratusflow/stratus/internal/publish"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// Options configure one runner invocation.
type Options struct {
	APIURL string // STRATUS_API_URL
	Handle string // STRATUS_HANDLE
	TaskID string // STRATUS_TASK_ID (optional: the prompt fetch resolves it from the handle)
	Self   string // the stratus binary, substituted for "{stratus}"
	// SpoolDir is where a report the worker API did not take is kept: a
	// directory only this user may enter, made 0700 when missing and
	// checked before each use ("" = SpoolDirFor the temporary directory;
	// embedded, the step's log directory in the state dir: STRATUS_SPOOL_DIR).
	SpoolDir string
	// WorkRoot is where a run's workspace is checked out ("" =
	// os.TempDir()): the runner's own directory, never the operator's.
	WorkRoot string
	// Log gets the runner's records (internal/logging); nil = none. Run
	// adds the step's run_id, step_ref and attempt once it knows them.
	Log *slog.Logger
	// StatsInterval bounds stats posts to one per interval (default
	// DefaultStatsInterval); the first goes within FirstStatsDelay.
	StatsInterval time.Duration
	checkout      *checkout // set by Run for a run whose repository travels
	// HTTP carries the runner's calls to the worker API (nil: a default
	// client over the network). The in-process worker (InProcess) gives
	// one whose transport calls the API's handler directly.
	HTTP *http.Client
	// EngineStderr is where the engine's stderr goes (nil: this process's
	// own, inherited, as docs/contracts.md § Process lifecycle has it for
	// a runner process).
	EngineStderr io.Writer
	// EngineFiles, when set, holds the engine files of every step of this
	// process (the in-process launcher's: InProcess): each is written
	// once, read-only, instead of once a step. nil: the step writes its
	// own copies and removes them when it ends (a runner process).
	EngineFiles *EngineFileCache
	// EngineDir is the engine's working directory when the payload names
	// none ("" = the runner's own): a pooled runner gives each step a
	// fresh one (Pool).
	EngineDir string
	// TempDir is where the step's engine files are placed ("" =
	// os.TempDir()): a pooled runner's step has its own.
	TempDir string
	// EngineEnv overlays the engine's environment under the step's own
	// variables (a pooled runner's per-step HOME and TMPDIR).
	EngineEnv map[string]string
	// OnExchanged, when set, is called once the bootstrap value is
	// exchanged: this worker owns the step (a pooled runner then keeps
	// its assignment in flight).
	OnExchanged func(worker.Bootstrapped)
	// HeartbeatInterval is how often the counters are re-posted while the
	// engine is silent, so the state's HeartbeatSeconds does not lapse
	// (default DefaultHeartbeatInterval, 20 s).
	HeartbeatInterval time.Duration
}

// DefaultStatsInterval and FirstStatsDelay pace a worker's stats (pinned
// by TestRun_FirstStatsAtOnceThenPaced): the first post within 200 ms of
// the engine's first progress (lines that arrive together go together),
// then at most one per 10 s carrying the latest totals, and the final
// one. With the silent-engine heartbeat (HeartbeatInterval, 20 s) a live
// worker makes at most 0.1 stats calls a second, sustained.
const (
	DefaultStatsInterval = 10 * time.Second
	FirstStatsDelay      = 200 * time.Millisecond
	// DefaultHeartbeatInterval is a silent engine's heartbeat: a sixth of
	// the shortest heartbeat window a stack takes (template.yaml
	// HeartbeatSeconds, MinValue 120 s) and of the shortest handle lease
	// it renews (worker.token_ttl_seconds, at least 120 s), so a worker
	// alive is never taken for dead even when a post or two is lost.
	DefaultHeartbeatInterval = 20 * time.Second
)

// ErrSpooled is returned when the report was written to a spool file
// because the worker API did not take it.
var ErrSpooled = errors.New("report spooled")

// ErrRefused is returned when the worker API refused the attempt's late
// report or failure with 409: the step moved on without it (its run
// cancelled, a newer attempt, its state no longer waiting). Nothing is
// lost that the run still wants.
var ErrRefused = errors.New("the step no longer takes this attempt's result")

// ErrBootstrap wraps the error of a bootstrap exchange that failed: the
// worker never owned its step. A refusal (the worker API's 4xx: the value
// was exchanged already, by a cold task or another pooled runner, or it
// expired) is a *workerclient.APIError inside.
var ErrBootstrap = errors.New("exchange the bootstrap value")

// StoppedError is Run's error when the runner was stopped before its
// result: Why says what stopped it — the run cancelled, interrupted or
// ended, the step gone, the runner's owner gone, a signal — never a bare
// "context canceled". It unwraps to context.Canceled.
type StoppedError struct{ Why string }

func (e *StoppedError) Error() string { return "stopped before its result: " + e.Why }
func (e *StoppedError) Unwrap() error { return context.Canceled }

// errStepGone is why the engine of a step the worker API no longer knows
// is stopped.
var errStepGone = errors.New("the step is gone: the worker API refused its stats (409), its run cancelled or its execution ended")

// stopped is the StoppedError of ctx, cancelled: its cause in words.
func stopped(ctx context.Context) *StoppedError {
	cause := context.Cause(ctx)
	switch {
	case cause == nil || cause == context.Canceled:
		return &StoppedError{Why: "its runner was stopped (no reason was given)"}
	case errors.Is(cause, context.DeadlineExceeded):
		return &StoppedError{Why: "its deadline passed"}
	case strings.HasSuffix(cause.Error(), " signal received"): // os/signal.NotifyContext's cause
		return &StoppedError{Why: fmt.Sprintf("the runner was told to stop (%s): its run was cancelled, interrupted or ended, or its step was stopped", cause)}
	}
	return &StoppedError{Why: cause.Error()}
}

// LogEnd says on log how a runner's Run ended with err (not nil): a stop
// as a warning naming what stopped it, anything else as an error.
func LogEnd(log *slog.Logger, err error) {
	var se *StoppedError
	if errors.As(err, &se) {
		log.Warn(err.Error())
		return
	}
	log.Error(err.Error())
}

// Run executes one attempt end to end. It returns nil once the result
// (report or failure) is delivered; a *StoppedError saying why when ctx
// ends (or the step is gone) before then.
func Run(ctx context.Context, o Options) error {
	err := run(ctx, o)
	var se *StoppedError
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) && !errors.As(err, &se) {
		return stopped(ctx)
	}
	return err
}

func run(ctx context.Context, o Options) error {
	if o.APIURL == "" || o.Handle == "" {
		return fmt.Errorf("%s and %s must be set", launch.EnvAPIURL, launch.EnvHandle)
	}
	if o.Log == nil {
		o.Log = logging.Discard()
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = DefaultStatsInterval
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	c := &workerclient.Client{BaseURL: o.APIURL, Credential: o.Handle, HTTP: o.HTTP}
	if strings.HasPrefix(o.Handle, captoken.BootstrapPrefix) {
		// Launched with a one-time bootstrap value (what RunTask's
		// environment shows): exchange it for the step's handle, which
		// the engine gets (STRATUS_HANDLE) and nothing outside sees.
		b, err := c.Bootstrap(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBootstrap, err)
		}
		if o.OnExchanged != nil {
			o.OnExchanged(b)
		}
		o.Handle = b.Handle
		if o.TaskID == "" {
			o.TaskID = b.TaskID
		}
	}
	p, err := c.Prompt(ctx, o.TaskID)
	if err != nil {
		return fmt.Errorf("fetch prompt: %w", err)
	}
	o.Log = logging.Step(o.Log, p.RunID, p.StepRef, p.Attempt).With("binary", filepath.Base(os.Args[0]))
	if p.Workspace != nil {
		// The run's repository travels: check it out here,
		// and make every path of the payload point into the checkout.
		ws, err := materialize(ctx, c, p, o)
		if err != nil {
			c.Fail(ctx, p.TaskID, ownFailure(err.Error()))
			return err
		}
		defer ws.cleanup()
		o.checkout = ws
	}
	if p.Exec != nil {
		return runExec(ctx, c, p, o) // a checks or tool node: no engine (exec.go)
	}
	if p.Engine == nil {
		return fmt.Errorf("prompt payload of %s carries no engine launch spec", p.TaskID)
	}
	spec, err := launchSpec(p.Engine, o)
	if err != nil {
		c.Fail(ctx, p.TaskID, ownFailure(err.Error()))
		return err
	}
	cleanup, err := placeEngineFiles(p.Engine, &spec, o.EngineFiles, o.TempDir)
	if err != nil {
		c.Fail(ctx, p.TaskID, ownFailure(err.Error()))
		return err
	}
	defer cleanup()
	req := contract.Request{Kind: p.Engine.Kind, Input: p.Engine.Input, Schema: p.Engine.Schema}
	var schema *outputschema.Schema
	if len(p.Engine.Schema) > 0 && !p.Engine.SchemaAdvisory {
		if schema, err = outputschema.Compile(p.Engine.Schema); err != nil {
			c.Fail(ctx, p.TaskID, ownFailure(err.Error()))
			return err
		}
	}
	if p.Engine.MaxSteps > 0 {
		ms := p.Engine.MaxSteps
		req.MaxSteps = &ms
	}
	o.Log.Info(fmt.Sprintf("%s attempt %d: starting the engine", p.StepRef, p.Attempt), "command", strings.Join(append([]string{spec.Command}, spec.Args...), " "))

	started := time.Now().UnixMilli()
	if err := c.Stats(ctx, worker.Stats{EngineStartedAt: &started}); err != nil {
		o.Log.Warn("stats: " + err.Error())
	}
	// A stats post the server refuses with 409 means the step is gone (its
	// run cancelled or its execution ended): the engine is stopped.
	ectx, stopEngine := context.WithCancelCause(ctx)
	defer stopEngine(nil)
	relay := newRelay(ectx, c, o.StatsInterval, o.HeartbeatInterval, o.Log)
	relay.gone = func() { stopEngine(errStepGone) }
	stderr := newStderrTail(spec.Stderr)
	spec.Stderr = stderr
	region := trace.StartRegion(ctx, "engine") // the engine's run, spawn to exit (STRATUS_TRACE)
	res, err := contract.NewRunner().Run(ectx, spec, req, relay.progress)
	region.End()
	relay.close()
	if err != nil && ectx.Err() != nil {
		return stopped(ectx) // cancelled: no terminal to report (docs/contracts.md § Process lifecycle)
	} else if err != nil {
		return err
	}
	final := worker.Stats{Steps: &res.Attempt.Steps, PromptTokens: &res.Attempt.PromptTokens,
		CompletionTokens: &res.Attempt.CompletionTokens, CostUSD: plausible(res.Attempt.CostUSD, o.Log)}
	if err := c.Stats(ctx, final); err != nil {
		o.Log.Warn("stats: " + err.Error())
	}
	o.Log.Info("the engine ended", "terminal", string(res.Terminal), "steps", res.Attempt.Steps,
		"prompt_tokens", res.Attempt.PromptTokens, "completion_tokens", res.Attempt.CompletionTokens,
		"wall_ms", res.Attempt.WallMS, "runner_peak_rss_kib", peakRSSKiB())
	if res.Attempt.DroppedLines > 0 {
		o.Log.Warn(fmt.Sprintf("%d stdout line(s) of the engine were over the line limit and skipped (the longest %d bytes)", res.Attempt.DroppedLines, res.Attempt.DroppedMaxBytes),
			"dropped_lines", res.Attempt.DroppedLines, "dropped_max_bytes", res.Attempt.DroppedMaxBytes)
	}

	if res.Terminal != contract.Captured {
		reason := Reason(res, spec.DeadlineMS)
		fv := Failure(res, reason, stderr.String(), time.Now())
		o.Log.Info(fmt.Sprintf("%s attempt %d failed (%s): %s", p.StepRef, p.Attempt, fv.Class, oneLine(reason, 300)),
			"terminal", string(res.Terminal), "class", fv.Class, "retry_at", fv.RetryAt)
		return deliver(o, p, "failure", []byte(reason), func() error { return c.Fail(ctx, p.TaskID, fv) })
	}
	if schema != nil {
		// The caller validates the report regardless of whether the engine
		// applied the schema (docs/contracts.md § The request line).
		if err := schema.Validate(res.Report); err != nil {
			return deliver(o, p, "failure", []byte(err.Error()), func() error { return c.Fail(ctx, p.TaskID, reportRefused(err.Error())) })
		}
	}
	body, err := workerclient.ResolveFileSentinel(ReportBody(res.Report))
	if err != nil {
		// A report that names a file the runner cannot read is the
		// engine's failure, not an undeliverable report.
		reason := "report: " + err.Error()
		return deliver(o, p, "failure", []byte(reason), func() error { return c.Fail(ctx, p.TaskID, reportRefused(reason)) })
	}
	if o.checkout != nil {
		// The change goes in before the report: a step is done only with
		// its commit on the run's head.
		if err := o.checkout.commit(ctx, c, p, o); err != nil {
			reason := err.Error()
			o.Log.Error(reason)
			return deliver(o, p, "failure", []byte(reason), func() error { return c.Fail(ctx, p.TaskID, ownFailure(reason)) })
		}
	}
	return deliver(o, p, "report", body, func() error {
		_, err := c.Submit(ctx, p.TaskID, body)
		var ae *workerclient.APIError
		if errors.As(err, &ae) && ae.Status != 409 && !ae.Transient() {
			// The server refused the report (e.g. 422): fail the attempt with
			// its reason rather than leave the step waiting for its timeout.
			o.Log.Error("submit refused: " + err.Error())
			// Keep the refused report: the worker API will not have it.
			reason := "report refused: " + ae.Message
			if path, serr := spool(o, p, "report", body); serr == nil {
				reason += " (report kept at " + path + ")"
			}
			return c.Fail(ctx, p.TaskID, reportRefused(reason))
		}
		return err
	})
}

// Failure is the failed result of an engine that ended with res (a
// terminal other than Captured): its terminal, reason (Reason), and the
// class and reset failclass.Classify reads from them, the engine's exit
// code and stderrTail, the last bytes of its stderr, at now.
func Failure(res contract.Result, reason, stderrTail string, now time.Time) worker.FailureValue {
	v := failclass.Classify(failclass.Evidence{Terminal: string(res.Terminal), ExitCode: res.Attempt.ExitCode, Reason: reason, Stderr: stderrTail, Now: now})
	return worker.NewFailureValue(string(res.Terminal), reason, v)
}

// reportRefused is the failure of an engine whose report the runner or the
// worker API refused (its schema, the verdict contract, an unreadable
// @file: body): quality (internal/failclass, rule 1).
func reportRefused(reason string) worker.FailureValue {
	v := failclass.Classify(failclass.Evidence{Terminal: string(contract.Captured), Report: true, Reason: reason})
	return worker.NewFailureValue(string(contract.Failed), reason, v)
}

// ownFailure is a failure of the runner itself, before or after its
// engine (a workspace it could not check out or commit, a launch spec it
// could not place, a node it could not run): infrastructure.
func ownFailure(reason string) worker.FailureValue {
	return worker.NewFailureValue(string(contract.Failed), reason, failclass.Verdict{Class: failclass.Infrastructure})
}

// stderrTail passes an engine's stderr on to w (nil: this process's
// stderr) and keeps its last failclass.StderrTailBytes: the evidence of
// why it failed (internal/failclass). A write to w that fails is dropped,
// never the engine's.
type stderrTail struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func newStderrTail(w io.Writer) *stderrTail {
	if w == nil {
		w = os.Stderr
	}
	return &stderrTail{w: w}
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - failclass.StderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// ReportBody is what a report is submitted as: a JSON string report as its
// raw text, any other report as its JSON text. Run then resolves a string
// report that is exactly "@file:<abs-path>" to that file's bytes
// (workerclient.ResolveFileSentinel; docs/contracts.md § Output is a tool call).
func ReportBody(report json.RawMessage) []byte {
	var s string
	if json.Unmarshal(report, &s) == nil {
		return []byte(s)
	}
	return []byte(report)
}

func deliver(o Options, p *worker.Payload, what string, body []byte, send func() error) error {
	err := send()
	if err == nil {
		return nil
	}
	var ae *workerclient.APIError
	if errors.As(err, &ae) && ae.Status == 409 {
		return fmt.Errorf("%w: %s of %s: %v", ErrRefused, what, p.StepRef, err)
	}
	path, werr := spool(o, p, what, body)
	if werr != nil {
		return fmt.Errorf("deliver %s: %v; spool: %v", what, err, werr)
	}
	o.Log.Error(fmt.Sprintf("%s of %s spooled to %s (%v)", what, p.StepRef, path, err), "spool", path)
	return fmt.Errorf("%w to %s: %v", ErrSpooled, path, err)
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// launchSpec resolves the payload's engine spec on this machine: "{stratus}"
// becomes this binary, "$NAME" env values are read from this environment
// (secrets are named in config, never written down or put in argv), the
// engine learns the API URL, handle and task id so it may stage parts, and
// it always gets the attempt's resolved overrides as STRATUS_MODEL,
// STRATUS_REASONING, STRATUS_PERMISSION_PROFILE and STRATUS_NETWORK_ACCESS
// (docs/contracts.md § Per-node overrides). Args arrive expanded.
func launchSpec(e *worker.EngineSpec, o Options) (contract.LaunchSpec, error) {
	cmd := e.Command
	if cmd == config.StratusCommand {
		cmd = o.Self
	}
	env := map[string]string{}
	for k, v := range o.EngineEnv {
		env[k] = v
	}
	env[launch.EnvAPIURL], env[launch.EnvHandle] = o.APIURL, o.Handle
	if o.TaskID != "" {
		env[launch.EnvTaskID] = o.TaskID
	}
	for k, v := range e.Env {
		if strings.HasPrefix(v, "$") {
			var ok bool
			if v, ok = os.LookupEnv(v[1:]); !ok {
				continue // unset here: leave it unset for the engine, not empty
			}
		}
		env[k] = v
	}
	// The resolved overrides win over the provider's env overlay and the
	// runner's own environment: they are this attempt's resolution.
	profile := e.PermissionProfile
	if profile == "" {
		profile = "read-only" // a payload without the field grants nothing
	}
	env[launch.EnvModel], env[launch.EnvReasoning] = e.Model, e.Reasoning
	env[launch.EnvPermissionProfile], env[launch.EnvNetworkAccess] = profile, strconv.FormatBool(e.NetworkAccess)
	dir := e.Dir
	if dir == "" {
		dir = o.EngineDir
	}
	// The git token is the publisher's alone (docs/architecture.md §
	// Publishing): an engine never inherits it.
	return contract.LaunchSpec{Command: cmd, Args: e.Args, Env: env, Unset: publish.TokenVariables, Dir: dir, DeadlineMS: e.DeadlineMS, Stderr: o.EngineStderr}, nil
}

// relay posts progress as stats at most once per interval — counters that
// arrive within it are posted when it is up, so the operator's display
// lags the engine by at most one interval (pinned by
// TestRun_LatestCountersPostedWhenTheIntervalIsUp) — and re-posts
// the latest counters every heartbeat interval while the engine is silent.
type relay struct {
	ctx      context.Context
	c        *workerclient.Client
	interval time.Duration
	log      *slog.Logger
	gone     func() // called when the server says the step is gone (409)

	mu      sync.Mutex
	latest  contract.Progress
	last    time.Time
	pending *time.Timer // posts latest when the interval is up
	wg      sync.WaitGroup
	stop    chan struct{}
}

func newRelay(ctx context.Context, c *workerclient.Client, interval, heartbeat time.Duration, log *slog.Logger) *relay {
	// The first post waits FirstStatsDelay, not a whole interval.
	r := &relay{ctx: ctx, c: c, interval: interval, log: log, stop: make(chan struct{}), last: time.Now().Add(min(FirstStatsDelay-interval, 0))}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				r.mu.Lock()
				silent := time.Since(r.last) >= heartbeat
				p := r.latest
				if silent {
					r.last = time.Now()
				}
				r.mu.Unlock()
				if silent {
					r.post(p)
				}
			}
		}
	}()
	return r
}

func (r *relay) progress(p contract.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latest = p
	if wait := r.interval - time.Since(r.last); wait > 0 {
		if r.pending == nil {
			r.wg.Add(1)
			r.pending = time.AfterFunc(wait, func() {
				defer r.wg.Done()
				r.mu.Lock()
				p := r.latest
				r.pending, r.last = nil, time.Now()
				r.mu.Unlock()
				r.post(p)
			})
		}
		return
	}
	r.last = time.Now()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.post(p)
	}()
}

func (r *relay) post(p contract.Progress) {
	s := worker.Stats{Steps: &p.Steps, PromptTokens: &p.PromptTokens, CompletionTokens: &p.CompletionTokens, CostUSD: plausible(p.CostUSD, r.log)}
	if err := r.c.Stats(r.ctx, s); err != nil {
		r.log.Warn("stats: " + err.Error())
		var ae *workerclient.APIError
		if errors.As(err, &ae) && ae.Status == 409 && r.gone != nil {
			r.log.Warn("the step is gone (its run was cancelled or its execution ended): stopping the engine")
			r.gone()
		}
	}
}

// close stops the relay; a post still pending is dropped (the final stats
// post carries the totals).
func (r *relay) close() {
	close(r.stop)
	r.mu.Lock()
	if r.pending != nil && r.pending.Stop() {
		r.pending = nil
		r.wg.Done()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// plausible is c when the worker API takes it as a cost (worker.
// PlausibleCost). A cost over worker.MaxCostUSD (or infinite) is posted
// as MaxCostUSD — any cost cap then stops the run — rather than refused
// with the whole post, which lost the attempt's tokens and let a capped
// run go on as if free (2e9 a turn once ended a run done: pinned by
// TestRun_ImplausibleCostClampedTokensKept). A
// negative or NaN cost is not a cost: nil, the attempt unpriced.
func plausible(c *float64, log *slog.Logger) *float64 {
	if c == nil || worker.PlausibleCost(*c) {
		return c
	}
	if *c > worker.MaxCostUSD {
		log.Warn(fmt.Sprintf("the engine reported cost_usd %v, over the %g US dollars one attempt may cost: posting %g, which any cost cap stops at", *c, worker.MaxCostUSD, worker.MaxCostUSD))
		m := worker.MaxCostUSD
		return &m
	}
	log.Warn(fmt.Sprintf("the engine reported cost_usd %v, not a cost (0 to %g US dollars): posting its tokens without one", *c, worker.MaxCostUSD))
	return nil
}

// SpoolDirFor is the spool directory a runner without one given makes for
// its user under root ("" = os.TempDir()): root/stratus-spool-<euid>,
// 0700 (docs/security.md § Files under .stratus).
func SpoolDirFor(root string) string {
	if root == "" {
		root = os.TempDir()
	}
	return filepath.Join(root, "stratus-spool-"+strconv.Itoa(os.Geteuid()))
}

// spoolFix ends a refusal of the spool directory.
const spoolFix = "no report is kept there (docs/security.md § Files under .stratus)"

// spool keeps body, which the worker API did not take, in a new file of
// the spool dir and returns the file's path (docs/security.md § Files
// under .stratus, the report spool): the dir is one only this user may
// enter (Options.SpoolDir, else SpoolDirFor the temporary directory), the
// file is created anew with mode 0600 and never through a symbolic link
// (private.CreateIn). A spool dir someone else made first, or opened up,
// is not used: the report goes to a new directory of a name no one can
// guess, beside it, and the log says why.
func spool(o Options, p *worker.Payload, what string, body []byte) (string, error) {
	dir := o.SpoolDir
	if dir == "" {
		dir = SpoolDirFor("")
	}
	name := fmt.Sprintf("stratus-spool-%s-%d.%s", safe(p.TaskID), p.Attempt, what)
	f, path, err := private.CreateIn("spool directory", dir, spoolFix, name)
	if stratus.ErrorCode(err) == stratus.EFORBIDDEN {
		alt, aerr := os.MkdirTemp(filepath.Dir(dir), "stratus-spool-")
		if aerr != nil {
			return "", fmt.Errorf("%v; and a directory of its own beside it: %v", err, aerr)
		}
		if o.Log != nil {
			o.Log.Warn(err.Error() + "; it goes to " + alt)
		}
		f, path, err = private.CreateIn("spool directory", alt, spoolFix, name)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("spool file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("spool file %s: %w", path, err)
	}
	return path, nil
}

// Reason is the human reason a terminal other than Captured is reported
// with (docs/contracts.md § Terminal classification): the failure text
// when there is one, else what the terminal means.
func Reason(res contract.Result, deadlineMS int) string {
	if deadlineMS <= 0 {
		deadlineMS = contract.DefaultDeadlineMS
	}
	switch {
	case res.Failure != "":
		return res.Failure
	case res.Terminal == contract.TimedOut:
		return fmt.Sprintf("the engine did not finish within its deadline of %d ms", deadlineMS)
	case res.Terminal == contract.NoReport && res.Attempt.DroppedLines > 0:
		return fmt.Sprintf("the engine exited without a report it could read: %d stdout line(s) over the %d-byte line limit were skipped (the longest %d bytes), a subrun_report among them is lost; stage a large report as a part or an @file: body",
			res.Attempt.DroppedLines, contract.DefaultMaxLineBytes, res.Attempt.DroppedMaxBytes)
	case res.Terminal == contract.NoReport:
		return "the engine exited without a report (no subrun_report line)"
	case res.Terminal == contract.MaxSteps:
		return fmt.Sprintf("the engine ran out of steps after %d (max_steps_exhausted)", res.Attempt.Steps)
	case res.Terminal == contract.ContextYield:
		if res.Yield != nil {
			return fmt.Sprintf("the engine yielded its context (to_sequence %d) without a report", res.Yield.ToSequence)
		}
		return "the engine yielded its context without a report"
	}
	return string(res.Terminal)
}

// placeEngineFiles writes the files the launch spec names (e.Files: frozen
// with the run, carried by the payload) to a directory of the runner's own
// and makes spec's command, args and env name those copies instead: a worker needs
// nothing from the operator's disk. cleanup removes them.
// With a cache (Options.EngineFiles) the copies are the cache's, shared
// by the steps of this process and kept: cleanup does nothing.
func placeEngineFiles(e *worker.EngineSpec, spec *contract.LaunchSpec, cache *EngineFileCache, tmp string) (cleanup func(), err error) {
	if len(e.Files) == 0 {
		return func() {}, nil
	}
	local := map[string]string{}
	if cache != nil {
		cleanup = func() {}
		for _, f := range e.Files {
			p, err := cache.place(f)
			if err != nil {
				return nil, fmt.Errorf("engine file %s: %w", f.Ref, err)
			}
			local[f.Ref] = p
		}
	} else {
		dir, err := os.MkdirTemp(tmp, "stratus-engine-files-")
		if err != nil {
			return nil, fmt.Errorf("engine files: %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		for i, f := range e.Files {
			p := filepath.Join(dir, fmt.Sprintf("%d-%s", i+1, engineFileName(f)))
			mode := os.FileMode(0o644)
			if f.Executable {
				mode = 0o755
			}
			if err := os.WriteFile(p, f.Body, mode); err != nil {
				cleanup()
				return nil, fmt.Errorf("engine file %s: %w", f.Ref, err)
			}
			local[f.Ref] = p
		}
	}
	if p, ok := local[spec.Command]; ok {
		spec.Command = p
	}
	args := slices.Clone(spec.Args)
	for i, a := range args {
		if p, ok := local[a]; ok {
			args[i] = p
		}
	}
	spec.Args = args
	for k, v := range spec.Env {
		if p, ok := local[v]; ok {
			spec.Env[k] = p
		}
	}
	return cleanup, nil
}
