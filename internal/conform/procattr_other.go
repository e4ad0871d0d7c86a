//go:build !linux

package conform

import "syscall"

// procAttr puts the engine in its own process group (seed 003 § 1).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
