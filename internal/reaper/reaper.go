// Package reaper keeps the promise that no process group a run started
// outlives the process that owns it
// (docs/architecture.md § The run lifecycle), when engines are children of
// that process itself: the in-process worker
// (docs/contracts.md § The in-process twin). A process that leaves its group
// (setsid, a daemon's double fork) is in no group named here and is not
// stopped (docs/security.md § Who is trusted). An engine and a checks or tool
// command each lead a process group of their own
// (docs/contracts.md § Process lifecycle), and Pdeathsig ends the group's
// leader when its parent dies, but not what the leader started. So the owner
// starts one small reaper process and tells it, over a pipe, each group it
// starts ("+PGID") and each it has seen end ("-PGID"). The owner's death,
// SIGKILL included, closes the pipe; the reaper then sends SIGKILL to every
// group still named, and exits.
//
// One reaper serves a whole process (every run and step in it), so its cost
// is one spawn per process, not per step.
package reaper

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// Arg is the argument that makes the runner binaries (stratus-runner, and
// `stratus runner`) the reaper: `stratus-runner reap`.
const Arg = "reap"

// Reaper is the owner's end of a reaper process. Its methods are safe for
// concurrent use; a nil *Reaper tracks nothing.
type Reaper struct {
	mu  sync.Mutex
	w   *os.File // the pipe to the reaper's stdin (close-on-exec here)
	cmd *exec.Cmd
	err error // the first write that failed: the reaper is gone
}

// Start starts the reaper: name with args (e.g. stratus-runner reap), in a
// process group of its own so that a terminal's Ctrl-C, meant for the
// owner, does not end it before the owner has stopped its groups.
func Start(name string, args ...string) (*Reaper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("reaper pipe: %w", err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start the reaper %s: %w", name, err)
	}
	r.Close()
	go cmd.Wait()
	return &Reaper{w: w, cmd: cmd}, nil
}

// Pid is the reaper's process id (0 for nil).
func (r *Reaper) Pid() int {
	if r == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Track names process group pgid to the reaper, and returns what forgets
// it once the group is known to be over. A reaper that is gone makes Track
// return an error (the caller decides whether to go on unguarded).
func (r *Reaper) Track(pgid int) (forget func(), err error) {
	if r == nil {
		return func() {}, nil
	}
	if err := r.send('+', pgid); err != nil {
		return func() {}, err
	}
	return func() { r.send('-', pgid) }, nil
}

func (r *Reaper) send(op byte, pgid int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if _, err := r.w.Write(strconv.AppendInt([]byte{op}, int64(pgid), 10)); err != nil {
		r.err = fmt.Errorf("the reaper (pid %d) is gone: %w", r.cmd.Process.Pid, err)
		return r.err
	}
	_, err := r.w.Write([]byte{'\n'})
	return err
}

// Close closes the pipe: the reaper kills what is still named and exits.
func (r *Reaper) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = os.ErrClosed
	}
	return r.w.Close()
}

type ctxKey struct{}

// NewContext returns ctx carrying r: the processes started under it (an
// engine by internal/contract, a checks or tool command by
// internal/nodeexec) are tracked by r.
func NewContext(ctx context.Context, r *Reaper) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// Track tracks process group pgid with the reaper ctx carries, if any
// (NewContext); forget is never nil. A failure to reach the reaper is not
// returned: the process group still ends with its leader's Pdeathsig.
func Track(ctx context.Context, pgid int) (forget func()) {
	r, _ := ctx.Value(ctxKey{}).(*Reaper)
	forget, _ = r.Track(pgid)
	return forget
}

// Main is the reaper process: it reads "+PGID" and "-PGID" lines from in
// until EOF (its owner closed the pipe or died), then sends SIGKILL to
// every process group still named, and returns 0. Malformed lines are
// skipped. It ignores SIGINT, SIGTERM and SIGHUP: only its owner's end
// ends it.
func Main(in io.Reader) int {
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	reap(in)
	return 0
}

func reap(in io.Reader) {
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(string(line[1:]))
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
