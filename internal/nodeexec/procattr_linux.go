package nodeexec

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// procAttr puts a command in its own process group, so a timeout kills
// everything it started, and on Linux asks the kernel to kill it when the
// runner dies first (a SIGKILLed runner must not leave a test suite running).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitid(2) arguments (linux/wait.h).
const (
	pPID    = 1
	wExited = 0x4
	wNoWait = 0x1000000
)

// waitAndKillGroup waits for cmd's main process to end, kills its process
// group, then reaps it and returns Wait's error. The group is killed while
// the main process is a zombie (waitid with WNOWAIT): its pid, which is the
// group's id, cannot have been reused by then.
func waitAndKillGroup(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	var info [128]byte // siginfo_t, unread
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			// Not waitable this way: reap first, then kill what is left.
			err := cmd.Wait()
			syscall.Kill(-pid, syscall.SIGKILL)
			return err
		}
		break
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	return cmd.Wait()
}
