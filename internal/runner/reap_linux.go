package runner

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// BecomeSubreaper makes this process the subreaper of its descendants
// (prctl PR_SET_CHILD_SUBREAPER, Linux): a process a step's engine leaves
// behind, even one that left the engine's process group, becomes this
// process's child when its parent ends, so Reap finds it.
func BecomeSubreaper() error {
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// ProtectCredentials makes this process non-dumpable (prctl
// PR_SET_DUMPABLE 0): /proc/<pid>/environ, /proc/<pid>/mem and the rest
// of what ptrace(2) access mode checking guards are then readable only by
// a process with CAP_SYS_PTRACE, not by another process of the same user —
// an engine, once DropPrivileges left it no capability, cannot read the
// pool's AWS credentials from its runner. It holds for this process image
// only: execve makes a process dumpable again (prctl(2)).
func ProtectCredentials() error {
	const prSetDumpable = 4
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// Reap kills every child process of this one and waits for it: what a
// step left behind, found through /proc, once the step has ended (its
// engine's process group was killed already; this is what escaped it).
func Reap() {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == self {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	}
}
