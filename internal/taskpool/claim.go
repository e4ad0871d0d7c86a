package taskpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/statedir"
)

// ErrClaimed is returned by Claim and Adopt when another watcher holds
// the task's claim (or the task left pending/ meanwhile).
var ErrClaimed = errors.New("claimed by another watcher")

// Claim is one task a watcher took: the file .stratus/pool/claims/<id>.json,
// created exclusively and written before the task's run starts, and held
// (an flock) for as long as the watcher that owns it lives. A claim whose
// lock is free belongs to a watcher that is gone: the next watcher adopts
// it (Adopt) and waits for, resumes or finishes its run.
type Claim struct {
	TaskID    string    `json:"task_id"`
	File      string    `json:"file"`   // the task file's base name in pending/
	RunID     string    `json:"run_id"` // the run that runs it
	Owner     string    `json:"owner"`  // the watcher (lifecycle.Owner)
	ClaimedAt time.Time `json:"claimed_at"`
	// Held is set by Claims: a live watcher holds the claim.
	Held bool `json:"-"`

	f *os.File // open and locked while this process owns the claim
}

func (p *Pool) claimsDir() string { return filepath.Join(p.State, "pool", "claims") }
func (p *Pool) endedDir() string  { return filepath.Join(p.State, "pool", "ended") }

// lock takes the pool's lock (.stratus/pool/lock, an flock): claims are
// made and adopted under it, so a claim is never seen half-written and
// unlocked.
func (p *Pool) lock() (func(), error) {
	dir := filepath.Join(p.State, "pool")
	if err := os.MkdirAll(p.claimsDir(), statedir.DirPerm); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.endedDir(), statedir.DirPerm); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, statedir.FilePerm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the task pool: %w", err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Claim takes pending task e for run runID, owned by owner. Errors:
// ErrClaimed when another watcher has it or it left pending/ (another
// watcher ran it meanwhile).
func (p *Pool) Claim(e Entry, runID, owner string) (*Claim, error) {
	unlock, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Join(p.claimsDir(), e.Task.ID+".json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, statedir.FilePerm)
	if errors.Is(err, os.ErrExist) {
		return nil, ErrClaimed
	} else if err != nil {
		return nil, fmt.Errorf("claim task %s: %w", e.Task.ID, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("claim task %s: %w", e.Task.ID, err)
	}
	// A watcher that ran the task and released its claim moved the file
	// out of pending/ first: a claim made after that is void.
	if _, err := os.Stat(e.Path); err != nil {
		os.Remove(path)
		f.Close()
		return nil, ErrClaimed
	}
	c := &Claim{TaskID: e.Task.ID, File: e.File, RunID: runID, Owner: owner, ClaimedAt: time.Now().UTC(), f: f}
	if err := c.write(); err != nil {
		os.Remove(path)
		f.Close()
		return nil, err
	}
	return c, nil
}

// write writes c into its (locked) file.
func (c *Claim) write() error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := c.f.Truncate(0); err != nil {
		return err
	}
	if _, err := c.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("write claim %s: %w", c.f.Name(), err)
	}
	return c.f.Sync()
}

// Claims lists the claims under way, Held set on those a live watcher
// holds, in task id order.
func (p *Pool) Claims() ([]Claim, error) {
	des, err := os.ReadDir(p.claimsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []Claim
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		c, err := readClaim(filepath.Join(p.claimsDir(), de.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		c.Held = held(filepath.Join(p.claimsDir(), de.Name()))
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Claim) int { return NaturalCompare(a.TaskID, b.TaskID) })
	return out, nil
}

func readClaim(path string) (Claim, error) {
	var c Claim
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("claim %s: %w", path, err)
	}
	return c, nil
}

// held reports whether a process holds the lock of the claim at path.
func held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Adopt takes over the claim of task id left by a watcher that is gone,
// owned by owner from now on. Errors: ErrClaimed when a live watcher
// holds it or it was released meanwhile.
func (p *Pool) Adopt(id, owner string) (*Claim, error) {
	unlock, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Join(p.claimsDir(), id+".json")
	f, err := os.OpenFile(path, os.O_RDWR, statedir.FilePerm)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrClaimed
	} else if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrClaimed
		}
		return nil, err
	}
	c, err := readClaim(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.Owner, c.f = owner, f
	if err := c.write(); err != nil {
		f.Close()
		return nil, err
	}
	return &c, nil
}

// Release ends a claim once its task file is in done/ or failed/: the
// claim moves to .stratus/pool/ended/<id>.json (what Ended reads: the run
// that ran the task) and its lock is let go.
func (p *Pool) Release(c *Claim) error {
	if c.f != nil {
		c.write() // as it ended: a run that never started has no id
	}
	err := os.Rename(filepath.Join(p.claimsDir(), c.TaskID+".json"), filepath.Join(p.endedDir(), c.TaskID+".json"))
	if c.f != nil {
		syscall.Flock(int(c.f.Fd()), syscall.LOCK_UN)
		c.f.Close()
		c.f = nil
	}
	return err
}

// Ended returns the claim of the last run of task id that ended, and
// false when the pool has none (a task done by hand or on another machine).
func (p *Pool) Ended(id string) (Claim, bool) {
	c, err := readClaim(filepath.Join(p.endedDir(), id+".json"))
	return c, err == nil
}
