//go:build !linux

package engine

import "syscall"

// cliProcAttr puts a wrapped CLI in its own process group.
func cliProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
