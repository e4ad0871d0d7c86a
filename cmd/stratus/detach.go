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
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// DetachWait bounds how long `run --detach` waits for the run it started
// to be recorded (the checks before a run starts are quick; a cold
// filesystem or a large bundle is not).
var DetachWait = 60 * time.Second

// runDetached is `stratus run --detach`: it starts `stratus run` again, in a
// session of its own (no terminal: Ctrl-C and a closed terminal do not
// reach it) with its output in DIR/.stratus/runs/<run_id>/run.log and the
// run id chosen here, waits until that process has recorded the run (or
// has failed before it could: its error is this command's), and prints the
// run id. The run then lives as long as that process; `stratus cancel`
// stops it.
func runDetached(o *RunOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	task, err := filepath.Abs(o.Task)
	if err != nil {
		return err
	}
	runID := lifecycle.NewRunID()
	args := []string{"run", task, "--dir", dir, "--run-id", runID}
	if o.NoPull {
		args = append(args, "--no-pull")
	}
	return startDetached(o.IO, o.JSON, o.Self, dir, runID, args, "the run did not start", func() bool { return recorded(dir, runID) })
}

// startDetached starts `stratus ARGS` for run runID of work dir dir in a
// session of its own, its output appended to DIR/.stratus/runs/<run_id>/
// run.log, waits (at most DetachWait) until started says the run is under
// way — or the process ended first: its log is the error, as notStarted —
// and prints the run id.
func startDetached(io IO, asJSON bool, self, dir, runID string, args []string, notStarted string, started func() bool) error {
	var err error
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return err
		}
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
