package orchestrator

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// pruneRig is a work dir with a store, and runs whose ends are days before
// now.
type pruneRig struct {
	dir, state string
	st         *sqlite.Store
	now        time.Time
}

func newPruneRig(t *testing.T) *pruneRig {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, StateDir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &pruneRig{dir: dir, state: filepath.Join(dir, StateDir), st: st, now: time.Now().UTC()}
}

// run records run id of task with status, ended endedDaysAgo days before
// now (-1: no end recorded), with a step, an attempt and an output, and
// its run directory and an upload on disk.
func (p *pruneRig) run(t *testing.T, id, task, status string, endedDaysAgo int) stratus.Run {
	t.Helper()
	ctx := context.Background()
	r := stratus.Run{ID: id, TaskID: task, Flow: "implementation", Status: status, WorkDir: p.dir, CreatedAt: p.now.Add(-100 * 24 * time.Hour)}
	if endedDaysAgo >= 0 {
		r.EndedAt = p.now.Add(-time.Duration(endedDaysAgo) * 24 * time.Hour)
	}
	if err := p.st.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	tid := id + ".impl.1"
	if _, _, err := p.st.CreateStep(ctx, stratus.Step{TID: tid, RunID: id, Node: "impl", Kind: "agent", Visit: 1, StepRef: "impl#1", Status: stratus.StepCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := p.st.CreateAttempt(ctx, stratus.Attempt{TID: tid, N: 1, Status: stratus.AttemptSubmitted}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.st.AppendOutput(ctx, stratus.OutputEvent{TID: tid, Attempt: 1, Kind: stratus.OutputFinal, Body: []byte("done")}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(p.state, "runs", id, "bundle", "manifest.json"), "{}\n")
	write(t, filepath.Join(p.state, "runs", id, "workspace", "base.bundle"), strings.Repeat("b", 1000))
	write(t, filepath.Join(p.state, "uploads", id, "left"), "x")
	return r
}

// archive makes .stratus/logs/<task>/<name>/ holding a ctx dir and a
// summary, its run marker naming owner ("": none), made daysAgo days ago.
func (p *pruneRig) archive(t *testing.T, task, name, owner string, daysAgo int) string {
	t.Helper()
	a := filepath.Join(p.state, "logs", task, name)
	write(t, filepath.Join(a, "ctx", "plan.md"), "# plan\n")
	write(t, filepath.Join(a, "summary.md"), "# summary\n")
	if owner != "" {
		write(t, filepath.Join(a, "run_id"), owner+"\n")
	}
	at := p.now.Add(-time.Duration(daysAgo) * 24 * time.Hour)
	if err := os.Chtimes(a, at, at); err != nil {
		t.Fatal(err)
	}
	return a
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// docs/security.md § Retention: a run that ended more than retention_days
// ago loses its run directory (bundle, workspace bundles), its uploads,
// the archives its marker claims and its step records; the run record
// stays, marked. A run ended within the days, one running (or waiting:
// no end recorded, however old its start), an archive claimed by a kept
// run, a recent unclaimed archive and the task's latest ctx dir and logs
// are kept. An unclaimed archive made before the cutoff goes. A second
// prune finds nothing more.
func TestPrune_RemovesWhatEndedBeforeTheCutoffAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	old := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunDone, 40)
	recent := p.run(t, "r-20250101T000000-bbbbbb", "t1", stratus.RunFailed, 10)
	running := p.run(t, "r-20250101T000000-cccccc", "t2", stratus.RunRunning, -1)
	oldArch := p.archive(t, "t1", "attempt-1", old.ID, 39)
	keptArch := p.archive(t, "t1", "attempt-2", recent.ID, 9)
	orphanOld := p.archive(t, "t3", "attempt-1", "", 45)
	orphanNew := p.archive(t, "t3", "attempt-2", "r-20240101T000000-dddddd", 5)
	latestLogs := filepath.Join(p.state, "logs", "t1", "summary.md")
	write(t, latestLogs, "# latest\n")
	ctxDir := filepath.Join(p.dir, "workspace", "tasks", "t1", "ctx", "plan.md")
	write(t, ctxDir, "# plan\n")

	rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].RunID != old.ID || rep.Runs[0].Bytes < 1000 {
		t.Fatalf("pruned runs %+v; want %s alone, with its bytes", rep.Runs, old.ID)
	}
	for _, gone := range []string{filepath.Join(p.state, "runs", old.ID), filepath.Join(p.state, "uploads", old.ID), oldArch, orphanOld} {
		if exists(gone) {
			t.Errorf("%s is still there", gone)
		}
	}
	if !slices.Contains(rep.Archives, ".stratus/logs/t3/attempt-1") || len(rep.Archives) != 1 {
		t.Errorf("archives %v; want the unclaimed old one alone", rep.Archives)
	}
	for _, kept := range []string{filepath.Join(p.state, "runs", recent.ID), filepath.Join(p.state, "runs", running.ID), keptArch, orphanNew, latestLogs, ctxDir} {
		if !exists(kept) {
			t.Errorf("%s was removed", kept)
		}
	}
	got, err := p.st.GetRun(ctx, old.ID)
	if err != nil || got.PrunedAt.IsZero() || got.Status != stratus.RunDone {
		t.Errorf("the pruned run's record: %+v, %v; want it kept, done, marked pruned", got, err)
	}
	if steps, _ := p.st.ListSteps(ctx, old.ID); len(steps) != 0 {
		t.Errorf("the pruned run keeps %d steps", len(steps))
	}
	for _, id := range []string{recent.ID, running.ID} {
		if steps, _ := p.st.ListSteps(ctx, id); len(steps) != 1 {
			t.Errorf("kept run %s has %d steps, want 1", id, len(steps))
		}
	}

	again, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st})
	if err != nil || len(again.Runs) != 0 || len(again.Archives) != 0 {
		t.Errorf("a second prune: %+v, %v; want nothing", again, err)
	}
}

// docs/security.md § Retention: --dry-run says what would go and removes
// nothing; retention_days 0 keeps every run for ever.
func TestPrune_DryRunAndZeroDaysRemoveNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	old := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunDone, 400)
	rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st, DryRun: true})
	if err != nil || len(rep.Runs) != 1 || !rep.DryRun || len(rep.Runs[0].Paths) != 2 {
		t.Fatalf("dry run: %+v, %v; want the old run and its two paths listed", rep, err)
	}
	for _, days := range []int{0, -1} {
		if rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: days, Now: p.now, Store: p.st}); err != nil || len(rep.Runs) != 0 {
			t.Errorf("days %d: %+v, %v; want nothing pruned", days, rep, err)
		}
	}
	if !exists(filepath.Join(p.state, "runs", old.ID)) {
		t.Error("the run dir was removed")
	}
	if got, _ := p.st.GetRun(ctx, old.ID); !got.PrunedAt.IsZero() {
		t.Error("the run was marked pruned")
	}
}

// docs/security.md § Retention: a task a run holds (its lock) is left for
// a later prune, whatever its old runs: nothing a running or resuming run
// reads is removed under it.
func TestPrune_TaskInUseIsLeftForLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	old := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunInterrupted, 40)
	unlock, err := lockTask(p.state, "t1")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st})
	unlock()
	if err != nil || len(rep.Runs) != 0 || !slices.Equal(rep.Busy, []string{"t1"}) {
		t.Errorf("prune while t1 is locked: %+v, %v; want t1 busy, nothing pruned", rep, err)
	}
	if !exists(filepath.Join(p.state, "runs", old.ID)) {
		t.Error("the run dir of a locked task was removed")
	}
	if rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st}); err != nil || len(rep.Runs) != 1 {
		t.Errorf("prune once the lock is free: %+v, %v; want the run pruned", rep, err)
	}
}

// docs/security.md § Retention: a prune cut short after it marked a run
// (its files still there) is finished by the next one.
func TestPrune_FinishesARunMarkedEarlier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	old := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunDone, 40)
	if err := p.st.PruneRun(ctx, old.ID, p.now); err != nil {
		t.Fatal(err)
	}
	rep, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st})
	if err != nil || len(rep.Runs) != 1 || !rep.Runs[0].Earlier {
		t.Fatalf("%+v, %v; want the earlier-pruned run's leftovers removed", rep, err)
	}
	if exists(filepath.Join(p.state, "runs", old.ID)) {
		t.Error("the leftover run dir is still there")
	}
}

// docs/security.md § Retention: a run's start prunes the work dir, at most
// once every PruneInterval (.stratus/pruned says when it last did), and
// never with retention_days 0.
func TestAutoPrune_AtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	var logs bytes.Buffer
	log := logging.Human(io.MultiWriter(&logs), "stratus")
	first := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunDone, 40)
	autoPrune(ctx, p.dir, p.st, 0, log)
	if got, _ := p.st.GetRun(ctx, first.ID); !got.PrunedAt.IsZero() {
		t.Fatal("retention_days 0 pruned a run")
	}
	autoPrune(ctx, p.dir, p.st, 30, log)
	if got, _ := p.st.GetRun(ctx, first.ID); got.PrunedAt.IsZero() {
		t.Fatalf("the first run start did not prune; log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "retention: pruned 1 runs") {
		t.Errorf("the log does not say what was pruned:\n%s", logs.String())
	}
	second := p.run(t, "r-20250101T000000-bbbbbb", "t2", stratus.RunDone, 40)
	autoPrune(ctx, p.dir, p.st, 30, log)
	if got, _ := p.st.GetRun(ctx, second.ID); !got.PrunedAt.IsZero() {
		t.Error("a second run start within the interval pruned again")
	}
	past := time.Now().Add(-PruneInterval - time.Minute)
	if err := os.Chtimes(filepath.Join(p.state, pruneStamp), past, past); err != nil {
		t.Fatal(err)
	}
	autoPrune(ctx, p.dir, p.st, 30, log)
	if got, _ := p.st.GetRun(ctx, second.ID); got.PrunedAt.IsZero() {
		t.Error("a run start after the interval did not prune")
	}
}

// docs/security.md § Retention: a pruned run is not resumed; the refusal
// says it was pruned, not that a file is missing.
func TestResume_APrunedRunIsRefusedSayingSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPruneRig(t)
	old := p.run(t, "r-20250101T000000-aaaaaa", "t1", stratus.RunFailed, 40)
	if _, err := Prune(ctx, PruneOptions{Dir: p.dir, Days: 30, Now: p.now, Store: p.st}); err != nil {
		t.Fatal(err)
	}
	_, err := Resume(ctx, ResumeOptions{Dir: p.dir, RunID: old.ID, Progress: io.Discard})
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "was pruned") || !strings.Contains(err.Error(), "cannot resume it") {
		t.Errorf("resume of a pruned run: %v; want ENOTFOUND saying it was pruned", err)
	}
}
