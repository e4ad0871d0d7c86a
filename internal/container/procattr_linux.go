package container

import "syscall"

// serviceProcAttr ends a started podman service with the process that
// started it, even when that process is killed.
func serviceProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
