package container

import "syscall"

// serviceProcAttr ends a started podman service with the process that
// started it, even when that process is killed; in a process group of its
// own, so a terminal's Ctrl-C reaches only that process, which still has
// the service to stop and remove its containers with.
func serviceProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}
