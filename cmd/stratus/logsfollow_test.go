package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// waitFor polls until out holds want, or fails after a deadline.
func waitForOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logs --follow streams a running step's log as it is written, like
// tail -f: its header and tail first, each new whole line as it comes, and
// it exits 0 once the run ends.
func TestLogs_FollowStreamsUntilTheRunEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	run := stratus.Run{ID: "r-20261204T160000-aaa111", TaskID: "t1", Flow: "implementation", Status: stratus.RunRunning, WorkDir: dir, Owner: lifecycle.Owner(), CreatedAt: t0}
	step := stratus.Step{TID: run.ID + ".planning.1", RunID: run.ID, Node: "planning", Kind: "agent", Visit: 1, StepRef: "planning#1", DedupKey: "k", Status: stratus.StepRunning, CreatedAt: t0}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateStep(ctx, step); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAttempt(ctx, stratus.Attempt{TID: step.TID, N: 1, Agent: "planning", Status: stratus.AttemptRunning, StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, ".stratus", "logs", "t1")
	if err := os.MkdirAll(filepath.Join(logs, "stages", "planning", "run-000001"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(logs, "run_id"), run.ID+"\n")
	logFile := filepath.Join(logs, "stages", "planning", "run-000001", "runner.log")
	writeTestFile(t, logFile, "old line 1\nold line 2\nold line 3\n")
	appendLog := func(s string) {
		f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}

	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runLogs(ctx, &LogsOptions{IO: IO{Out: out, Err: io.Discard}, RunID: "t1", Dir: dir, Lines: 2, Follow: true})
	}()
	waitForOutput(t, out, "old line 3")
	if s := out.String(); !strings.HasPrefix(s, "== planning#1 attempt 1\n   … 1 line before") || strings.Contains(s, "old line 1") {
		t.Errorf("the first read is not the header and the tail of 2 lines:\n%s", s)
	}
	appendLog("engine says hello\nhalf a li")
	waitForOutput(t, out, "engine says hello")
	if strings.Contains(out.String(), "half a li") {
		t.Errorf("a line without its newline was printed while the step runs:\n%s", out.String())
	}
	appendLog("ne\n")
	waitForOutput(t, out, "half a line\n")

	step.Status, step.Verdict, step.EndedAt = stratus.StepCompleted, "done", time.Now()
	if err := st.UpdateStep(ctx, step); err != nil {
		t.Fatal(err)
	}
	run.Status, run.EndedAt = stratus.RunDone, time.Now()
	if err := st.UpdateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("logs --follow: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs --follow did not end with the run")
	}
	if !strings.HasSuffix(out.String(), "== planning#1 attempt 1 (ended)\n") {
		t.Errorf("the step's end is not said last:\n%s", out.String())
	}
	if n := strings.Count(out.String(), "engine says hello"); n != 1 {
		t.Errorf("a line printed %d times:\n%s", n, out.String())
	}

	// A run that has ended is printed once, as without --follow.
	var once bytes.Buffer
	if err := runLogs(ctx, &LogsOptions{IO: IO{Out: &once, Err: io.Discard}, RunID: "latest", Dir: dir, Lines: 40, Follow: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(once.String(), "old line 1") || !strings.Contains(once.String(), "half a line") {
		t.Errorf("the ended run's logs:\n%s", once.String())
	}
}
