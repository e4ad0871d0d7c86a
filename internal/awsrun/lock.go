package awsrun

import (
	"context"
	"errors"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// A task's lock on the stack (dynamodb.TaskLock) keeps two runs of one
// task id from running at once, as an embedded run's flock keeps them
// apart in a work dir: Start and Resume take it with the write that makes
// their run running, and the run's end releases it (Finish here, the
// events function for a run nobody follows).

// withLock runs take (a check or a take of a task's lock) and turns its
// refusal into the operator's message (lockedError). A holder still
// recorded running whose execution has ended — its end was never handled
// — is finished first, as the events function would have, and take runs
// once more.
func (t *Target) withLock(ctx context.Context, take func() error) error {
	for again := true; ; again = false {
		err := take()
		var le *dynamodb.TaskLockedError
		if !errors.As(err, &le) {
			return err
		}
		if again && t.finishEnded(ctx, le.RunID) {
			continue
		}
		return t.lockedError(le)
	}
}

// lockedError is the refusal of a run of a task another run holds the
// lock of, worded as an embedded run's (orchestrator: "task T is already
// running in this work dir (lock …); wait for it or stop it first"), with
// the stack and the run that holds it. EINVALID, as embedded.
func (t *Target) lockedError(le *dynamodb.TaskLockedError) error {
	where := "stack " + t.Stack
	if t.Stack == "" {
		where = "the stack of table " + t.Table
	}
	return stratus.Errorf(stratus.EINVALID, "task %s is already running on %s (lock: run %s holds it); wait for it or stop it first (stratus cancel %s --target aws)",
		le.TaskID, where, le.RunID, le.RunID)
}

// finishEnded finishes run runID when it is still recorded running while
// its execution has ended, and reports whether it did.
func (t *Target) finishEnded(ctx context.Context, runID string) bool {
	run, err := t.Store.GetRun(ctx, runID)
	if err != nil || stratus.RunTerminal(run.Status) || run.Execution == "" {
		return false
	}
	x, err := t.Exec.DescribeExecution(ctx, run.Execution)
	if err != nil || !x.Done() {
		return false
	}
	_, err = t.Finish(ctx, run, nil, x)
	return err == nil
}

// checkLock refuses (*dynamodb.TaskLockedError) a run runID of task taskID
// whose lock another run holds that has not ended: the check a start
// makes before it writes anything. The lock itself is taken with the
// run's record (CreateRunLocked, UpdateRunLocked), which checks again.
func (t *Target) checkLock(ctx context.Context, taskID, runID string) error {
	l, err := t.Store.GetTaskLock(ctx, taskID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	if !l.Held || l.RunID == runID {
		return nil
	}
	h, err := t.Store.GetRun(ctx, l.RunID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	if stratus.RunTerminal(h.Status) {
		return nil
	}
	return &dynamodb.TaskLockedError{TaskID: taskID, RunID: l.RunID}
}

// lockingStore is the store a resume is prepared through
// (lifecycle.PrepareResume): its one write of the run, which makes it
// running again and names its new execution, takes the task's lock with
// it, in one transaction (dynamodb.Store.UpdateRunLocked).
type lockingStore struct{ *dynamodb.Store }

func (s lockingStore) UpdateRun(ctx context.Context, r stratus.Run) error {
	return s.Store.UpdateRunLocked(ctx, r)
}
