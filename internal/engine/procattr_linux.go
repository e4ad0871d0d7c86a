package engine

import "syscall"

// cliProcAttr puts a wrapped CLI in its own process group (the shim stops
// the whole group) and, on Linux, has the kernel kill it if the shim dies
// first, so a killed shim leaves no CLI running.
func cliProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
