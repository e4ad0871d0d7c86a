//go:build !linux

package nodeexec

import (
	"os/exec"
	"syscall"
)

// procAttr puts a command in its own process group, so a timeout kills
// everything it started.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitAndKillGroup waits for cmd's main process to end, then kills what is
// left of its process group, and returns Wait's error.
func waitAndKillGroup(cmd *exec.Cmd) error {
	err := cmd.Wait()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return err
}
