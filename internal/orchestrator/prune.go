package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/report"
	sinkfs "github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// Retention of embedded runs (docs/security.md § Retention). A run that
// ended more than retention_days ago is pruned: its run directory
// (.stratus/runs/<run_id>/: the frozen bundle, the compiled definition,
// the workspace bundles, a detached run's log), what is left of its
// uploads, the archives a later run of its task made of its ctx dir and
// logs (.stratus/logs/<task_id>/attempt-N/ whose run marker names it),
// and its step records in the store; the run record stays, marked
// (Run.PrunedAt), so that `runs` lists it and `status` says it was pruned.
// "Ended" is the run's recorded end: a run running or waiting, or one
// whose end is not recorded, is never pruned, and a run resumed is
// running again. The ctx dir and logs of a task's latest run stay where
// they are (they are the task's result in the work dir); the next run of
// the task archives them, and that archive goes once their run is pruned.
// An archive no recorded run claims goes when it was made (its directory's
// time, later than its run's end) more than retention_days ago.

// PruneInterval is how often a run's start prunes its work dir, at most.
const PruneInterval = time.Hour

// pruneStamp is the file under .stratus whose time says when the work dir
// was last pruned at a run's start.
const pruneStamp = "pruned"

// PruneOptions say which work dir to prune and how.
type PruneOptions struct {
	Dir string // the work dir holding .stratus/
	// Days is retention_days: runs that ended more than Days days before
	// Now are pruned; 0 or less prunes nothing (runs are kept for ever).
	Days   int
	Now    time.Time // zero: time.Now()
	DryRun bool      // say what would go; remove nothing
	// Store is the work dir's open store (a run's or a host's); nil: it is
	// opened here, and a work dir without one has nothing to prune.
	Store store.Store
}

// PruneReport is what Prune removed, or with DryRun would remove.
type PruneReport struct {
	Dir           string      `json:"dir"`
	RetentionDays int         `json:"retention_days"`
	Cutoff        time.Time   `json:"cutoff,omitzero"` // runs that ended before it are pruned
	DryRun        bool        `json:"dry_run"`
	Runs          []PrunedRun `json:"runs"`
	// Archives are archived ctx dirs and logs no recorded run claims,
	// removed (work-dir-relative).
	Archives []string `json:"archives"`
	// Busy lists tasks whose runs were left for a later prune: a run of
	// the task held its lock.
	Busy  []string `json:"busy_tasks"`
	Bytes int64    `json:"bytes"` // the size of what was (or would be) removed
}

// PrunedRun is one run Prune pruned (or would).
type PrunedRun struct {
	RunID   string    `json:"run_id"`
	TaskID  string    `json:"task_id"`
	Status  string    `json:"status"`
	EndedAt time.Time `json:"ended_at"`
	// Paths are the work-dir-relative files and directories removed.
	Paths []string `json:"paths"`
	Bytes int64    `json:"bytes"`
	// Earlier is set for a run pruned before whose leftover files (a
	// prune cut short) this one removed.
	Earlier bool `json:"earlier,omitempty"`
}

// Prune removes what retention says is old in work dir o.Dir (see above).
// A task whose lock a run holds is skipped (Busy), so nothing a running or
// resuming run reads is removed. Errors: the store's and the file
// system's; a run resumed while it was being looked at is skipped, not an
// error.
func Prune(ctx context.Context, o PruneOptions) (*PruneReport, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	rep := &PruneReport{Dir: dir, RetentionDays: max(o.Days, 0), DryRun: o.DryRun, Runs: []PrunedRun{}, Archives: []string{}, Busy: []string{}}
	if o.Days <= 0 {
		return rep, nil
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep.Cutoff = now.Add(-time.Duration(o.Days) * 24 * time.Hour).UTC()
	state := filepath.Join(dir, StateDir)
	st := o.Store
	if st == nil {
		db := filepath.Join(state, DBFile)
		if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
			return rep, nil
		}
		s, err := sqlite.Open(db)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
	}
	p := &pruner{dir: dir, state: state, st: st, cutoff: rep.Cutoff, now: now.UTC(), dry: o.DryRun}
	plan, err := p.plan(ctx)
	if err != nil {
		return nil, err
	}
	for _, task := range plan.tasks() {
		if err := p.task(ctx, task, plan, rep); err != nil {
			return rep, err
		}
	}
	for _, r := range rep.Runs {
		rep.Bytes += r.Bytes
	}
	return rep, nil
}

type pruner struct {
	dir, state  string
	st          store.Store
	cutoff, now time.Time
	dry         bool
}

// pruneAction is one run to prune (or one already pruned with files
// left), with the archives its marker names.
type pruneAction struct {
	run      stratus.Run
	archives []string // absolute
}

// prunePlan is what Prune will look at, by task.
type prunePlan struct {
	runs     map[string][]*pruneAction // task id → runs to prune
	archives map[string][]string       // task id → unclaimed archives to remove (absolute)
}

func (pl *prunePlan) tasks() []string {
	var ts []string
	for t := range pl.runs {
		ts = append(ts, t)
	}
	for t := range pl.archives {
		if _, ok := pl.runs[t]; !ok {
			ts = append(ts, t)
		}
	}
	sort.Strings(ts)
	return ts
}

// old reports whether run r is to be pruned: ended (terminal, its end
// recorded) before the cutoff.
func (p *pruner) old(r stratus.Run) bool {
	return stratus.RunTerminal(r.Status) && !r.EndedAt.IsZero() && r.EndedAt.Before(p.cutoff)
}

func (p *pruner) plan(ctx context.Context) (*prunePlan, error) {
	runs, err := p.st.ListRuns(ctx, 0)
	if err != nil {
		return nil, err
	}
	pl := &prunePlan{runs: map[string][]*pruneAction{}, archives: map[string][]string{}}
	byID := map[string]*pruneAction{}
	known := map[string]bool{}
	for _, r := range runs {
		known[r.ID] = true
		if lifecycle.CheckRunID(r.ID) != nil || !(p.old(r) || !r.PrunedAt.IsZero()) {
			continue
		}
		a := &pruneAction{run: r}
		byID[r.ID] = a
		pl.runs[r.TaskID] = append(pl.runs[r.TaskID], a)
	}
	logs := filepath.Join(p.state, "logs")
	if !p.realDir(logs) {
		return pl, nil
	}
	tasks, err := os.ReadDir(logs)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		taskDir := filepath.Join(logs, t.Name())
		if !t.IsDir() || !p.realDir(taskDir) {
			continue
		}
		entries, err := os.ReadDir(taskDir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			arch := filepath.Join(taskDir, e.Name())
			if !strings.HasPrefix(e.Name(), "attempt-") || !p.realDir(arch) {
				continue
			}
			owner := archiveOwner(arch)
			if a, ok := byID[owner]; ok {
				if a.run.TaskID == t.Name() { // a marker naming another task's run is not believed
					a.archives = append(a.archives, arch)
				}
				continue
			}
			if known[owner] {
				continue // its run is kept
			}
			if fi, err := os.Lstat(arch); err == nil && fi.ModTime().Before(p.cutoff) {
				pl.archives[t.Name()] = append(pl.archives[t.Name()], arch)
			}
		}
	}
	return pl, nil
}

// archiveOwner is the run id an archive's run marker names, "" when it has
// none (logs of a Stratus older than the marker).
func archiveOwner(arch string) string {
	f, err := os.OpenFile(filepath.Join(arch, report.RunMarker), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.Read(b)
	return strings.TrimSpace(string(b[:n]))
}

// realDir reports whether p is a directory, not a link to one: nothing
// under .stratus is reached through a link (docs/security.md § Files under
// .stratus).
func (p *pruner) realDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// task prunes the planned runs and archives of one task, holding its lock.
func (p *pruner) task(ctx context.Context, task string, pl *prunePlan, rep *PruneReport) error {
	unlock, err := tryLockTask(p.state, task)
	if stratus.ErrorCode(err) == stratus.EINVALID {
		rep.Busy = append(rep.Busy, task)
		return nil
	} else if err != nil {
		return err
	}
	defer unlock()
	for _, a := range pl.runs[task] {
		// Read again under the lock: a resume that started meanwhile has
		// made the run running.
		r, err := p.st.GetRun(ctx, a.run.ID)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			continue
		} else if err != nil {
			return err
		}
		earlier := !r.PrunedAt.IsZero()
		if !earlier && !p.old(r) {
			continue
		}
		paths := p.existing(append([]string{
			filepath.Join(p.state, RunsDir, r.ID),
			filepath.Join(p.state, RunsDir, r.ID+".json"),
			filepath.Join(p.state, "uploads", r.ID),
		}, a.archives...))
		if earlier && len(paths) == 0 {
			continue
		}
		pr := PrunedRun{RunID: r.ID, TaskID: r.TaskID, Status: r.Status, EndedAt: r.EndedAt, Paths: []string{}, Earlier: earlier}
		for _, path := range paths {
			pr.Bytes += size(path)
			pr.Paths = append(pr.Paths, p.rel(path))
		}
		if !p.dry {
			if !earlier {
				// The record first: from here on nothing starts on the
				// run's files (resume, pull and logs refuse a pruned run).
				if err := p.st.PruneRun(ctx, r.ID, p.now); stratus.ErrorCode(err) == stratus.ECONFLICT {
					continue
				} else if err != nil {
					return err
				}
			}
			for _, path := range paths {
				if err := os.RemoveAll(path); err != nil {
					return fmt.Errorf("prune run %s: %w", r.ID, err)
				}
			}
		}
		rep.Runs = append(rep.Runs, pr)
	}
	for _, arch := range pl.archives[task] {
		rep.Bytes += size(arch)
		if !p.dry {
			if err := os.RemoveAll(arch); err != nil {
				return fmt.Errorf("prune %s: %w", arch, err)
			}
		}
		rep.Archives = append(rep.Archives, p.rel(arch))
	}
	return nil
}

// existing keeps the paths that exist (links included: removed, never
// followed).
func (p *pruner) existing(paths []string) []string {
	var out []string
	for _, path := range paths {
		if _, err := os.Lstat(path); err == nil && !slices.Contains(out, path) {
			out = append(out, path)
		}
	}
	return out
}

func (p *pruner) rel(path string) string {
	if r, err := filepath.Rel(p.dir, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}

// size is the bytes of the regular files at or under path (links not
// followed).
func size(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// autoPrune prunes work dir dir at a run's start, at most once every
// PruneInterval (the time of .stratus/pruned says when it last did), with
// config retention_days days (0: never). A failure is a warning: retention
// never stops a run.
func autoPrune(ctx context.Context, dir string, st store.Store, days int, log *slog.Logger) {
	if days <= 0 {
		return
	}
	stamp := filepath.Join(dir, StateDir, pruneStamp)
	if fi, err := os.Lstat(stamp); err == nil && time.Since(fi.ModTime()) < PruneInterval {
		return
	}
	now := time.Now().UTC()
	// Through the private sink: never written through a planted link.
	if err := sinkfs.New(dir).Private(StateDir).Put(ctx, StateDir+"/"+pruneStamp, []byte(now.Format(time.RFC3339)+"\n")); err != nil {
		log.Warn(fmt.Sprintf("retention: %v", err))
		return
	}
	rep, err := Prune(ctx, PruneOptions{Dir: dir, Days: days, Now: now, Store: st})
	if err != nil {
		log.Warn(fmt.Sprintf("retention: pruning the runs that ended more than %d days ago stopped: %v (stratus prune tries again)", days, err))
		return
	}
	if n := len(rep.Runs) + len(rep.Archives); n > 0 {
		log.Info(fmt.Sprintf("retention: pruned %d runs and %d archives that ended more than %d days ago (retention_days), %d bytes", len(rep.Runs), len(rep.Archives), days, rep.Bytes))
	}
}
