//go:build !linux

package nodeexec

import "syscall"

// procAttr puts a command in its own process group, so a timeout kills
// everything it started.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
