package main

import (
	"context"
	"encoding/json"
	"fmt"
	stdio "io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/host"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// DetachWait bounds how long `run --detach` waits for the run it started
// to be recorded (the checks before a run starts are quick; a cold
// filesystem or a large bundle is not).
var DetachWait = 60 * time.Second

// runDetached is `stratus run --detach`: it hands the run, with an id
// chosen here, to the work dir's host (internal/host; started when none
// serves it: one process hosts every detached run of a work dir, issue 16
// § 5), returns once the host has recorded the run (or with the error
// `stratus run` would have given) and prints the run id. The run's lines
// go to DIR/.stratus/runs/<run_id>/run.log; `stratus cancel` stops it.
func runDetached(o *RunOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	task, err := filepath.Abs(o.Task)
	if err != nil {
		return err
	}
	self, err := selfOr(o.Self)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile)); err != nil {
		return usageOr(stratus.Errorf(stratus.ENOTFOUND, "%s is not installed (no %s): stratus install --dir %s", dir, filepath.Join(orchestrator.StateDir, orchestrator.ConfigFile), dir))
	}
	c, err := host.Ensure(dir, self, DefaultHostIdle, DetachWait)
	if err != nil {
		return err
	}
	runID, err := c.Start(context.Background(), host.StartRequest{Task: task, RunID: lifecycle.NewRunID(), NoPull: o.NoPull})
	if err != nil {
		return usageOr(fmt.Errorf("the run did not start: %w", err))
	}
	return printDetached(o.IO, o.JSON, runID, orchestrator.DirFlag(dir))
}

// selfOr is self, or this executable when self is "": the stratus binary
// a run's workers and processes are started from.
func selfOr(self string) (string, error) {
	if self != "" {
		return self, nil
	}
	return os.Executable()
}

// startDetached starts `stratus ARGS` for run runID of work dir dir in a
// session of its own, its output appended to DIR/.stratus/runs/<run_id>/
// run.log, waits (at most DetachWait) until started says the run is under
// way — or the process ended first: its log is the error, as notStarted —
// and prints the run id.
func startDetached(io IO, asJSON bool, self, dir, runID string, args []string, notStarted string, started func() bool) error {
	self, err := selfOr(self)
	if err != nil {
		return err
	}
	logDir := filepath.Join(dir, orchestrator.StateDir, orchestrator.RunsDir, runID)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return usageOr(stratus.FieldErrorf(stratus.EINVALID, "dir", "%s: %v", dir, err))
	}
	logPath := filepath.Join(logDir, "run.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	before, _ := logf.Seek(0, stdio.SeekEnd)
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the run's process: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(DetachWait)
	for {
		select {
		case err := <-exited:
			// It ended before (or right after) the run was under way: a run
			// that ended this fast still printed its result to the log.
			if started() {
				return printDetached(io, asJSON, runID, orchestrator.DirFlag(dir))
			}
			b, _ := os.ReadFile(logPath)
			if int64(len(b)) > before {
				b = b[before:] // this process's lines, not an earlier run's
			}
			code := ExitFailed
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return &exitError{code: code, err: fmt.Errorf("%s:\n%s", notStarted, strings.TrimSpace(string(b)))}
		case <-time.After(100 * time.Millisecond):
		}
		if started() {
			return printDetached(io, asJSON, runID, orchestrator.DirFlag(dir))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the run's process (pid %d) has not got run %s under way within %s; see %s", cmd.Process.Pid, runID, DetachWait, logPath)
		}
	}
}

// recorded reports whether run runID is in dir's store.
func recorded(dir, runID string) bool {
	st, err := openRuns(dir)
	if err != nil {
		return false
	}
	defer st.Close()
	_, err = st.GetRun(context.Background(), runID)
	return err == nil
}

// printDetached prints a started run's id (stdout) and how to reach it
// (stderr).
func printDetached(io IO, asJSON bool, runID, target string) error {
	if asJSON {
		json.NewEncoder(io.Out).Encode(map[string]string{"run_id": runID})
	} else {
		fmt.Fprintln(io.Out, runID)
	}
	flags := ""
	if target != "" {
		flags = " " + target
	}
	fmt.Fprintf(io.Err, "stratus: run %s started in the background; follow it: stratus status %s%s --follow; stop it: stratus cancel %s%s\n", runID, runID, flags, runID, flags)
	return nil
}
