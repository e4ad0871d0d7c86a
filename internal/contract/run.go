package contract

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/reaper"
)

// Runner launches engines under the child contract. It numbers its attempts
// cr-1, cr-2, … (docs/contracts.md § The reference engine); the numbering is
// per Runner value and safe for concurrent Run calls. The zero value is ready
// to use.
type Runner struct {
	seq atomic.Uint64
}

// NewRunner returns a Runner whose first attempt is cr-1.
func NewRunner() *Runner { return &Runner{} }

func (r *Runner) nextID() string {
	return "cr-" + strconv.FormatUint(r.seq.Add(1), 10)
}

// Run spawns the engine described by spec, writes the request line for req,
// follows the child until it ends (docs/contracts.md § Process lifecycle) and
// returns its terminal (docs/contracts.md § Terminal classification) with the
// attempt accounting attached.
//
// Timing (all in milliseconds): the wall deadline spec.DeadlineMS runs from
// the start of the call and covers the request write; when it elapses, stdin
// is closed and stdout drained for spec.CancelGraceMS, then the child's
// process group is killed. After a clean stdout EOF the exit status is
// awaited for at most ExitWaitMS; after the direct child exits, stdout is
// drained for at most PostExitDrainMS (a grandchild may hold it open).
//
// Spawn, pipe and request errors are not Go errors: they are the Failed
// terminal, still carrying an Attempt. err is non-nil only when ctx was
// cancelled by the caller: the process group is then killed, both pipes are
// closed and ctx.Err() is returned with a Result whose Terminal is empty and
// whose Attempt holds what was observed. A ctx already done when Run is
// called returns ctx.Err() without launching.
//
// onProgress, when non-nil, receives the cumulative accounting after every
// valid agent_step or usage line. It is called from a reading goroutine,
// never concurrently with itself and never after Run returns; it should be
// quick, since reading waits for it.
func (r *Runner) Run(ctx context.Context, spec LaunchSpec, req Request, onProgress func(Progress)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	l := &launch{id: r.nextID(), start: start, onProgress: onProgress}
	return l.run(ctx, spec, req)
}

// launch is the state of one Run call.
type launch struct {
	id         string
	start      time.Time
	onProgress func(Progress)
	obs        observed // written by the reader goroutine until it is joined
	// droppedLines and droppedMax: stdout lines over the line limit (the
	// reader goroutine's, like obs).
	droppedLines int
	droppedMax   int64

	cmd      *exec.Cmd
	killed   bool   // the runner sent SIGKILL to the group
	timedOut bool   // the wall deadline elapsed
	pipeErr  string // a pipe failure (docs/contracts.md § Terminal classification, precedence 2)
	exitErr  string // a nonzero exit or signal the runner did not cause
	exitCode *int
}

func msOr(v, def int) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Millisecond
}

func (l *launch) failed(reason string) Result {
	return Result{Terminal: Failed, Failure: reason, Attempt: l.attempt()}
}

func (l *launch) attempt() Attempt {
	a := Attempt{
		ID:               l.id,
		Steps:            l.obs.steps,
		PromptTokens:     l.obs.promptTokens,
		CompletionTokens: l.obs.completionTokens,
		ExitCode:         l.exitCode,
		WallMS:           time.Since(l.start).Milliseconds(),
		DroppedLines:     l.droppedLines,
		DroppedMaxBytes:  l.droppedMax,
	}
	if l.obs.costKnown {
		c := l.obs.cost
		a.CostUSD = &c
	}
	return a
}

// mergeEnv overlays extra on base (a KEY=VALUE list), extra winning.
func mergeEnv(base []string, extra map[string]string) ([]string, error) {
	if len(extra) == 0 {
		return base, nil
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := extra[k]; !over {
			out = append(out, kv)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out, nil
}

func (l *launch) run(ctx context.Context, spec LaunchSpec, req Request) (Result, error) {
	line, err := Envelope(l.id, req)
	if err != nil {
		return l.failed("invalid request: " + err.Error()), nil
	}
	base := os.Environ()
	if len(spec.Unset) > 0 {
		base = slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return slices.Contains(spec.Unset, k)
		})
	}
	env, err := mergeEnv(base, spec.Env)
	if err != nil {
		return l.failed("spawn: " + err.Error()), nil
	}

	// Our own pipes (not cmd.StdinPipe/StdoutPipe): cmd.Wait must not close
	// the stdout reader, since Wait runs concurrently with reading and a
	// grandchild may outlive the child. os.Pipe ends are pollable, so a
	// blocked write is released by Close and a blocked read by a deadline.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return l.failed("spawn: stdin pipe: " + err.Error()), nil
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return l.failed("spawn: stdout pipe: " + err.Error()), nil
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = env
	cmd.Dir = spec.Dir
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	cmd.Stderr = os.Stderr // inherited, never read (docs/contracts.md § Process lifecycle)
	if spec.Stderr != nil {
		cmd.Stderr = spec.Stderr
		// A writer that is no file is fed by a goroutine Wait joins: a
		// grandchild that keeps stderr open must not keep Wait from
		// returning once the child exited.
		cmd.WaitDelay = PostExitDrainMS * time.Millisecond
	}
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return l.failed("spawn: " + err.Error()), nil
	}
	l.cmd = cmd
	defer reaper.Track(ctx, cmd.Process.Pid)() // the group outlives no owner
	defer stdoutR.Close()

	var closeStdinOnce sync.Once
	closeStdin := func() { closeStdinOnce.Do(func() { stdinW.Close() }) }
	defer closeStdin()
	stopped := false
	stopReading := func() {
		stopped = true
		if stdoutR.SetReadDeadline(time.Now()) != nil {
			stdoutR.Close()
		}
	}

	// The request write sits inside the deadline
	// (docs/contracts.md § Timing, environment and argv): it runs on its own
	// goroutine and closing stdin releases it.
	writeDone := make(chan error, 1)
	go func() {
		_, err := stdinW.Write(line)
		writeDone <- err
	}()
	readDone := make(chan error, 1)
	go func() {
		maxLine := spec.MaxLineBytes
		if maxLine <= 0 {
			maxLine = DefaultMaxLineBytes
		}
		readDone <- readLines(stdoutR, maxLine, func(b []byte) {
			if l.obs.apply(b) && l.onProgress != nil {
				l.onProgress(l.obs.progress())
			}
		}, func(size int64) {
			l.droppedLines++
			l.droppedMax = max(l.droppedMax, size)
		})
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var timers []*time.Timer
	after := func(d time.Duration) <-chan time.Time {
		t := time.NewTimer(d)
		timers = append(timers, t)
		return t.C
	}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()

	deadlineC := after(time.Until(l.start.Add(msOr(spec.DeadlineMS, DefaultDeadlineMS))))
	var graceC, exitWaitC, drainC <-chan time.Time
	eof, exited, cancelled := false, false, false
	var readErr, waitErr error

loop:
	for !(eof && exited) {
		select {
		case <-ctx.Done():
			cancelled = true
			l.kill()
			closeStdin()
			stopReading()
			break loop
		case <-deadlineC: // docs/contracts.md § Process lifecycle: graceful cancel, then grace
			deadlineC = nil
			l.timedOut = true
			closeStdin()
			graceC = after(msOr(spec.CancelGraceMS, DefaultCancelGraceMS))
		case <-graceC:
			l.kill()
			stopReading()
			break loop
		case <-exitWaitC: // docs/contracts.md § Process lifecycle: stdout closed but the child lingers
			l.kill()
			break loop
		case <-drainC: // the child exited; something else holds stdout
			l.kill()
			stopReading()
			break loop
		case readErr = <-readDone:
			eof = true
			if !exited {
				exitWaitC = after(ExitWaitMS * time.Millisecond)
			}
		case waitErr = <-waitDone:
			exited = true
			if !eof {
				drainC = after(PostExitDrainMS * time.Millisecond)
			}
		}
	}
	// Join every goroutine: after kill/stopReading each returns promptly,
	// and onProgress is never called after Run returns.
	if !eof {
		readErr = <-readDone
	}
	if !exited {
		waitErr = <-waitDone
	}
	closeStdin()
	writeErr := <-writeDone

	if readErr != nil && !stopped {
		l.pipeErr = "read stdout: " + readErr.Error()
	}
	if writeErr != nil && !errors.Is(writeErr, os.ErrClosed) && !errors.Is(writeErr, syscall.EPIPE) && l.pipeErr == "" {
		l.pipeErr = "write request: " + writeErr.Error()
	}
	l.noteExit(waitErr)
	// Whatever the engine left behind in its process group (a tool, a
	// wrapped CLI's child) ends with the attempt: the group is the engine's.
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)

	if cancelled {
		return Result{Attempt: l.attempt()}, ctx.Err()
	}
	return l.classify(), nil
}

// kill sends SIGKILL to the child's whole process group (and to the child
// itself, should it have left the group).
func (l *launch) kill() {
	l.killed = true
	_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	_ = l.cmd.Process.Kill()
}

// noteExit records the exit code and whether the exit status is a failure
// the child did not explain (docs/contracts.md § Terminal classification): a
// nonzero code, or a signal the runner did not send.
func (l *launch) noteExit(waitErr error) {
	ps := l.cmd.ProcessState
	if ps == nil {
		if waitErr != nil {
			l.exitErr = "wait: " + waitErr.Error()
		}
		return
	}
	if ps.Exited() {
		c := ps.ExitCode()
		l.exitCode = &c
		if c != 0 {
			l.exitErr = ps.String() // "exit status N"
		}
		return
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if l.killed && ws.Signal() == syscall.SIGKILL {
			return // our own kill
		}
	}
	l.exitErr = ps.String() // e.g. "signal: segmentation fault"
}

// classify applies the precedence table of
// docs/contracts.md § Terminal classification.
func (l *launch) classify() Result {
	res := Result{Attempt: l.attempt(), Yield: l.obs.yield}
	switch {
	case l.obs.hasReport:
		res.Terminal, res.Report = Captured, l.obs.report
	case l.obs.hasFailure:
		res.Terminal, res.Failure = Failed, l.obs.failure
	case l.pipeErr != "":
		res.Terminal, res.Failure = Failed, l.pipeErr
	case l.exitErr != "":
		res.Terminal, res.Failure = Failed, l.exitErr
	case l.timedOut:
		res.Terminal = TimedOut
	case l.obs.maxSteps:
		res.Terminal = MaxSteps
	case l.obs.yield != nil:
		res.Terminal = ContextYield
	default:
		res.Terminal = NoReport
	}
	return res
}
