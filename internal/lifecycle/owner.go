package lifecycle

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Owner returns the owner identity of this process, for stratus.Run.Owner:
// "<host>/<pid>/<start>", where start is the process's start time as the
// kernel counts it (Linux: /proc/<pid>/stat field 22, clock ticks since
// boot; "" elsewhere), so that a pid reused by another process is not taken
// for the owner.
func Owner() string { return ownerOf(os.Getpid()) }

func ownerOf(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, pid, processStart(pid))
}

// processStart returns field 22 (starttime) of /proc/<pid>/stat, or "" when
// it cannot be read (no procfs, no such process).
func processStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: count fields from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 { // fields[0] is field 3 (state); starttime is field 22
		return ""
	}
	return fields[19]
}

// OwnerAlive says whether the process an owner identity names is still
// running. known is false when this machine cannot tell: the owner is on
// another host, or the identity is malformed or empty (a run on AWS has
// none); callers then leave the run as it is. A pid that exists but
// started at another time is a different process: the owner is dead.
func OwnerAlive(owner string) (alive, known bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false, false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(parts[1])
	if parts[0] != host || err != nil || pid <= 0 {
		return false, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, true // ESRCH: no such process
	}
	if start := processStart(pid); parts[2] != "" && start != "" && start != parts[2] {
		return false, true
	}
	return true, true
}
