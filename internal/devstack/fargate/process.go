package fargate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/logging"
)

// ProcessBackend runs a task as a local process: `Self runner` (the
// image's entrypoint) in a fresh directory of its own under Root (its
// working directory and HOME), with the task's environment plus Env (a
// PATH: the process has the operator's file system, where a container
// has its image's), its output in runner.log there. It is what `dev aws
// --runners process` uses where no container engine runs; it shares the
// operator's file system and network, which a container does not.
type ProcessBackend struct {
	Self string   // the stratus binary
	Root string   // a directory per task is made in it
	Env  []string // added to each task's environment (PATH, engine settings)
}

// Name is "process".
func (b *ProcessBackend) Name() string { return "process" }

// Start starts c's runner. Errors: the directory or the process could not
// be made.
func (b *ProcessBackend) Start(_ context.Context, c Container) (Running, error) {
	dir := filepath.Join(b.Root, c.TaskID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "runner.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the process holds its own
	args := c.Command
	if len(args) == 0 {
		args = []string{"runner"}
	}
	cmd := exec.Command(b.Self, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.Env = append(append([]string{"HOME=" + dir}, b.Env...), c.Env...)
	// Its own group, so Stop reaches the engine it started; and it dies
	// with the stand-in.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("CannotStartContainerError: %s runner: %v", b.Self, err)
	}
	p := &process{cmd: cmd, dir: dir, log: logPath, done: make(chan struct{}), code: -1}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.code = exitCode(err)
		p.mu.Unlock()
		// Whatever it left behind in its group goes with it, as a
		// container's processes do.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(p.done)
	}()
	return p, nil
}

type process struct {
	cmd  *exec.Cmd
	dir  string
	log  string
	done chan struct{}

	mu   sync.Mutex
	code int
}

func (p *process) Stop(grace time.Duration) {
	pid := p.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(grace):
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
}

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

func (p *process) LastLines(n int) []string { return lastLines(p.log, n) }

// Where names the process's pid (a test kills it as an OOM kill would)
// and its directory.
func (p *process) Where() string { return fmt.Sprintf("process %d in %s", p.cmd.Process.Pid, p.dir) }

// exitCode is the exit code of a process that ended with err (cmd.Wait's):
// its status, or 128+N when signal N ended it, as container engines
// report a container's end and ECS passes it on (containers[].exitCode:
// 137 for SIGKILL, an OOM kill's or a stop past its stopTimeout); -1 when
// it is not known.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// lastLines is the last n non-empty lines of the file at path.
func lastLines(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return tail(b, n)
}

// tail is the last n lines of b that lastOf keeps.
func tail(b []byte, n int) []string {
	return lastOf(strings.Split(string(bytes.TrimSpace(b)), "\n"), n)
}

// lastOf is the last n of lines that are neither empty nor a record of a
// Stratus logger (logging.IsRecord): what a task's output says beyond the
// runner's own records — the engine's stderr, a crash — as an embedded
// worker's exit reason keeps it (worker.Service's log tail).
func lastOf(lines []string, n int) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && !logging.IsRecord(l) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
