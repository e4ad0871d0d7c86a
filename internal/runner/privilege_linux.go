package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// envReexec marks the process DropPrivileges re-executed: a second pass
// that finds privileges left does not re-execute again.
const envReexec = "STRATUS_RUNNER_UNPRIVILEGED"

// DropPrivileges makes this process unable to hold or gain a capability,
// and so every process it starts: an engine then cannot read the memory or
// environment of a runner that ProtectCredentials made non-dumpable, since
// the kernel lets only a process with CAP_SYS_PTRACE past that
// (proc(5) /proc/pid/environ, /proc/pid/mem; ptrace(2) "Ptrace access
// mode checking"). docs/security.md § A pooled runner's AWS credentials.
//
// Capabilities, the bounding set and no_new_privs belong to a thread, and a
// Go process has several, any of which may start an engine; so on the
// calling thread DropPrivileges empties the bounding set (a process of uid
// 0 only: it needs CAP_SETPCAP, and a root process's execve would
// otherwise give every capability of it back — capabilities(7)
// "Capabilities and execution of programs by root"), clears the ambient,
// inheritable, permitted and effective sets, sets no_new_privs (a setuid
// or file-capability program gains nothing: prctl(2) PR_SET_NO_NEW_PRIVS),
// and re-executes this binary (/proc/self/exe) with the same arguments and
// environment, whose every thread inherits all of it. A process that holds
// none already (the re-executed one) returns nil at once.
//
// A process of uid 0 stays uid 0: its engines are root without any
// capability, which keeps them out of this process but not out of root's
// files on the host.
//
// It returns only in a process without privileges (nil), or with an error
// naming what could not be dropped: a root process without CAP_SETPCAP, a
// /proc/self/status that cannot be read, an execve refused.
func DropPrivileges() error {
	root := os.Getuid() == 0 || os.Geteuid() == 0
	st, err := readPrivileges()
	if err != nil {
		return err
	}
	if st.none(root) {
		os.Unsetenv(envReexec)
		return nil
	}
	if os.Getenv(envReexec) != "" {
		os.Unsetenv(envReexec)
		return fmt.Errorf("this runner still holds privileges after dropping them (/proc/self/status: %s)", st)
	}
	// The thread that drops them is the one that executes. It stays
	// locked on an error: no other goroutine runs on a thread half
	// dropped.
	runtime.LockOSThread()
	if root {
		for c := 0; ; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) { // past the kernel's last capability
				break
			}
			if err != nil {
				return fmt.Errorf("empty the capability bounding set of this runner, which runs as root (capability %d: %v): without CAP_SETPCAP it cannot, and its engines would be root with every capability; run it as an unprivileged user", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	var none [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &none[0]); err != nil {
		return fmt.Errorf("clear the capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), envReexec+"=1"))
	return fmt.Errorf("re-execute this runner without privileges: %w", err)
}

// CloseInheritedFiles marks every file descriptor above standard error
// close-on-exec: one this process inherited open (from whatever started
// it) reaches none of the processes it starts. Go opens its own
// close-on-exec already. Errors: /proc/self/fd cannot be read.
func CloseInheritedFiles() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
	return nil
}

// privileges are the capability sets and no_new_privs of this thread, as
// /proc/self/status says them (proc(5)).
type privileges struct {
	inh, prm, eff, bnd, amb uint64
	noNewPrivs              bool
}

// none reports whether a process of these privileges holds no capability
// and can gain none: every set but the bounding set empty and
// no_new_privs set; for a root process the bounding set empty too (its
// execve would fill the permitted set from it).
func (p privileges) none(root bool) bool {
	if p.inh|p.prm|p.eff|p.amb != 0 || !p.noNewPrivs {
		return false
	}
	return !root || p.bnd == 0
}

func (p privileges) String() string {
	nnp := 0
	if p.noNewPrivs {
		nnp = 1
	}
	return fmt.Sprintf("CapInh %016x, CapPrm %016x, CapEff %016x, CapBnd %016x, CapAmb %016x, NoNewPrivs %d", p.inh, p.prm, p.eff, p.bnd, p.amb, nnp)
}

func readPrivileges() (privileges, error) {
	var p privileges
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return p, fmt.Errorf("read this runner's capabilities: %w", err)
	}
	defer f.Close()
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var dst *uint64
		switch k {
		case "CapInh":
			dst = &p.inh
		case "CapPrm":
			dst = &p.prm
		case "CapEff":
			dst = &p.eff
		case "CapBnd":
			dst = &p.bnd
		case "CapAmb":
			dst = &p.amb
		case "NoNewPrivs":
			p.noNewPrivs = v == "1"
			seen++
			continue
		default:
			continue
		}
		n, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			return p, fmt.Errorf("read this runner's capabilities: /proc/self/status %s %q: %v", k, v, err)
		}
		*dst = n
		seen++
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("read this runner's capabilities: %w", err)
	}
	if seen < 6 {
		return p, errors.New("read this runner's capabilities: /proc/self/status has no CapInh, CapPrm, CapEff, CapBnd, CapAmb and NoNewPrivs (Linux 4.10 or later has them)")
	}
	return p, nil
}
