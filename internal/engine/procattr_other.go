//go:build !linux

package engine

import "syscall"

// cliProcAttr keeps a wrapped CLI in the shim's process group (see the
// Linux version).
func cliProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
