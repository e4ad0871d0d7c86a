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

// capture is what one raw launch printed and how it ended.
type capture struct {
	// lines are the stdout lines without their '\n'; a final line without
	// a newline is included.
	lines []string
	// finished: stdout reached EOF before the timeout, stdin still open.
	finished bool
	// killed: the engine was still running at the end of the grace after
	// the timeout closed its stdin.
	killed bool
	// err is a spawn or pipe failure, or the caller's cancellation.
	err error
}

// note is a parenthetical for check details when the launch did not finish
// by itself.
func (c capture) note(t Target) string {
	switch {
	case c.killed:
		return fmt.Sprintf(" (the engine did not end within %d ms, nor %d ms after stdin closed: killed)", t.timeoutMS(), t.graceMS())
	case !c.finished:
		return fmt.Sprintf(" (the engine did not end within %d ms; it ended after stdin was closed)", t.timeoutMS())
	}
	return ""
}

// launchRaw runs the engine with request on its stdin the way the runner
// does (seed 003 § 1: one line, stdin kept open, stderr inherited), but
// keeps every stdout line. When stdout has not reached EOF after
// t.TimeoutMS, stdin is closed; after t.GraceMS more the process group is
// killed.
func launchRaw(ctx context.Context, t Target, request []byte) capture {
	var c capture
	cmd := exec.Command(t.Command, t.Args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		c.err = fmt.Errorf("spawn: %w", err)
		return c
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.err = fmt.Errorf("spawn: %w", err)
		return c
	}
	if err := cmd.Start(); err != nil {
		c.err = fmt.Errorf("spawn: %w", err)
		return c
	}
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
	// The write may block on a child that never reads: closing stdin
	// releases it.
	go func() { _, _ = stdin.Write(request) }()
	readDone := make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				c.lines = append(c.lines, strings.TrimSuffix(line, "\n"))
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

	timeout := time.NewTimer(time.Duration(t.timeoutMS()) * time.Millisecond)
	defer timeout.Stop()
	var readErr error
	select {
	case readErr = <-readDone:
		c.finished = true
	case <-timeout.C:
		stdin.Close() // graceful cancel (seed 003 § 1.5)
		grace := time.NewTimer(time.Duration(t.graceMS()) * time.Millisecond)
		defer grace.Stop()
		select {
		case readErr = <-readDone:
		case <-grace.C:
			c.killed = true
			kill()
			readErr = <-readDone
		case <-ctx.Done():
			kill()
			readErr = <-readDone
			c.err = ctx.Err()
		}
	case <-ctx.Done():
		kill()
		readErr = <-readDone
		c.err = ctx.Err()
	}
	stdin.Close()
	// Stdout is at EOF; bound the wait for the exit status like the runner
	// does (seed 003 § 1.4).
	exitWait := time.AfterFunc(contract.ExitWaitMS*time.Millisecond, kill)
	_ = cmd.Wait()
	exitWait.Stop()
	if readErr != nil && c.err == nil {
		c.err = fmt.Errorf("read stdout: %w", readErr)
	}
	return c
}
