package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// README.md § Task pool: runs shows the pool's queued tasks above the
// runs, each with its state and why it waits (before a run was made too);
// runs --json stays the array of runs; status of a queued task's id shows
// the task (exit 0), --json with "queued".
func TestRuns_ShowQueuedTasksAndWhyTheyWait(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "qa", "")
	poolTask(t, dir, "pending", "qb", "depends_on: [qa]\n")
	poolTask(t, dir, "pending", "qc", "queue: other\n")

	// No run made yet: the queued tasks, then no runs.
	r := runCLI(t, "runs", "--dir", dir)
	if r.code != 0 || !strings.HasSuffix(r.stdout, "\nno runs yet\n") {
		t.Fatalf("runs before a run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"QUEUED TASK", "depends_on qa", "queue other"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("runs before a run does not say %q:\n%s", want, r.stdout)
		}
	}

	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	run := stratus.Run{ID: "r-20261204T160000-aaa111", TaskID: "earlier", TaskTitle: "earlier", Flow: "tiny", Status: stratus.RunDone, WorkDir: dir,
		CreatedAt: time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 12, 4, 16, 1, 0, 0, time.UTC)}
	if err := st.CreateRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	st.Close()

	r = runCLI(t, "runs", "--dir", dir)
	q, runsAt := strings.Index(r.stdout, "QUEUED TASK"), strings.Index(r.stdout, "RUN ")
	if r.code != 0 || q < 0 || runsAt < q || !strings.Contains(r.stdout, run.ID) {
		t.Fatalf("runs: exit %d; want the queued tasks above the runs\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(r.stdout[:runsAt], "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = line
		}
	}
	for id, want := range map[string]string{"qa": "pending", "qb": "depends_on qa", "qc": "queue other"} {
		if !strings.Contains(rows[id], want) {
			t.Errorf("runs: queued %s: %q; want %q", id, rows[id], want)
		}
	}
	if r := runCLI(t, "runs", "--dir", dir, "--status", "done"); r.code != 0 || strings.Contains(r.stdout, "QUEUED") {
		t.Errorf("runs --status done: exit %d; want the runs only\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "runs", "--json", "--dir", dir)
	var lines []RunLine
	if err := json.Unmarshal([]byte(r.stdout), &lines); r.code != 0 || err != nil || len(lines) != 1 || lines[0].RunID != run.ID {
		t.Errorf("runs --json: exit %d, %v; want the array of the one run\n%s", r.code, err, r.stdout)
	}

	r = runCLI(t, "status", "qb", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "task qb: pending") || !strings.Contains(r.stdout, "waits on: depends_on qa") {
		t.Errorf("status qb: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "status", "qc", "--json", "--dir", dir)
	var res StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.RunID != "" || res.Status != taskpool.Pending || res.Queued == nil || res.Queued.Waits != "queue other" {
		t.Errorf("status qc --json: exit %d, %v: %+v\n%s", r.code, err, res, r.stderr)
	}
	if r := runCLI(t, "status", "qc", "--follow", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "not a run yet") {
		t.Errorf("status qc --follow: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "status", "ghost", "--dir", dir); r.code != ExitUsage {
		t.Errorf("status ghost: exit %d; want %d (no such run, no such task)\n%s", r.code, ExitUsage, r.stderr)
	}
}

// The listing of a stack's pool (awspool.Pool.Listing, the same rows) is
// shown by runs and tasks --target aws as the work dir's: each text cell
// one line (a task file is anyone's text).
func TestPrintQueued_OneLineACell(t *testing.T) {
	l := []taskpool.Listed{
		{ID: "t1", State: taskpool.Pending, Queue: "default", Priority: "mid", Waits: "depends_on t0"},
		{ID: "t2", State: taskpool.Claimed, Queue: "default", Priority: "high", RunID: "r-20261204T160000-aaa111"},
		{ID: "t3", State: taskpool.Pending, Queue: "other\nq", Priority: "low", Waits: "queue other"},
	}
	var b bytes.Buffer
	printQueued(&b, l)
	out := b.String()
	if n := strings.Count(out, "\n"); n != 5 { // header, 3 rows, a blank line
		t.Errorf("printQueued: %d lines; want 5\n%s", n, out)
	}
	for _, want := range []string{"depends_on t0", "r-20261204T160000-aaa111", "queue other"} {
		if !strings.Contains(out, want) {
			t.Errorf("printQueued does not say %q:\n%s", want, out)
		}
	}
	b.Reset()
	printQueued(&b, nil)
	if b.Len() != 0 {
		t.Errorf("printQueued(nil) = %q; want nothing", b.String())
	}
	b.Reset()
	if err := printTasks(&b, l); err != nil || strings.Count(b.String(), "\n") != 4 {
		t.Errorf("printTasks: %v\n%s", err, b.String())
	}
}
