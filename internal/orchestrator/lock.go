package orchestrator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/statedir"
)

// lockTask takes an exclusive lock on one task id in this work dir, so two
// runs of the same task cannot share (and archive) one ctx dir and one set
// of logs. The lock is an flock on .stratus/locks/<task_id>.lock, released
// by the returned func or by the process ending. A lock held only for a
// moment (a prune of the task's old runs, docs/security.md § Retention)
// is waited for, up to lockWait. Errors: EINVALID when another run of the
// task holds it.
func lockTask(state, taskID string) (func(), error) {
	deadline := time.Now().Add(lockWait)
	for {
		unlock, err := tryLockTask(state, taskID)
		if stratus.ErrorCode(err) != stratus.EINVALID || time.Now().After(deadline) {
			return unlock, err
		}
		time.Sleep(lockWait / 20)
	}
}

// lockWait is how long lockTask waits for a task's lock held by another.
const lockWait = time.Second

// tryLockTask is lockTask without the wait: what a prune takes, which
// leaves a busy task for later.
func tryLockTask(state, taskID string) (func(), error) {
	dir := filepath.Join(state, "locks")
	if err := os.MkdirAll(dir, statedir.DirPerm); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, taskID+".lock"), os.O_CREATE|os.O_RDWR, statedir.FilePerm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, stratus.Errorf(stratus.EINVALID, "task %s is already running in this work dir (lock %s); wait for it or stop it first", taskID, f.Name())
		}
		return nil, fmt.Errorf("lock task %s: %w", taskID, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
