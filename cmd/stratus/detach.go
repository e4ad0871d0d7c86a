package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/host"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// DetachWait bounds how long `run --detach` and `resume --detach` wait
// for a host they started to serve.
var DetachWait = 60 * time.Second

// runDetached is `stratus run --detach`: it hands the run, with an id
// chosen here, to the work dir's host (internal/host; started when none
// serves it: one process hosts every detached run of a work dir), returns
// once the host has recorded the run (or with the error `stratus run` would
// have given) and prints the run id. The run's lines go to
// DIR/.stratus/runs/<run_id>/run.log; `stratus cancel` stops it.
func runDetached(o *RunOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	task, err := filepath.Abs(o.Task)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile)); err != nil {
		return usageOr(stratus.Errorf(stratus.ENOTFOUND, "%s is not installed (no %s): stratus install --dir %s", dir, filepath.Join(orchestrator.StateDir, orchestrator.ConfigFile), dir))
	}
	c, err := ensureHost(dir, o.Self)
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

// ensureHost returns a client of work dir dir's host, started (from self,
// "" = this binary) when none serves it.
func ensureHost(dir, self string) (*host.Client, error) {
	self, err := selfOr(self)
	if err != nil {
		return nil, err
	}
	return host.Ensure(dir, self, DefaultHostIdle, DetachWait)
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
