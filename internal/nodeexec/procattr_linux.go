package nodeexec

import "syscall"

// procAttr puts a command in its own process group, so a timeout kills
// everything it started, and on Linux asks the kernel to kill it when the
// runner dies first (a SIGKILLed runner must not leave a test suite running).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
