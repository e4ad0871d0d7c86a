package dynamodb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
)

// A task's lock keeps two runs of one task id from running on one stack
// at once, as an embedded run's flock on .stratus/locks/<task_id>.lock
// keeps them apart in a work dir (README § On an AWS account). It is one
// item per task id, taken by a conditional write in the same transaction
// as the run's own write that makes the run running (CreateRunLocked,
// UpdateRunLocked), and released when the run ends (UnlockTask). It is
// not part of store.Store: an embedded run has its flock, and a work
// dir's store is its own.

const (
	pkTaskLock = "tasklock#" // + task id
	skTaskLock = "lock"
)

func lockKey(taskID string) item { return key(pkTaskLock+taskID, skTaskLock) }

// TaskLock is the lock item of one task id.
type TaskLock struct {
	TaskID string
	// RunID is the run that holds the lock, or held it last: the task's
	// latest run.
	RunID string
	Held  bool      // false once the run released it
	At    time.Time // when RunID took it
}

// TaskLockedError refuses a run of a task whose lock another run holds,
// one that has not ended.
type TaskLockedError struct {
	TaskID string
	RunID  string // the run that holds the lock
}

func (e *TaskLockedError) Error() string {
	return fmt.Sprintf("task %s is locked by run %s, which has not ended", e.TaskID, e.RunID)
}

// GetTaskLock returns the lock of task taskID. Errors: ENOTFOUND when no
// run of the task ever took it; the AWS error, wrapped.
func (s *Store) GetTaskLock(ctx context.Context, taskID string) (TaskLock, error) {
	it, err := s.get(ctx, lockKey(taskID))
	if err != nil {
		return TaskLock{}, wrap("get the lock of task "+quote(taskID), err)
	} else if it == nil {
		return TaskLock{}, stratus.Errorf(stratus.ENOTFOUND, "task %q has no lock: no run of it was started on this stack", taskID)
	}
	return TaskLock{TaskID: taskID, RunID: it.str("run_id"), Held: it.bool("held"), At: it.time("taken_at")}, nil
}

// CreateRunLocked is CreateRun of r (status running) that also makes r
// the holder of the lock of task r.TaskID, in one transaction: either the
// run is recorded holding the lock, or nothing is written. The lock is
// taken when no run of the task took it yet, when its holder released it,
// or when its holder has ended (a run recorded terminal, or not recorded
// at all, whose end did not release it: a stale lock is taken over, with a
// condition on the holder's status so that a resume of it in between
// wins instead).
//
// Errors: *TaskLockedError when a run that has not ended holds the lock;
// CreateRun's (ECONFLICT when a run with r.ID exists); the AWS error,
// wrapped.
func (s *Store) CreateRunLocked(ctx context.Context, r stratus.Run) error {
	it, entry, err := runItems(r)
	if err != nil {
		return err
	}
	return s.takeLock(ctx, r.TaskID, r.ID, []types.TransactWriteItem{s.createTx(it), s.createTx(entry)}, func(err error) error {
		return createRunErr(r, it, err)
	})
}

// UpdateRunLocked is UpdateRun of r that also makes r the holder of the
// lock of task r.TaskID, in one transaction, as CreateRunLocked does: what
// a resume records when it makes the run running again, so that a run
// refused the lock stays as it was. The write is conditioned on the run's
// resume count being r.Resumes-1, as the resume read it: of two resumes
// of one run at once, one makes it running and the other is refused, as
// the run's lock refuses it embedded. Errors: *TaskLockedError (another
// run holds the lock, or another resume of r came first); ENOTFOUND for
// no such run; the AWS error, wrapped.
func (s *Store) UpdateRunLocked(ctx context.Context, r stratus.Run) error {
	u := runUpdate(r)
	if err := checkSize(u.k, u.set); err != nil {
		return err
	}
	tx := s.updateTx(u)
	tx.Update.ConditionExpression = aws.String(*tx.Update.ConditionExpression + " AND #prev_resumes = :prev_resumes")
	tx.Update.ExpressionAttributeNames["#prev_resumes"] = "resumes"
	if tx.Update.ExpressionAttributeValues == nil {
		tx.Update.ExpressionAttributeValues = map[string]av{}
	}
	tx.Update.ExpressionAttributeValues[":prev_resumes"] = num(int64(r.Resumes - 1))
	return s.takeLock(ctx, r.TaskID, r.ID, []types.TransactWriteItem{tx}, func(error) error {
		cur, err := s.get(ctx, runKey(r.ID))
		if err != nil {
			return wrap("read run "+quote(r.ID), err)
		} else if cur == nil {
			return stratus.Errorf(stratus.ENOTFOUND, "run %q not found (DynamoDB ConditionalCheckFailedException)", r.ID)
		}
		// Another resume made it running (its count moved on) first.
		return &TaskLockedError{TaskID: r.TaskID, RunID: r.ID}
	})
}

// takeLock runs writes, then the put that makes runID the holder of task
// taskID's lock, in one transaction, conditioned on the lock being as it
// was read (and, for a stale lock, on its holder having ended); a lock
// that changed meanwhile is read again (bounded, with backoff). writeErr
// maps a transaction canceled by one of writes' own conditions.
func (s *Store) takeLock(ctx context.Context, taskID, runID string, writes []types.TransactWriteItem, writeErr func(error) error) error {
	what := "take the lock of task " + quote(taskID) + " for run " + quote(runID)
	return contend(ctx, what, func() (bool, error) {
		cur, err := s.get(ctx, lockKey(taskID))
		if err != nil {
			return false, wrap(what, err)
		}
		lock := lockKey(taskID).setAll(map[string]av{
			attrRecord: str("task_lock"), "run_id": str(runID), "taken": str(newWID()),
			"held": boolean(true), "taken_at": millis(time.Now()),
		})
		put := &types.Put{TableName: aws.String(s.table), Item: lock,
			ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": PartitionKey}}
		if cur != nil {
			// Compare and swap: the lock is still the take that was read.
			put.ConditionExpression = aws.String("#taken = :seen")
			put.ExpressionAttributeNames = map[string]string{"#taken": "taken"}
			put.ExpressionAttributeValues = map[string]av{":seen": str(cur.str("taken"))}
		}
		items := append(append([]types.TransactWriteItem{}, writes...), types.TransactWriteItem{Put: put})
		if holder := cur.str("run_id"); cur != nil && cur.bool("held") && holder != runID {
			h, err := s.get(ctx, runKey(holder))
			if err != nil {
				return false, wrap(what, err)
			}
			if h != nil && !stratus.RunTerminal(h.str("status")) {
				return false, &TaskLockedError{TaskID: taskID, RunID: holder}
			}
			// The holder ended without releasing it: taken over, unless a
			// resume of the holder made it running meanwhile.
			items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName: aws.String(s.table), Key: runKey(holder),
				ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #status IN (:done, :failed, :manual, :interrupted)"),
				ExpressionAttributeNames: map[string]string{"#pk": PartitionKey, "#status": "status"},
				ExpressionAttributeValues: map[string]av{":done": str(stratus.RunDone), ":failed": str(stratus.RunFailed),
					":manual": str(stratus.RunManualActionRequired), ":interrupted": str(stratus.RunInterrupted)},
			}})
		}
		err = s.transact(ctx, items...)
		codes, _, canceledTx := canceled(err)
		switch {
		case err == nil:
			return false, nil
		case !canceledTx:
			return false, wrap(what, err)
		}
		for i := range writes {
			if reason(codes, i) == codeConditionFailed {
				return false, writeErr(err)
			}
		}
		for i := len(writes); i < len(items); i++ {
			if c := reason(codes, i); c != "None" && c != "" && c != codeConditionFailed && c != codeTransactionConflict {
				return false, wrap(what, err)
			}
		}
		return true, nil // the lock (or its holder) changed since it was read
	})
}

// UnlockTask releases the lock of task taskID when run runID holds it (an
// UpdateItem conditioned on the holder): the item stays, naming runID as
// the task's latest run (GetTaskLock), not held. A lock another run holds
// — it took over after runID ended — or none at all is left as it is, and
// is not an error: a late or repeated end of a run never releases its
// successor's lock. Errors: the AWS error, wrapped.
func (s *Store) UnlockTask(ctx context.Context, taskID, runID string) error {
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: lockKey(taskID),
		UpdateExpression:          aws.String("SET #held = :false, #released = :now"),
		ConditionExpression:       aws.String("#run = :run AND #held = :true"),
		ExpressionAttributeNames:  map[string]string{"#held": "held", "#released": "released_at", "#run": "run_id"},
		ExpressionAttributeValues: map[string]av{":false": boolean(false), ":true": boolean(true), ":now": millis(time.Now()), ":run": str(runID)},
	})
	if _, ok := conditionFailed(err); ok {
		return nil
	}
	return wrap("release the lock of task "+quote(taskID)+" held by run "+quote(runID), err)
}
