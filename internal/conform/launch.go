package conform

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/contract"
)

// heldSlackMS is how long after the engine's own exit its stdout may still
// reach EOF before the capture says another process held it open.
const heldSlackMS = 100

// capture is what one raw launch printed and how it ended. Times are in
// milliseconds since the launch started; -1 means "did not happen".
type capture struct {
	// name says which launch this was, for details ("the normal run").
	name string
	// lines are the stdout lines without their '\n'; a final line without
	// a newline is included.
	lines []string
	// finished: stdout reached EOF and the engine exited before stdin was
	// closed.
	finished bool
	// killed: the engine's process group was killed (the grace after stdin
	// closed ran out, or stdout stayed open too long after the exit).
	killed bool
	// closedMS is when stdin was closed; closedWhy says why.
	closedMS  int64
	closedWhy string
	// exitMS is when the engine itself exited, eofMS when its stdout
	// reached EOF (or reading stopped), endMS when both had happened.
	exitMS, eofMS, endMS int64
	// exitCode is the engine's exit status, nil when it died of a signal.
	exitCode *int
	// err is a spawn or pipe failure, or the caller's cancellation.
	err error
}

// held reports whether the engine exited but its stdout stayed open
// noticeably longer: another process (a grandchild) held it.
func (c capture) held() bool {
	return c.exitMS >= 0 && c.eofMS-c.exitMS >= heldSlackMS
}

// heldNote says that another process held stdout open; "" when none did.
func (c capture) heldNote() string {
	if !c.held() {
		return ""
	}
	s := fmt.Sprintf("the engine exited at %d ms; its stdout stayed open until %d ms, held by another process", c.exitMS, c.eofMS)
	if c.killed {
		s += ", then killed with the engine's process group"
	}
	return s
}

// note is a parenthetical for check details when the launch did not finish
// by itself.
func (c capture) note(t Target) string {
	switch {
	case c.held():
		return " (" + c.heldNote() + ")"
	case c.killed:
		return fmt.Sprintf(" (the engine did not end within %d ms, nor %d ms after stdin closed: killed)", t.timeoutMS(), t.graceMS())
	case !c.finished:
		return fmt.Sprintf(" (the engine did not end within %d ms; it ended after stdin was closed)", t.timeoutMS())
	}
	return ""
}

// exitText says how the engine ended: "exit N" or "killed".
func (c capture) exitText() string {
	if c.exitCode != nil {
		return fmt.Sprintf("exit %d", *c.exitCode)
	}
	return "killed"
}

// launchRaw runs the engine with request on its stdin the way the runner
// does (docs/contracts.md § Process lifecycle: one line, stdin kept open,
// stderr inherited), but keeps every stdout line and times the engine's exit
// and its stdout EOF separately. When the launch has not ended after
// t.TimeoutMS, stdin is closed; after t.GraceMS more the process group is
// killed. As in the runner, stdout is drained for at most
// contract.PostExitDrainMS after the engine exited and the exit status
// awaited for at most contract.ExitWaitMS after stdout EOF.
//
// With early set (the stops-on-stdin-eof launch), stdin is closed as soon
// as the engine has had the request: once the request is written, after
// EOFSettleMS or at its first stdout line, whichever comes first.
func launchRaw(ctx context.Context, t Target, name string, request []byte, early bool) capture {
	c := capture{name: name, closedMS: -1, exitMS: -1, eofMS: -1, endMS: -1}
	// Our own pipes, as in internal/contract: cmd.Wait must not close the
	// stdout reader, since it runs concurrently with reading and a
	// grandchild may outlive the engine.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		c.err = fmt.Errorf("spawn: stdin pipe: %w", err)
		return c
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		c.err = fmt.Errorf("spawn: stdout pipe: %w", err)
		return c
	}
	cmd := exec.Command(t.Command, t.Args...)
	cmd.Dir = t.Dir
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = procAttr()
	start := time.Now()
	err = cmd.Start()
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		c.err = fmt.Errorf("spawn: %w", err)
		return c
	}
	defer stdoutR.Close()
	since := func() int64 { return time.Since(start).Milliseconds() }
	kill := func() {
		c.killed = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
	stopped := false
	stopReading := func() {
		stopped = true
		if stdoutR.SetReadDeadline(time.Now()) != nil {
			stdoutR.Close()
		}
	}
	stdinOpen := true
	closeStdin := func(why string) {
		if stdinOpen {
			stdinOpen = false
			stdinW.Close()
			c.closedMS, c.closedWhy = since(), why
		}
	}
	defer closeStdin("")

	// The write may block on a child that never reads: closing stdin
	// releases it.
	writeDone := make(chan error, 1)
	go func() {
		_, err := stdinW.Write(request)
		writeDone <- err
	}()
	firstLine := make(chan struct{})
	readDone := make(chan error, 1)
	var lines []string
	go func() {
		r := bufio.NewReader(stdoutR)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				if lines == nil {
					close(firstLine)
				}
				lines = append(lines, strings.TrimSuffix(line, "\n"))
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readDone <- err
				return
			}
		}
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var timers []*time.Timer
	after := func(ms int) <-chan time.Time {
		tm := time.NewTimer(time.Duration(ms) * time.Millisecond)
		timers = append(timers, tm)
		return tm.C
	}
	defer func() {
		for _, tm := range timers {
			tm.Stop()
		}
	}()

	timeoutC := after(t.timeoutMS())
	var settleC, graceC, drainC, exitWaitC <-chan time.Time
	var firstC <-chan struct{}
	closed := func(why string) {
		closeStdin(why)
		if graceC == nil {
			graceC = after(t.graceMS())
		}
	}
	wc := writeDone
	eof, exited := false, false
	var readErr, writeErr error
loop:
	for !(eof && exited) {
		select {
		case <-ctx.Done():
			kill()
			stopReading()
			c.err = ctx.Err()
			break loop
		case writeErr = <-wc:
			wc = nil
			if early && stdinOpen {
				settleC = after(EOFSettleMS)
				firstC = firstLine
			}
		case <-settleC:
			settleC, firstC = nil, nil
			closed(fmt.Sprintf("%d ms after the request was written", EOFSettleMS))
		case <-firstC:
			settleC, firstC = nil, nil
			closed("at its first stdout line")
		case <-timeoutC: // graceful cancel (docs/contracts.md § Process lifecycle)
			timeoutC = nil
			if stdinOpen {
				if early {
					closed(fmt.Sprintf("after %d ms: the request was still not read", t.timeoutMS()))
				} else {
					closed(fmt.Sprintf("by the %d ms timeout", t.timeoutMS()))
				}
			}
		case <-graceC:
			kill()
			stopReading()
			break loop
		case <-drainC: // the engine exited; something else holds stdout
			kill()
			stopReading()
			break loop
		case <-exitWaitC: // stdout closed but the engine lingers (docs/contracts.md § Process lifecycle)
			kill()
			break loop
		case readErr = <-readDone:
			eof, c.eofMS = true, since()
			if !exited {
				exitWaitC = after(contract.ExitWaitMS)
			}
		case <-waitDone:
			exited, c.exitMS = true, since()
			if !eof {
				drainC = after(contract.PostExitDrainMS)
			}
		}
	}
	if !eof {
		readErr = <-readDone
		c.eofMS = since()
	}
	if !exited {
		<-waitDone
		if c.exitMS < 0 && !c.killed {
			c.exitMS = since()
		}
	}
	c.endMS = since()
	c.finished = stdinOpen && !c.killed && c.err == nil
	closeStdin("")
	if wc != nil {
		writeErr = <-wc
	}
	// Whatever the engine left behind in its process group ends with the
	// launch, as with the runner.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	c.lines = lines
	if ps := cmd.ProcessState; ps != nil && ps.Exited() {
		code := ps.ExitCode()
		c.exitCode = &code
	}
	if readErr != nil && !stopped && c.err == nil {
		c.err = fmt.Errorf("read stdout: %w", readErr)
	}
	if writeErr != nil && !errors.Is(writeErr, os.ErrClosed) && !errors.Is(writeErr, syscall.EPIPE) && c.err == nil {
		c.err = fmt.Errorf("write request: %w", writeErr)
	}
	return c
}
