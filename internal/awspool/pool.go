package awspool

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// Sink keys of the pool in the stack's bucket (under its prefix).
const (
	TasksDir    = "tasks"         // tasks/<state>/<file>, as paths.tasks_dir on disk
	PreparedDir = "pool/prepared" // <task_id>.json: the run submit prepared
)

// TaskKey is the sink key of task file file in lifecycle state state
// (taskpool.Pending, Done, ...).
func TaskKey(state, file string) string { return TasksDir + "/" + state + "/" + file }

// PreparedKey is the sink key of the run prepared for task taskID.
func PreparedKey(taskID string) string { return PreparedDir + "/" + taskID + ".json" }

// DefaultQueue is the queue the claim serves unless told otherwise
// (template.yaml TaskQueue).
const DefaultQueue = taskpool.DefaultQueue

// LeaseTTL is how long a claim holds the pool's lease: longer than the
// claim function's 120 s timeout, so a lease outlives only a claim that
// died.
const LeaseTTL = 3 * time.Minute

// ErrBusy is Tick's answer when another claim holds the pool's lease: the
// wake is to be delivered again (the claim queue redelivers it).
var ErrBusy = errors.New("another claim of the task pool is under way")

// Pool is a stack's task pool.
type Pool struct {
	Ports
	Queue string // the queue selector served; "" = DefaultQueue
	Max   int    // tasks running at once; < 1 = 1
	// Machines lets the claim prepare the run of a task file no `stratus
	// submit` prepared (the zero value: such a file is refused).
	Machines Machines
	// Log receives what the claim did and what it left (one record a
	// task); nil = discard.
	Log *slog.Logger
}

func (p *Pool) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return p.Log
}

func (p *Pool) queue() string {
	if p.Queue == "" {
		return DefaultQueue
	}
	return p.Queue
}

func (p *Pool) max() int { return max(p.Max, 1) }

// CheckSubmit refuses, before anything is prepared, task files (paths on
// this machine) that Submit would refuse: two of one base name or one id,
// one whose id is queued or claimed already or whose name is pending.
// Errors: EINVALID naming the files; the task's parse error; the sink's
// and the store's.
func (p *Pool) CheckSubmit(ctx context.Context, paths []string) error {
	entries, err := p.Entries(ctx)
	if err != nil {
		return err
	}
	claims, err := p.Store.PoolClaims(ctx)
	if err != nil {
		return err
	}
	names, ids := map[string]string{}, map[string]string{}
	for _, path := range paths {
		tk, err := task.Load(path)
		if err != nil {
			return err
		}
		name := filepath.Base(path)
		if other, dup := names[name]; dup {
			return stratus.FieldErrorf(stratus.EINVALID, "task", "%s and %s would both be queued as %s: give one another name", other, path, TaskKey(taskpool.Pending, name))
		}
		if other, dup := ids[tk.ID]; dup {
			return stratus.FieldErrorf(stratus.EINVALID, "task", "%s and %s are both task %s: the ids of a pool's tasks are unique", other, path, tk.ID)
		}
		names[name], ids[tk.ID] = path, path
		if err := checkQueued(entries[taskpool.Pending], claims, tk.ID, name); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, st := range []string{taskpool.Done, taskpool.Failed} {
			for _, e := range entries[st] {
				if e.File == name && e.ID() != tk.ID {
					return stratus.FieldErrorf(stratus.EINVALID, "task", "%s: %s is task %s's: once run, this task's file would replace it; rename the task file", path, e.Path, e.ID())
				}
			}
		}
	}
	return nil
}

// checkQueued refuses task id of file name when a pending task has that id
// or that name, or a claim that id. Errors: EINVALID.
func checkQueued(pending []taskpool.Entry, claims []dynamodb.PoolClaim, id, name string) error {
	for _, e := range pending {
		if e.File == name || e.ID() == id {
			return stratus.FieldErrorf(stratus.EINVALID, "task", "task %s is queued already as %s; wait for it to run, or delete that file to take it out of the pool", id, TaskKey(taskpool.Pending, e.File))
		}
	}
	for _, c := range claims {
		if c.TaskID == id {
			return stratus.FieldErrorf(stratus.EINVALID, "task", "task %s is claimed by run %s, which has not been settled; wait for it to end (stratus status %s --target aws)", id, c.RunID, c.RunID)
		}
	}
	return nil
}

// Submit queues prepared run pr of task file body (its bytes as checked):
// the prepared record first, then the file at tasks/pending/<pr.File>,
// which is what makes it queued. Errors: EINVALID when a task of the same
// id is queued or claimed already, or another file of that name is
// pending; the sink's and the store's.
func (p *Pool) Submit(ctx context.Context, pr Prepared, body []byte) error {
	entries, err := p.Entries(ctx)
	if err != nil {
		return err
	}
	claims, err := p.Store.PoolClaims(ctx)
	if err != nil {
		return err
	}
	if err := checkQueued(entries[taskpool.Pending], claims, pr.Run.TaskID, pr.File); err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	pr.TaskSHA256, pr.SubmittedAt = hex.EncodeToString(sum[:]), time.Now().UTC()
	raw, err := json.Marshal(pr)
	if err != nil {
		return err
	}
	if err := p.Sink.Put(ctx, PreparedKey(pr.Run.TaskID), raw); err != nil {
		return err
	}
	// The latest submit's environment is the pool's (EnvKey).
	if err := p.Sink.Put(ctx, EnvKey, raw); err != nil {
		return err
	}
	return p.Sink.Put(ctx, TaskKey(taskpool.Pending, pr.File), body)
}

// Entries reads the pool's task files by lifecycle state, each in natural
// file name order, as taskpool.Pool.All reads a work dir's (Entry.Path is
// the sink key). A file that does not parse is listed with its Err.
func (p *Pool) Entries(ctx context.Context) (map[string][]taskpool.Entry, error) {
	keys, err := p.Sink.List(ctx, TasksDir)
	if err != nil {
		return nil, fmt.Errorf("list the task pool: %w", err)
	}
	out := map[string][]taskpool.Entry{}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, TasksDir+"/")
		state, file, ok := strings.Cut(rest, "/")
		if !ok || strings.Contains(file, "/") || !slices.Contains(taskpool.States, state) || !taskpool.IsTaskFile(file) {
			continue
		}
		body, err := p.Sink.Get(ctx, k)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue // moved meanwhile
		} else if err != nil {
			return nil, err
		}
		e := taskpool.Entry{State: state, File: file, Path: k}
		e.Task, e.Err = task.Parse(file, body)
		out[state] = append(out[state], e)
	}
	for s := range out {
		slices.SortFunc(out[s], func(a, b taskpool.Entry) int { return taskpool.NaturalCompare(a.File, b.File) })
	}
	return out, nil
}

// prepared reads the run prepared for task taskID. Errors: ENOTFOUND.
func (p *Pool) prepared(ctx context.Context, taskID string) (Prepared, error) {
	var pr Prepared
	raw, err := p.Sink.Get(ctx, PreparedKey(taskID))
	if err != nil {
		return pr, err
	}
	if err := json.Unmarshal(raw, &pr); err != nil {
		return pr, fmt.Errorf("%s: %w", PreparedKey(taskID), err)
	}
	return pr, nil
}

// Result is what one Tick did.
type Result struct {
	Started []string // run ids started
	Settled []string // task ids moved to done/ or failed/
	Running int      // claimed tasks whose runs are under way after the tick
}

// Tick is one claim of the pool (README.md § Task pool): under the pool's
// lease, it settles the claimed tasks whose runs have ended (their files
// moved to done/ or failed/ with the run's summary beside them, the claim
// released), refuses the pending tasks that can never run (a depends_on
// cycle or an unknown id, a task file without a prepared run or changed
// since it was submitted: moved to failed/ with the reason), then claims
// and launches the eligible ones (taskpool.Decide: the served queue,
// priority, depends_on done and its pull request merged) until Max are
// under way. A task whose lock another run holds is left pending, its
// claim released. Errors: ErrBusy when another claim holds the lease; the
// store's and the sink's (what was done before stays done: a later tick
// goes on from there).
func (p *Pool) Tick(ctx context.Context) (Result, error) {
	var res Result
	owner := newOwner()
	if err := p.Store.LeasePool(ctx, owner, LeaseTTL); stratus.ErrorCode(err) == stratus.ECONFLICT {
		return res, fmt.Errorf("%w: %v", ErrBusy, err)
	} else if err != nil {
		return res, err
	}
	defer p.Store.ReleasePoolLease(context.WithoutCancel(ctx), owner)
	claims, err := p.Store.PoolClaims(ctx)
	if err != nil {
		return res, err
	}
	entries, err := p.Entries(ctx)
	if err != nil {
		return res, err
	}
	claimed := map[string]bool{}
	for _, c := range claims {
		run, err := p.Store.GetRun(ctx, c.RunID)
		switch {
		case stratus.ErrorCode(err) == stratus.ENOTFOUND:
			// Claimed by a claim that died before it recorded the run:
			// launched now, as it would have been.
			if started, err := p.relaunch(ctx, c); err != nil {
				return res, err
			} else if started {
				res.Started = append(res.Started, c.RunID)
				claimed[c.TaskID] = true
			}
		case err != nil:
			return res, err
		case stratus.RunTerminal(run.Status):
			if err := p.settle(ctx, c, run); err != nil {
				return res, err
			}
			res.Settled = append(res.Settled, c.TaskID)
		default:
			claimed[c.TaskID] = true
		}
	}
	if len(res.Settled) > 0 {
		// The settled files left pending/: read once more, after all.
		if entries, err = p.Entries(ctx); err != nil {
			return res, err
		}
	}
	// A task refused when taken frees its slot for the next: decided again
	// (each round moves at least one file out of pending/).
	for again := true; again; {
		again = false
		plan := taskpool.Decide(taskpool.Input{Entries: entries, Claimed: claimed, Queue: p.queue(), Free: p.max() - len(claimed),
			Unmerged: func(id string) string { return p.unmerged(ctx, id) }})
		for _, e := range plan.Invalid {
			p.log().Warn(fmt.Sprintf("task file %s: %v; left pending, read again at the next claim", e.Path, e.Err), "file", e.File)
		}
		for _, d := range plan.Pending {
			if d.Refuse != "" {
				if err := p.refuse(ctx, d.Entry, d.Refuse); err != nil {
					return res, err
				}
			}
		}
		for _, e := range plan.Next {
			runID, refused, err := p.take(ctx, e)
			if err != nil {
				return res, err
			}
			if runID != "" {
				res.Started = append(res.Started, runID)
				claimed[e.Task.ID] = true
			}
			again = again || refused
		}
		if again {
			if entries, err = p.Entries(ctx); err != nil {
				return res, err
			}
		}
	}
	res.Running = len(claimed)
	return res, nil
}

// take claims pending task e and launches the run prepared for it; it
// returns the run id, or "" when the task was left (its lock held by
// another run, claimed meanwhile) or refused (refused true: its file moved
// to failed/).
func (p *Pool) take(ctx context.Context, e taskpool.Entry) (runID string, refused bool, err error) {
	id := e.Task.ID
	body, err := p.Sink.Get(ctx, e.Path)
	if err != nil {
		return "", false, err
	}
	sum := sha256.Sum256(body)
	pr, err := p.prepared(ctx, id)
	fresh := stratus.ErrorCode(err) == stratus.ENOTFOUND
	if err == nil {
		// A prepared run that was launched is a past run of the task: this
		// file is a new one.
		if _, gerr := p.Store.GetRun(ctx, pr.Run.ID); gerr == nil {
			fresh = true
		} else if stratus.ErrorCode(gerr) != stratus.ENOTFOUND {
			return "", false, gerr
		}
	}
	switch {
	case fresh:
		// Written straight under pending/: prepared here, from the pool's
		// environment, and recorded as a submit records it.
		var why string
		if pr, why, err = p.prepare(ctx, e, body); err != nil {
			return "", false, err
		} else if why != "" {
			return "", true, p.refuse(ctx, e, why)
		}
		pr.TaskSHA256, pr.SubmittedAt = hex.EncodeToString(sum[:]), time.Now().UTC()
		raw, err := json.Marshal(pr)
		if err != nil {
			return "", false, err
		}
		if err := p.Sink.Put(ctx, PreparedKey(id), raw); err != nil {
			return "", false, err
		}
	case err != nil:
		return "", false, err
	case pr.File != e.File || pr.TaskSHA256 != hex.EncodeToString(sum[:]):
		return "", true, p.refuse(ctx, e, fmt.Sprintf("%s is not the task file submitted for task %s (%s, checked and frozen at %s): submit it again with `stratus submit`",
			e.Path, id, pr.File, pr.SubmittedAt.Format(time.RFC3339)))
	}
	c := dynamodb.PoolClaim{TaskID: id, File: e.File, RunID: pr.Run.ID, ClaimedAt: time.Now().UTC()}
	if err := p.Store.ClaimPoolTask(ctx, c); stratus.ErrorCode(err) == stratus.ECONFLICT {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	runID, err = p.launch(ctx, c, pr)
	return runID, false, err
}

// relaunch launches the run of claim c, which a claim that died took
// without recording its run; false when it was left.
func (p *Pool) relaunch(ctx context.Context, c dynamodb.PoolClaim) (bool, error) {
	pr, err := p.prepared(ctx, c.TaskID)
	if err != nil || pr.Run.ID != c.RunID {
		// Its prepared run is gone or another: the claim is released and
		// the task decided again.
		return false, p.Store.ReleasePoolClaim(ctx, c.TaskID, c.RunID)
	}
	runID, err := p.launch(ctx, c, pr)
	return runID != "", err
}

// launch launches prepared run pr under claim c (Launch); a task whose
// lock another run holds is left pending and its claim released.
func (p *Pool) launch(ctx context.Context, c dynamodb.PoolClaim, pr Prepared) (string, error) {
	var err error
	if pr.Definition == nil {
		if pr.Definition, err = p.definition(ctx, pr.Run.ID); err != nil {
			return "", err
		}
	}
	run, err := Launch(ctx, p.Ports, pr)
	var le *dynamodb.TaskLockedError
	switch {
	case errors.As(err, &le):
		p.log().Info(fmt.Sprintf("task %s waits: run %s of it, not the pool's, holds its lock", c.TaskID, le.RunID), "task_id", c.TaskID)
		return "", p.Store.ReleasePoolClaim(ctx, c.TaskID, c.RunID)
	case err != nil && run.Status == stratus.RunFailed:
		// Recorded, then failed to start: settled failed at the next claim.
		p.log().Error(fmt.Sprintf("task %s: run %s did not start: %v", c.TaskID, run.ID, err), "task_id", c.TaskID, "run_id", run.ID)
		return "", nil
	case err != nil:
		return "", err
	}
	p.log().Info(fmt.Sprintf("task %s claimed: run %s started (execution %s)", c.TaskID, run.ID, run.Execution), "task_id", c.TaskID, "run_id", run.ID)
	return run.ID, nil
}

// settle moves the file of claim c, whose run has ended, to done/ (the run
// is done) or failed/ beside <id>.summary.md (the run's summary, or what
// is known of its end when it wrote none), then releases the claim.
func (p *Pool) settle(ctx context.Context, c dynamodb.PoolClaim, run stratus.Run) error {
	state := taskpool.Failed
	if run.Status == stratus.RunDone {
		state = taskpool.Done
	}
	summary, err := p.summary(ctx, run)
	if err != nil {
		return err
	}
	if err := p.move(ctx, c.File, c.TaskID+taskpool.SummarySuffix, state, summary); err != nil {
		return err
	}
	p.log().Info(fmt.Sprintf("task %s: run %s ended %s; moved to %s/", c.TaskID, run.ID, run.Status, state), "task_id", c.TaskID, "run_id", run.ID, "status", run.Status)
	return p.Store.ReleasePoolClaim(ctx, c.TaskID, c.RunID)
}

// summary is run's summary.md, or a short one saying how it ended when it
// wrote none (it failed to start).
func (p *Pool) summary(ctx context.Context, run stratus.Run) ([]byte, error) {
	if dir, err := report.RunDir(ctx, p.Sink, run.TaskID, run.ID); err == nil {
		body, err := p.Sink.Get(ctx, path.Join(dir, "summary.md"))
		if err == nil {
			return body, nil
		} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
			return nil, err
		}
	} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return nil, err
	}
	return fmt.Appendf(nil, "# %s\n\nRun %s ended %s without a summary (it did not start).\n", run.TaskID, run.ID, run.Status), nil
}

// refuse moves pending task e to failed/ with why beside it: a task that
// can never run as it stands.
func (p *Pool) refuse(ctx context.Context, e taskpool.Entry, why string) error {
	p.log().Warn(fmt.Sprintf("task %s refused: %s; moved to %s/", e.ID(), why, taskpool.Failed), "task_id", e.ID(), "file", e.File)
	return p.move(ctx, e.File, taskpool.RefusedSummary(e.File), taskpool.Failed, fmt.Appendf(nil, "# %s\n\nRefused by the task pool: %s\n", e.ID(), why))
}

// move moves task file file from pending/ to state, writing summary
// beside it as name (<id>.summary.md, or taskpool.RefusedSummary) first. A
// file already moved (a claim that died after the move) is left where it
// is.
func (p *Pool) move(ctx context.Context, file, name, state string, summary []byte) error {
	if err := p.Sink.Put(ctx, TaskKey(state, name), summary); err != nil {
		return err
	}
	from := TaskKey(taskpool.Pending, file)
	body, err := p.Sink.Get(ctx, from)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	if err := p.Sink.Put(ctx, TaskKey(state, file), body); err != nil {
		return err
	}
	return p.Sink.Delete(ctx, from)
}

// definition is run runID's compiled definition, kept with its bundle.
func (p *Pool) definition(ctx context.Context, runID string) ([]byte, error) {
	return lifecycle.GetDefinition(ctx, p.Sink, runID)
}

// unmerged says why done task id does not count yet (taskpool.UnmergedRun
// of the run prepared for it).
func (p *Pool) unmerged(ctx context.Context, id string) string {
	pr, err := p.prepared(ctx, id)
	if err != nil {
		return ""
	}
	run, err := p.Store.GetRun(ctx, pr.Run.ID)
	if err != nil {
		return ""
	}
	return taskpool.UnmergedRun(run)
}

// newOwner names one claim: the lease's holder.
func newOwner() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "claim-" + hex.EncodeToString(b)
}
