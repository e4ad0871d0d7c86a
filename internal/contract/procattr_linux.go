package contract

import "syscall"

// procAttr puts the engine in its own process group (so the whole group
// can be killed, docs/contracts.md § Process lifecycle) and, on Linux, asks
// the kernel to kill the engine when the runner dies without stopping it (a
// SIGKILLed runner must not leave an engine running on).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
