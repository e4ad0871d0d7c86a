// Package local launches workers as local `stratus runner` subprocesses, the
// embedded stand-in for ECS tasks.
package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/stratusflow/stratus/internal/launch"
)

// Launcher starts `<Executable> runner` with the worker environment.
type Launcher struct {
	Executable string   // the stratus binary; "" = os.Executable()
	Args       []string // nil = ["runner"]

	mu    sync.Mutex
	procs map[string]*exec.Cmd
	wg    sync.WaitGroup
}

var _ launch.Launcher = (*Launcher)(nil)

// Launch starts one runner process and reaps it in the background.
func (l *Launcher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	exe := l.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("locate stratus binary: %w", err)
		}
	}
	args := l.Args
	if args == nil {
		args = []string{"runner"}
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(),
		launch.EnvAPIURL+"="+s.APIURL, launch.EnvHandle+"="+s.Handle, launch.EnvTaskID+"="+s.TaskID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var logf *os.File
	if s.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(s.LogPath), 0o755); err != nil {
			return "", err
		}
		f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return "", err
		}
		logf = f
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return "", fmt.Errorf("start runner: %w", err)
	}
	id := fmt.Sprintf("pid-%d", cmd.Process.Pid)
	l.mu.Lock()
	if l.procs == nil {
		l.procs = map[string]*exec.Cmd{}
	}
	l.procs[id] = cmd
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		l.mu.Lock()
		delete(l.procs, id)
		l.mu.Unlock()
	}()
	return id, nil
}

// Stop kills the runner's process group (the runner and its engine).
func (l *Launcher) Stop(_ context.Context, id string) error {
	l.mu.Lock()
	cmd := l.procs[id]
	l.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// StopAll kills every runner still alive and waits for them to be reaped.
func (l *Launcher) StopAll() {
	l.mu.Lock()
	ids := make([]string, 0, len(l.procs))
	for id := range l.procs {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	for _, id := range ids {
		l.Stop(context.Background(), id)
	}
	l.wg.Wait()
}
