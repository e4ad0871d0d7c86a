package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink/fs"
)

// freezeRun snapshots what run runID reads besides the work itself, its
// flow, role files, config.yaml, task file and tools, into
// DIR/.stratus/runs/<run_id>/bundle/ (runenv.Freeze through the fs sink of
// the state dir), and materializes that bundle under
// DIR/.stratus/runs/<run_id>/ for the run to read (worc WRI-010: prompts and
// tools are frozen per run; an edit mid-run, or a workspace-write agent
// rewriting a tool, never reaches a later step). The bundle stays as the
// record of what the run used; release removes the materialized copy.
func freezeRun(ctx context.Context, state, runID, workDir, flowsDir, taskPath string) (b *runenv.Bundle, release func(), err error) {
	b, err = runenv.NewCache(filepath.Join(state, RunsDir, runID), 1).Freeze(ctx, fs.New(state).OwnerOnly(), runID, workDir, flowsDir, taskPath)
	if err != nil {
		return nil, nil, fmt.Errorf("freeze the run's flow, prompts, config and tools: %w", err)
	}
	return b, func() { os.RemoveAll(b.Dir) }, nil
}

// loadRun materializes the frozen environment of run runID from
// DIR/.stratus/runs/<run_id>/bundle/ (written by freezeRun when the run
// started), for a resume; release removes the materialized copy.
func loadRun(ctx context.Context, state, runID string) (b *runenv.Bundle, release func(), err error) {
	b, err = runenv.NewCache(filepath.Join(state, RunsDir, runID), 1).Load(ctx, fs.New(state).OwnerOnly(), runID)
	if err != nil {
		return nil, nil, fmt.Errorf("load the run's frozen environment: %w", err)
	}
	return b, func() { os.RemoveAll(b.Dir) }, nil
}
