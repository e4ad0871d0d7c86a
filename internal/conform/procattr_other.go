//go:build !linux

package conform

import "syscall"

// procAttr puts the engine in its own process group
// (docs/contracts.md § Process lifecycle).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
