// Package local launches workers as local runner subprocesses, the
// embedded stand-in for ECS tasks: the small stratus-runner binary when it
// sits beside stratus, `stratus runner` otherwise.
package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/statedir"
)

// Launcher starts a runner with the worker environment: RunnerBinary
// beside Executable when it is there (it starts in a fraction of stratus's
// time and memory), else `<Executable> runner`. The runner gets Executable as
// STRATUS_BIN, what it runs for "{stratus}".
type Launcher struct {
	Executable string   // the stratus binary; "" = os.Executable()
	Args       []string // nil = the runner (above); else Executable with these arguments
	// Env, when not nil, is the whole environment of each runner besides
	// the worker's variables (nil: this process's environment). The AWS
	// stand-in gives a runner only what a Fargate task would have.
	Env []string
	// Dir, when set, returns the working directory of a runner (created
	// if absent), which is also its TMPDIR (where it checks a run's
	// workspace out: a Fargate task's scratch space is its own); "" or
	// unset: this process's.
	Dir func(launch.Spec) string
	// WatchParent tells each runner this process's pid
	// (launch.EnvParentPID): a runner whose parent is gone — this process
	// killed, even with SIGKILL — stops its engine and exits
	// (docs/architecture.md § The run lifecycle: nothing outlives its run).
	WatchParent bool
	// Slots, when set, bound the runners alive at once: Launch waits for
	// a slot (heartbeating through Spec.Waiting), released when the
	// runner ends.
	Slots *launch.Slots

	mu    sync.Mutex
	procs map[string]*exec.Cmd
	done  map[string]chan struct{}
	logs  map[string]*os.File // each runner's log, for Stop to say why
	wg    sync.WaitGroup
}

var _ launch.Launcher = (*Launcher)(nil)

// RunnerBinary is the small runner's file name, beside the stratus binary.
const RunnerBinary = "stratus-runner"

// RunnerFor returns the command that runs a worker for the stratus binary
// exe: RunnerBinary beside it when that is an executable file, else exe
// with the argument "runner".
func RunnerFor(exe string) (string, []string) {
	small := filepath.Join(filepath.Dir(exe), RunnerBinary)
	if fi, err := os.Stat(small); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return small, nil
	}
	return exe, []string{"runner"}
}

// Launch starts one runner process and reaps it in the background; with
// Slots, once a slot is free.
func (l *Launcher) Launch(ctx context.Context, s launch.Spec) (id string, err error) {
	if l.Slots != nil {
		if err := l.Slots.Acquire(ctx, launch.Heartbeat(s.Waiting)); err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				l.Slots.Release()
			}
		}()
	}
	exe := l.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("locate stratus binary: %w", err)
		}
	}
	bin, args := exe, l.Args
	if args == nil {
		bin, args = RunnerFor(exe)
	}
	cmd := exec.Command(bin, args...)
	base := l.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = append(slices.Clone(base),
		launch.EnvAPIURL+"="+s.APIURL, launch.EnvHandle+"="+s.Handle, launch.EnvTaskID+"="+s.TaskID, launch.EnvStratus+"="+exe)
	if s.SpoolDir != "" {
		cmd.Env = append(cmd.Env, launch.EnvSpoolDir+"="+s.SpoolDir)
	}
	if l.Dir != nil {
		if cmd.Dir = l.Dir(s); cmd.Dir != "" {
			cmd.Env = append(cmd.Env, "TMPDIR="+cmd.Dir)
			if err := os.MkdirAll(cmd.Dir, statedir.DirPerm); err != nil {
				return "", fmt.Errorf("runner directory: %w", err)
			}
		}
	}
	if l.WatchParent {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", launch.EnvParentPID, os.Getpid()))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logf *os.File
	if s.LogPath != "" {
		// Embedded, the log is in the state dir: the owner's alone
		// (docs/security.md § Files under .stratus).
		if err := os.MkdirAll(filepath.Dir(s.LogPath), statedir.DirPerm); err != nil {
			return "", err
		}
		f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, statedir.FilePerm)
		if err != nil {
			return "", err
		}
		logf = f
		cmd.Stdout, cmd.Stderr = f, f
		// The runner's log is read back (stratus logs, the viewer, a step's
		// failure reason) as JSON records, whatever the operator's shell
		// asks of its terminal.
		cmd.Env = append(cmd.Env, logging.EnvFormat+"=json")
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return "", fmt.Errorf("start runner: %w", err)
	}
	id = fmt.Sprintf("pid-%d", cmd.Process.Pid)
	l.mu.Lock()
	if l.procs == nil {
		l.procs, l.done, l.logs = map[string]*exec.Cmd{}, map[string]chan struct{}{}, map[string]*os.File{}
	}
	l.procs[id] = cmd
	if logf != nil {
		l.logs[id] = logf
	}
	l.mu.Unlock()
	l.wg.Add(1)
	done := make(chan struct{})
	l.mu.Lock()
	l.done[id] = done
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		err := cmd.Wait()
		l.mu.Lock()
		if logf != nil {
			logf.Close()
		}
		delete(l.procs, id)
		delete(l.done, id)
		delete(l.logs, id)
		l.mu.Unlock()
		close(done)
		if l.Slots != nil {
			l.Slots.Release()
		}
		if s.OnExit != nil {
			s.OnExit(err)
		}
	}()
	return id, nil
}

// StopGrace is how long Stop waits after SIGTERM before it kills: the
// runner's own engine cancel grace (docs/contracts.md § Process lifecycle:
// 5000 ms) plus a margin.
var StopGrace = 7 * time.Second

// Stop sends SIGTERM to the runner's process group, so the runner cancels
// its engine (which lives in a process group of its own), and SIGKILL to
// the runner's group after StopGrace if it is still alive. A signal
// carries no reason: why it is stopped (launch.StopCause of ctx) is
// written to the runner's log first, as a record of this launcher.
func (l *Launcher) Stop(ctx context.Context, id string) error {
	l.mu.Lock()
	cmd, done := l.procs[id], l.done[id]
	if logf := l.logs[id]; logf != nil {
		logging.JSON(logf, "launcher").Warn("stopping the runner: " + launch.StopCause(ctx))
	}
	l.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(StopGrace):
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// StopAll stops every runner still alive (in parallel), telling each why
// ("" is launch.DefaultStopCause), and waits for them to be reaped.
func (l *Launcher) StopAll(why string) {
	ctx := context.Background()
	if why != "" {
		ctx = launch.WithStopCause(ctx, why)
	}
	l.mu.Lock()
	ids := make([]string, 0, len(l.procs))
	for id := range l.procs {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Stop(ctx, id)
		}()
	}
	wg.Wait()
	l.wg.Wait()
}
