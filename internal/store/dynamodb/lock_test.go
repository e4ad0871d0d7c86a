package dynamodb

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/stratusflow/stratus"
)

func lockRun(id, task, status string) stratus.Run {
	return stratus.Run{ID: id, TaskID: task, Flow: "implementation", Status: status, CreatedAt: time.Now().UTC()}
}

// wantLocked checks that err refuses a run for task's lock held by holder.
func wantLocked(t *testing.T, err error, task, holder string) {
	t.Helper()
	var le *TaskLockedError
	if !errors.As(err, &le) || le.TaskID != task || le.RunID != holder {
		t.Fatalf("err = %v; want *TaskLockedError for task %s held by %s", err, task, holder)
	}
}

// README § On an AWS account: a run of a task whose lock another running run
// holds is refused and nothing of it is recorded; once the holder's end
// releases the lock, the next run takes it; the lock then names the
// latest run.
func TestTaskLock_SecondRunRefusedWhileFirstRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	ctx := f.ctx
	a, b := lockRun("r-a", "T1", stratus.RunRunning), lockRun("r-b", "T1", stratus.RunRunning)
	if err := s.CreateRunLocked(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, s.CreateRunLocked(ctx, b), "T1", "r-a")
	if _, err := s.GetRun(ctx, "r-b"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("the refused run was recorded: %v", err)
	}
	// Another task's lock is its own.
	if err := s.CreateRunLocked(ctx, lockRun("r-c", "T2", stratus.RunRunning)); err != nil {
		t.Errorf("a run of another task: %v", err)
	}
	// A's end releases it; a second release, or one by a run that does
	// not hold it, changes nothing.
	if err := s.UnlockTask(ctx, "T1", "r-b"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetTaskLock(ctx, "T1"); err != nil || !l.Held || l.RunID != "r-a" {
		t.Fatalf("lock after a release by a run that does not hold it: %+v %v; want held by r-a", l, err)
	}
	a.Status = stratus.RunDone
	if err := s.UpdateRun(ctx, a); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.UnlockTask(ctx, "T1", "r-a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateRunLocked(ctx, b); err != nil {
		t.Fatalf("a run after the holder released the lock: %v", err)
	}
	if l, err := s.GetTaskLock(ctx, "T1"); err != nil || !l.Held || l.RunID != "r-b" || l.At.IsZero() {
		t.Errorf("lock = %+v, %v; want held by r-b", l, err)
	}
	// A late release by the earlier run leaves B's lock alone.
	if err := s.UnlockTask(ctx, "T1", "r-a"); err != nil {
		t.Fatal(err)
	}
	wantLocked(t, s.CreateRunLocked(ctx, lockRun("r-d", "T1", stratus.RunRunning)), "T1", "r-b")
	if _, err := s.GetTaskLock(ctx, "T9"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("lock of a task never run: %v; want ENOTFOUND", err)
	}
}

// A lock whose holder ended without releasing it (its end was never
// handled) is taken over; a resume of a run re-takes the lock it holds,
// and one of a run whose lock another running run took is refused and
// leaves the run as it was.
func TestTaskLock_StaleLockTakenOver_ResumeRefusedWhileAnotherRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	ctx := f.ctx
	a := lockRun("r-a", "T1", stratus.RunRunning)
	if err := s.CreateRunLocked(ctx, a); err != nil {
		t.Fatal(err)
	}
	// A resume of the holder itself (its lock re-taken with its write).
	a.Resumes = 1
	if err := s.UpdateRunLocked(ctx, a); err != nil {
		t.Fatalf("the holder's own resume: %v", err)
	}
	a.Status = stratus.RunFailed // ended; its end did not release the lock
	if err := s.UpdateRun(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := lockRun("r-b", "T1", stratus.RunRunning)
	if err := s.CreateRunLocked(ctx, b); err != nil {
		t.Fatalf("a run of a task whose holder ended: %v", err)
	}
	if l, _ := s.GetTaskLock(ctx, "T1"); l.RunID != "r-b" || !l.Held {
		t.Fatalf("lock %+v; want taken over by r-b", l)
	}
	// A resumes while B runs: refused, and A stays failed, resumed once.
	a.Status, a.Resumes = stratus.RunRunning, 2
	wantLocked(t, s.UpdateRunLocked(ctx, a), "T1", "r-b")
	if got, err := s.GetRun(ctx, "r-a"); err != nil || got.Status != stratus.RunFailed || got.Resumes != 1 {
		t.Errorf("run A after its refused resume: %+v %v; want failed, resumed once", got, err)
	}
	if err := s.UpdateRunLocked(ctx, lockRun("r-none", "T3", stratus.RunRunning)); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("UpdateRunLocked of no run: %v; want ENOTFOUND", err)
	}
	if err := s.CreateRunLocked(ctx, b); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("CreateRunLocked of an existing run: %v; want ECONFLICT", err)
	}
}

// Of runs of one task started at once, exactly one takes the lock; the
// others are refused naming it, and are not recorded.
func TestTaskLock_ConcurrentStarts_OneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateRunLocked(f.ctx, lockRun("r-"+string(rune('a'+i)), "T1", stratus.RunRunning))
		})
	}
	wg.Wait()
	l, err := s.GetTaskLock(f.ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	won := 0
	for i, err := range errs {
		id := "r-" + string(rune('a'+i))
		if err == nil {
			won++
			if id != l.RunID {
				t.Errorf("%s started, but the lock names %s", id, l.RunID)
			}
			continue
		}
		wantLocked(t, err, "T1", l.RunID)
		if _, err := s.GetRun(f.ctx, id); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("refused run %s was recorded: %v", id, err)
		}
	}
	if won != 1 {
		t.Errorf("%d runs took the lock; want 1 (%v)", won, errs)
	}
}

// interleave is a Client that runs before once, just ahead of the first
// transaction that checks another item's condition (a takeover).
type interleave struct {
	Client
	once   sync.Once
	before func()
}

func (c *interleave) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if it.ConditionCheck != nil {
			c.once.Do(c.before)
		}
	}
	return c.Client.TransactWriteItems(ctx, in, optFns...)
}

// A takeover is conditioned on the holder's status, not only on the lock
// it read: a holder made running again between that read and the
// takeover (by a writer that did not take the lock with it) keeps it.
func TestTaskLock_TakeoverLosesToAHolderRunningAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	plain := f.store(t, Options{})
	ctx := f.ctx
	a := lockRun("r-a", "T1", stratus.RunRunning)
	if err := plain.CreateRunLocked(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status = stratus.RunFailed
	if err := plain.UpdateRun(ctx, a); err != nil {
		t.Fatal(err)
	}
	c := &interleave{Client: f.ddb, before: func() {
		a.Status = stratus.RunRunning
		if err := plain.UpdateRun(ctx, a); err != nil {
			t.Error(err)
		}
	}}
	s, err := New(c, Options{Table: f.table, Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	wantLocked(t, s.CreateRunLocked(ctx, lockRun("r-b", "T1", stratus.RunRunning)), "T1", "r-a")
}

// Two resumes of one failed run at once (two operators, or one command
// run twice): the run's write is conditioned on its resume count as each
// read it, so one makes it running and names its execution, and the other
// is refused as a second run of the task is, with nothing of it written.
func TestTaskLock_ConcurrentResumesOfOneRun_OneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	if err := s.CreateRunLocked(f.ctx, lockRun("r-a", "T1", stratus.RunRunning)); err != nil {
		t.Fatal(err)
	}
	failed, err := s.GetRun(f.ctx, "r-a")
	if err != nil {
		t.Fatal(err)
	}
	failed.Status = stratus.RunFailed
	if err := s.UpdateRun(f.ctx, failed); err != nil {
		t.Fatal(err)
	}
	if err := s.UnlockTask(f.ctx, "T1", "r-a"); err != nil {
		t.Fatal(err)
	}
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := failed
			r.Status, r.Resumes, r.Execution = stratus.RunRunning, failed.Resumes+1, "exec-"+string(rune('a'+i))
			errs[i] = s.UpdateRunLocked(f.ctx, r)
		})
	}
	wg.Wait()
	got, err := s.GetRun(f.ctx, "r-a")
	if err != nil {
		t.Fatal(err)
	}
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			if want := "exec-" + string(rune('a'+i)); got.Execution != want {
				t.Errorf("resume %d won, but the run names execution %s", i, got.Execution)
			}
			continue
		}
		wantLocked(t, err, "T1", "r-a")
	}
	if won != 1 || got.Resumes != failed.Resumes+1 || got.Status != stratus.RunRunning {
		t.Errorf("%d resumes went ahead, the run is %s after %d resumes; want one, running, %d (%v)", won, got.Status, got.Resumes, failed.Resumes+1, errs)
	}
}

// UpdateRunUnlessResumed writes the run only while its stored resume count
// is the one given: a run's end recorded after a resume made it running
// again (UpdateRunLocked) is refused with ECONFLICT and writes nothing; at
// the same count it is written, first run (count 0) included.
func TestUpdateRunUnlessResumed_RefusedOnceTheRunWasResumed(t *testing.T) {
	f := newFixture(t)
	s := f.store(t, Options{})
	ctx := context.Background()
	r := lockRun("r-ended", "t-ended", stratus.RunRunning)
	r.Execution = "arn:x:r-ended"
	if err := s.CreateRunLocked(ctx, r); err != nil {
		t.Fatal(err)
	}
	read := r // what the end's recorder read
	resumed := r
	resumed.Resumes, resumed.Execution = 1, "arn:x:r-ended.resume-1"
	if err := s.UpdateRunLocked(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	read.Status = stratus.RunFailed
	if err := s.UpdateRunUnlessResumed(ctx, read); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Fatalf("the stale end: %v; want ECONFLICT", err)
	}
	if got, _ := s.GetRun(ctx, r.ID); got.Status != stratus.RunRunning || got.Resumes != 1 || got.Execution != resumed.Execution {
		t.Errorf("after the stale end: %s, resumed %d, %s; want the resumed run", got.Status, got.Resumes, got.Execution)
	}
	resumed.Status = stratus.RunDone
	if err := s.UpdateRunUnlessResumed(ctx, resumed); err != nil {
		t.Fatalf("the resumed run's own end: %v", err)
	}
	first := lockRun("r-first", "t-first", stratus.RunRunning)
	if err := s.CreateRun(ctx, first); err != nil {
		t.Fatal(err)
	}
	first.Status = stratus.RunFailed
	if err := s.UpdateRunUnlessResumed(ctx, first); err != nil {
		t.Fatalf("a first run's end: %v", err)
	}
	if err := s.UpdateRunUnlessResumed(ctx, lockRun("r-none", "t", stratus.RunFailed)); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("no such run: %v; want ENOTFOUND", err)
	}
}
