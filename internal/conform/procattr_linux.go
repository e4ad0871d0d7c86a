package conform

import "syscall"

// procAttr puts the engine in its own process group, so a kill reaches its
// tool subprocesses too, and has the kernel kill it should this process die
// first (as internal/contract does, docs/contracts.md § Process lifecycle).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
