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
	stdin   io.Reader
	timeout time.Duration
	stdout  io.Writer
	stderr  io.Writer
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

// killGrace bounds how long Wait waits for the output pipes once the
// process group is killed (a grandchild that escaped the group may hold
// them open).
const killGrace = 5 * time.Second

// run starts p and waits for it. A timeout kills the whole process group.
// The error is errCancelled (wrapped) when ctx ends first; every other
// outcome is in the procResult.
func run(ctx context.Context, p proc) (procResult, error) {
	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var cmd *exec.Cmd
	start := time.Now()
	// ETXTBSY: an executable written a moment ago can still be open for
	// writing in a child forked concurrently (between its fork and exec);
	// it clears within milliseconds, so the start is tried again.
	for try := 0; ; try++ {
		cmd = exec.CommandContext(tctx, p.path)
		cmd.Args = p.argv
		cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = p.dir, p.env, p.stdin, p.stdout, p.stderr
		if cmd.Env == nil {
			cmd.Env = []string{} // nil would mean the runner's whole environment
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
		return procResult{status: StatusLaunchError, exitCode: -1, err: err.Error()}, nil
	}
	err := cmd.Wait()
	r := procResult{status: StatusExited, duration: time.Since(start)}
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("%w: %v", errCancelled, ctx.Err())
	case tctx.Err() == context.DeadlineExceeded:
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
	return r, nil
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
