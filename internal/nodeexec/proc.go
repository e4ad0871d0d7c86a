package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/reaper"
)

// Env returns the environment a command or tool gets: the variables named
// in allowed that are set in the runner's environment, as NAME=value
// (worc configuration.md § security: only these reach child processes;
// names absent here are skipped).
func Env(allowed []string) []string {
	var env []string
	seen := map[string]bool{}
	for _, k := range allowed {
		if seen[k] {
			continue
		}
		seen[k] = true
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// errAbsent marks a binary that is not there (as opposed to one that is
// there and cannot start): the one launch failure skip_if_unavailable
// turns into a skip.
var errAbsent = errors.New("not found")

// resolveBinary finds argv[0] the way the command will be started: a name
// with a slash relative to cwd, a bare name on the PATH the command gets
// (the runner's PATH when the allowlist drops PATH). It returns errAbsent
// (wrapped) when there is no such file.
func resolveBinary(name, cwd string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", name, errAbsent)
		} else if err != nil {
			return "", err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s is not an executable file", p)
		}
		return p, nil
	}
	pathVar, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			pathVar, ok = v, true
		}
	}
	if !ok {
		pathVar = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w on PATH", name, errAbsent)
}

// proc is one bounded external process.
type proc struct {
	path    string   // resolved binary
	argv    []string // argv[0] as configured
	dir     string
	env     []string
	stdin   []byte // written to its stdin; nil: /dev/null
	timeout time.Duration
	// stdout and stderr receive its output (nil: discarded); with combined,
	// stderr goes to stdout too, through one pipe, in the order written.
	stdout   io.Writer
	stderr   io.Writer
	combined bool
}

// procResult is how a process ended.
type procResult struct {
	status   string // exited | timed_out | launch_error
	exitCode int
	err      string
	duration time.Duration
}

// errCancelled is returned when the runner itself is stopping: there is no
// result to report (the step's worker was stopped).
var errCancelled = errors.New("cancelled")

// killGrace bounds how long the output is still read once the process
// group is killed (a grandchild that escaped the group — setsid — may hold
// the output open: what it writes after that is not captured), and how
// long Wait waits after a timeout kill before it kills the main process
// directly.
const killGrace = 5 * time.Second

// run starts p and waits for its main process. When that process ends —
// it exits, or its timeout or ctx kills it — its whole process group is
// killed: a background child it left (`sleep 300 &`) neither outlives it
// nor holds its verdict hostage. The verdict is the main process's exit
// status; the output is what the group wrote until then (read for at most
// killGrace more). The child gets the write ends of pipes the runner
// drains itself (an *os.File, so Wait does not wait for the output to
// close). The error is errCancelled (wrapped) when ctx ends first; every
// other outcome is in the procResult.
func run(ctx context.Context, p proc) (procResult, error) {
	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	launchErr := func(err error) (procResult, error) {
		return procResult{status: StatusLaunchError, exitCode: -1, err: err.Error()}, nil
	}
	var caps []*capture
	defer func() {
		for _, c := range caps {
			c.close()
		}
	}()
	open := func(w io.Writer) (*capture, error) {
		if w == nil {
			return nil, nil
		}
		c, err := newCapture(w)
		if err == nil {
			caps = append(caps, c)
		}
		return c, err
	}
	stdout, err := open(p.stdout)
	if err != nil {
		return launchErr(err)
	}
	stderr := stdout
	if !p.combined {
		if stderr, err = open(p.stderr); err != nil {
			return launchErr(err)
		}
	}
	var stdinR, stdinW *os.File
	if p.stdin != nil {
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			return launchErr(err)
		}
		defer stdinR.Close()
		defer stdinW.Close()
	}

	var cmd *exec.Cmd
	start := time.Now()
	// ETXTBSY: an executable written a moment ago can still be open for
	// writing in a child forked concurrently (between its fork and exec);
	// it clears within milliseconds, so the start is tried again.
	for try := 0; ; try++ {
		cmd = exec.CommandContext(tctx, p.path)
		cmd.Args = p.argv
		cmd.Dir, cmd.Env = p.dir, p.env
		if cmd.Env == nil {
			cmd.Env = []string{} // nil would mean the runner's whole environment
		}
		// Each is set only when non-nil: a nil *os.File in the interface
		// is not a nil interface.
		if stdinR != nil {
			cmd.Stdin = stdinR
		}
		if stdout != nil {
			cmd.Stdout = stdout.w
		}
		if stderr != nil {
			cmd.Stderr = stderr.w
		}
		cmd.SysProcAttr = procAttr()
		c := cmd
		cmd.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = killGrace
		err := cmd.Start()
		if err == nil {
			break
		}
		if errors.Is(err, syscall.ETXTBSY) && try < 5 {
			time.Sleep(time.Duration(try+1) * 10 * time.Millisecond)
			continue
		}
		return launchErr(err)
	}
	defer reaper.Track(ctx, cmd.Process.Pid)() // the group outlives no owner
	// The child's ends now live in the child (and whatever it starts): the
	// runner's copies are closed, so the output ends when the last process
	// holding it does.
	for _, c := range caps {
		c.started()
	}
	stdinDone := make(chan struct{})
	if stdinW != nil {
		stdinR.Close()
		go func() {
			defer close(stdinDone)
			stdinW.Write(p.stdin) // EPIPE when the process does not read it all: not an error
			stdinW.Close()
		}()
	} else {
		close(stdinDone)
	}

	err = waitAndKillGroup(cmd)
	r := procResult{status: StatusExited, duration: time.Since(start)}
	timedOut := tctx.Err() == context.DeadlineExceeded
	if stdinW != nil {
		stdinW.Close() // unblocks a write nobody reads (a process outside the group holds stdin)
	}
	<-stdinDone
	cut := false
	for _, c := range caps {
		if !c.wait(killGrace) {
			cut = true
		}
	}
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("%w: %v", errCancelled, ctx.Err())
	case timedOut:
		r.status, r.exitCode = StatusTimedOut, -1
		r.err = fmt.Sprintf("killed after its timeout of %s", p.timeout)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.exitCode = ee.ExitCode() // -1 when a signal ended it
			if r.exitCode < 0 {
				r.err = ee.String()
			}
		} else {
			r.exitCode, r.err = -1, err.Error()
		}
	}
	if cut && r.err == "" {
		r.err = fmt.Sprintf("output cut: a process outside its process group held it open %s after the command ended", killGrace)
	}
	return r, nil
}

// capture is one output pipe: the child writes to w, a goroutine copies r
// to dst.
type capture struct {
	dst  io.Writer
	r, w *os.File
	done chan struct{}
	err  error // the copy's end: nil at EOF, else why it was cut off
}

func newCapture(dst io.Writer) (*capture, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &capture{dst: dst, r: r, w: w, done: make(chan struct{})}, nil
}

// started closes the runner's copy of the write end and starts draining.
func (c *capture) started() {
	c.w.Close()
	go func() {
		defer close(c.done)
		_, c.err = io.Copy(c.dst, c.r)
	}()
}

// wait waits for the output's end, at most grace more; false when it was
// cut off.
func (c *capture) wait(grace time.Duration) bool {
	select {
	case <-c.done:
		return c.err == nil
	default:
	}
	if c.r.SetReadDeadline(time.Now().Add(grace)) != nil {
		// Not pollable: closing the read end is what ends the copy.
		t := time.AfterFunc(grace, func() { c.r.Close() })
		defer t.Stop()
	}
	<-c.done
	return c.err == nil
}

// close releases both ends (each is closed at most once by then, or now).
func (c *capture) close() {
	c.r.Close()
	c.w.Close()
}

// tailBuffer keeps the last max bytes written and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) > b.max {
		s = s[len(s)-b.max:]
	}
	return string(s)
}

// headBuffer keeps the first max bytes written and counts them all.
type headBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Resolve finds a check command's argv[0] as a checks node will start it
// in cwd with env (resolveBinary: a name with a slash relative to cwd, a
// bare name on env's PATH, this process's PATH when env sets none), for
// validate and doctor to say before a run what the run would meet.
//
// Errors: one wrapping ErrAbsent when there is no such file (a checks node
// fails with a launch error, or skips the set under skip_if_unavailable);
// another when the file is there but not executable.
func Resolve(name, cwd string, env []string) (string, error) { return resolveBinary(name, cwd, env) }

// ErrAbsent is errAbsent for callers outside the package (errors.Is).
var ErrAbsent = errAbsent
