package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// WatchOptions are the flags of `stratus watch`.
type WatchOptions struct {
	IO          IO
	Dir         string
	PollSeconds int
	pollSet     bool
	Queue       string
	Once        bool
	Self        string // the stratus binary workers run as ("" = this one)
}

func newWatchCmd(io IO) *cobra.Command {
	o := &WatchOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "watch [--dir DIR] [--poll-seconds N] [--queue Q] [--once]",
		Short: "Run the task pool: claim eligible pending tasks, run them, file them in done/ or failed/",
		Long: `watch serves the work dir's task pool (README.md § Task pool): the task files
in DIR/<paths.tasks_dir>/pending (default tasks/pending). Each tick it brings
the base branch up to date (git fetch and a fast-forward, when the repository
has a remote and a clean checkout), claims the eligible tasks (its queue,
depends_on done, high before mid before low, ties in natural file name order)
up to orchestrator.max_concurrent_tasks, and runs each as stratus run would.
When a run ends the task file moves to done/ (the run ended done) or failed/
(anything else) beside <id>.summary.md, the run's summary, and an audit commit
holds exactly those files.

A claim is exclusive: two watchers on one pool never run one task. A watcher
killed at any point leaves its claims to the next one, which resumes their
interrupted runs; no task is lost, none runs twice.

--poll-seconds overrides orchestrator.poll_interval_seconds (default 300);
0 (or --once) runs until nothing is eligible, then ends. --queue overrides
orchestrator.queue (default "default").

Exit status: 0 nothing left to run (--once, --poll-seconds 0), 130
interrupted (the runs under way are interrupted; the next watch resumes
them), 2 bad input.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.pollSet = c.Flags().Changed("poll-seconds")
			if o.PollSeconds < 0 {
				return usageError{fmt.Errorf("--poll-seconds %d: want seconds >= 0 (0: run until nothing is eligible)", o.PollSeconds)}
			}
			if c.Flags().Changed("queue") && strings.TrimSpace(o.Queue) == "" {
				return usageError{fmt.Errorf("--queue %q: want a queue name", o.Queue)}
			}
			return runWatch(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ and the task pool")
	cmd.Flags().IntVar(&o.PollSeconds, "poll-seconds", 0, "seconds between ticks (default: orchestrator.poll_interval_seconds; 0: until nothing is eligible)")
	cmd.Flags().StringVar(&o.Queue, "queue", "", "the queue served (default: orchestrator.queue)")
	cmd.Flags().BoolVar(&o.Once, "once", false, "run until nothing is eligible, then end")
	return cmd
}

// openPool reads dir's config and returns it with dir's task pool.
func openPool(dir string) (*config.Config, *taskpool.Pool, error) {
	cfg, err := config.Load(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile))
	if err != nil {
		return nil, nil, err
	}
	return cfg, taskpool.New(dir, orchestrator.StateDir, cfg.Paths.Tasks()), nil
}

// watcher is one `stratus watch`: its pool, its claims under way.
type watcher struct {
	o     *WatchOptions
	dir   string
	cfg   *config.Config
	pool  *taskpool.Pool
	queue string
	owner string

	mu      sync.Mutex
	running map[string]bool // task id → its run under way here
	ended   chan struct{}   // a run ended
	wg      sync.WaitGroup
	noted   map[string]bool // notes said once
}

func runWatch(o *WatchOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	cfg, pool, err := openPool(dir)
	if err != nil {
		return usageOr(err)
	}
	if _, err := os.Stat(pool.Dir(taskpool.Pending)); err != nil {
		return usageOr(stratus.FieldErrorf(stratus.ENOTFOUND, "paths.tasks_dir", "no task pool: %s is missing; make it (with preparing/, done/ and failed/ beside it) or set paths.tasks_dir", pool.Dir(taskpool.Pending)))
	}
	poll := cfg.Orchestrator.PollInterval()
	if o.pollSet {
		poll = o.PollSeconds
	}
	single := o.Once || poll == 0
	w := &watcher{o: o, dir: dir, cfg: cfg, pool: pool, queue: cmp.Or(o.Queue, cfg.Orchestrator.QueueName()),
		owner: lifecycle.Owner(), running: map[string]bool{}, ended: make(chan struct{}, 64), noted: map[string]bool{}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // as runRun
	w.say("watching %s (queue %s, up to %d at once)", pool.Root, w.queue, cfg.Orchestrator.MaxTasks())
	for {
		if ctx.Err() == nil {
			w.sync(ctx)
			w.adopt(ctx)
		}
		started := 0
		if ctx.Err() == nil {
			started = w.tick(ctx)
		}
		w.mu.Lock()
		busy := len(w.running)
		w.mu.Unlock()
		if ctx.Err() != nil {
			w.wg.Wait()
			fmt.Fprintln(o.IO.Err, "stratus: watch: interrupted; the runs under way were interrupted and the next `stratus watch` resumes them")
			return &exitError{code: ExitInterrupted}
		}
		if single && busy == 0 && started == 0 {
			w.say("nothing eligible is left in %s", pool.Dir(taskpool.Pending))
			return nil
		}
		if single && busy == 0 {
			// Only refusals changed the pool: no run will end to wake this
			// pass, so it looks again now.
			continue
		}
		var tick <-chan time.Time
		if !single {
			tick = time.After(time.Duration(poll) * time.Second)
		}
		select {
		case <-ctx.Done():
		case <-tick:
		case <-w.ended:
			// A slot freed: in auto mode (or a single pass) the next task
			// is taken now; otherwise at the next tick.
			if !single && !cfg.Orchestrator.AutoMode.Enabled && tick != nil {
				select {
				case <-ctx.Done():
				case <-tick:
				}
			}
		}
	}
}

// say prints one line of the watcher's on stderr.
func (w *watcher) say(format string, args ...any) {
	fmt.Fprintf(w.o.IO.Err, "stratus: watch: "+format+"\n", args...)
}

// sayOnce says a note once per watcher.
func (w *watcher) sayOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !w.noted[msg] {
		w.noted[msg] = true
		w.say("%s", msg)
	}
}

// sync brings the base branch up to date before a scan (worc: each tick
// runs git fetch and a fast-forward, so that tasks pushed to the base
// branch are found): only when the repository has the configured remote,
// the checkout is on the base branch and clean; otherwise it says why it
// skipped, once.
func (w *watcher) sync(ctx context.Context) {
	remote, base := w.cfg.Git.RemoteName(), w.cfg.Git.Base()
	env := gitwork.ConfigEnv(gitwork.FixedConfig()...)
	if _, err := gitwork.Run(ctx, w.dir, env, "rev-parse", "--is-inside-work-tree"); err != nil {
		w.sayOnce("no git fetch: %s is not a git work tree", w.dir)
		return
	}
	if _, err := gitwork.Run(ctx, w.dir, env, "remote", "get-url", remote); err != nil {
		w.sayOnce("no git fetch: the repository has no remote %s", remote)
		return
	}
	branch, err := gitwork.Run(ctx, w.dir, env, "symbolic-ref", "--short", "HEAD")
	if err != nil || strings.TrimSpace(string(branch)) != base {
		w.sayOnce("no git fetch: the checkout is not on %s", base)
		return
	}
	if out, err := gitwork.Run(ctx, w.dir, env, "status", "--porcelain", "--untracked-files=no"); err != nil || len(out) > 0 {
		w.say("no git fetch this tick: the checkout has changes")
		return
	}
	if _, err := gitwork.Run(ctx, w.dir, env, "fetch", "--quiet", remote, base); err != nil {
		w.say("git fetch %s %s: %v", remote, base, err)
		return
	}
	if _, err := gitwork.Run(ctx, w.dir, env, "merge", "--ff-only", "--quiet", remote+"/"+base); err != nil {
		w.say("git merge --ff-only %s/%s: %v", remote, base, err)
	}
}

// adopt takes over the claims of watchers that are gone: each one's run
// is waited for, resumed or finished.
func (w *watcher) adopt(ctx context.Context) {
	claims, err := w.pool.Claims()
	if err != nil {
		w.say("read the claims: %v", err)
		return
	}
	for _, c := range claims {
		if c.Held {
			continue
		}
		a, err := w.pool.Adopt(c.TaskID, w.owner)
		if errors.Is(err, taskpool.ErrClaimed) {
			continue
		} else if err != nil {
			w.say("adopt the claim of task %s: %v", c.TaskID, err)
			continue
		}
		if a.RunID == "" {
			// Claimed to be refused: the next scan decides again.
			w.pool.Release(a)
			continue
		}
		w.say("adopted task %s (run %s) from a watcher that is gone", a.TaskID, a.RunID)
		w.start(ctx, a, true)
	}
}

// tick scans the pool once: it refuses what can never run, warns of what
// does not parse, and claims and starts the eligible tasks. It returns
// how many it started.
func (w *watcher) tick(ctx context.Context) int {
	entries, err := w.pool.All()
	if err != nil {
		w.say("%v", err)
		return 0
	}
	claims, err := w.pool.Claims()
	if err != nil {
		w.say("read the claims: %v", err)
		return 0
	}
	claimed := map[string]bool{}
	for _, c := range claims {
		claimed[c.TaskID] = true
	}
	w.mu.Lock()
	free := w.cfg.Orchestrator.MaxTasks() - len(w.running)
	w.mu.Unlock()
	// Every eligible task, in order: one another watcher claims first is
	// skipped for the next, up to this watcher's free slots.
	plan := taskpool.Decide(taskpool.Input{Entries: entries, Claimed: claimed, Queue: w.queue, Free: len(entries[taskpool.Pending]), Unmerged: w.unmerged})
	for _, e := range plan.Invalid {
		w.sayOnce("warning: %s is not taken: %s (read again each tick)", e.Path, safetext.Line(e.Err.Error()))
	}
	started := 0
	for _, d := range plan.Pending {
		if d.Refuse == "" {
			continue
		}
		c, err := w.pool.Claim(d.Entry, "", w.owner)
		if err != nil {
			continue
		}
		w.say("task %s refused: %s", c.TaskID, d.Refuse)
		w.file(ctx, c, taskpool.Failed, refusedSummary(c.TaskID, d.Refuse))
		started++ // the pool changed: look again
	}
	for _, e := range plan.Next {
		if free <= 0 {
			break
		}
		c, err := w.pool.Claim(e, lifecycle.NewRunID(), w.owner)
		if errors.Is(err, taskpool.ErrClaimed) {
			continue
		} else if err != nil {
			w.say("claim task %s: %v", e.Task.ID, err)
			continue
		}
		w.say("claimed task %s (%s, priority %s, queue %s): run %s", c.TaskID, e.File, e.Priority(), e.Queue(), c.RunID)
		w.start(ctx, c, false)
		started++
		free--
	}
	return started
}

// unmerged says why done task id does not count as a dependency yet
// (taskpool.Pool.Unmerged), read from the work dir's runs.
func (w *watcher) unmerged(id string) string {
	if _, ok := w.pool.Ended(id); !ok {
		return "" // done by hand or elsewhere: no run to read
	}
	st, err := openRuns(w.dir)
	if err != nil {
		return ""
	}
	defer st.Close()
	return w.pool.Unmerged(context.Background(), st, id)
}

// start runs claim c's task in the background: a new run, or, adopted, its
// run waited for, resumed or finished.
func (w *watcher) start(ctx context.Context, c *taskpool.Claim, adopted bool) {
	w.mu.Lock()
	w.running[c.TaskID] = true
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.running, c.TaskID)
			w.mu.Unlock()
			w.ended <- struct{}{}
		}()
		status, summary, err := w.run(ctx, c, adopted)
		switch {
		case ctx.Err() != nil:
			// Interrupted: the claim stays; the next watcher resumes it.
			w.say("task %s: run %s interrupted", c.TaskID, c.RunID)
			return
		case err != nil:
			w.say("task %s failed before its run: %s", c.TaskID, safetext.Line(err.Error()))
			if !recorded(w.dir, c.RunID) {
				c.RunID = ""
			}
			w.file(ctx, c, taskpool.Failed, refusedSummary(c.TaskID, err.Error()))
		case status == stratus.RunDone:
			w.file(ctx, c, taskpool.Done, summary)
		default:
			w.file(ctx, c, taskpool.Failed, summary)
		}
	}()
}

// run runs claim c's task to its end and returns the run's status and
// summary.md; err is why it could not run at all (validation's message).
func (w *watcher) run(ctx context.Context, c *taskpool.Claim, adopted bool) (string, []byte, error) {
	if adopted {
		st, err := openRuns(w.dir)
		if err == nil {
			run, gerr := st.GetRun(ctx, c.RunID)
			if gerr == nil {
				run, gerr = lifecycle.Reconcile(ctx, st, run)
			}
			st.Close()
			if gerr == nil {
				return w.follow(ctx, c, run)
			}
			if stratus.ErrorCode(gerr) != stratus.ENOTFOUND {
				return "", nil, gerr
			}
		}
		// Claimed, never recorded: the run starts now, under its id.
		if _, err := os.Stat(filepath.Join(w.pool.Dir(taskpool.Pending), c.File)); err != nil {
			return "", nil, fmt.Errorf("task %s was claimed but its file %s left %s/ before its run was recorded", c.TaskID, c.File, taskpool.Pending)
		}
	}
	d := newDisplay(w.o.IO, false)
	defer d.Close()
	res, err := orchestrator.Run(ctx, orchestrator.Options{Dir: w.dir, TaskPath: filepath.Join(w.pool.Dir(taskpool.Pending), c.File), Self: w.o.Self, Progress: d, RunID: c.RunID})
	if err != nil {
		return "", nil, err
	}
	return res.Status, w.summary(ctx, c), nil
}

// follow takes an adopted claim's recorded run to its end: an interrupted
// run is resumed as `stratus resume` does; one still running under a live
// owner is waited for; an ended one is filed as it ended.
func (w *watcher) follow(ctx context.Context, c *taskpool.Claim, run stratus.Run) (string, []byte, error) {
	for run.Status == stratus.RunRunning {
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-time.After(time.Second):
		}
		st, err := openRuns(w.dir)
		if err != nil {
			return "", nil, err
		}
		run, err = st.GetRun(ctx, c.RunID)
		if err == nil {
			run, err = lifecycle.Reconcile(ctx, st, run)
		}
		st.Close()
		if err != nil {
			return "", nil, err
		}
	}
	if run.Status == stratus.RunInterrupted {
		w.say("task %s: resuming run %s", c.TaskID, c.RunID)
		disp := newDisplay(w.o.IO, false)
		defer disp.Close()
		res, err := orchestrator.Resume(ctx, orchestrator.ResumeOptions{Dir: w.dir, RunID: c.RunID, Self: w.o.Self, Progress: disp})
		if err != nil {
			return "", nil, err
		}
		return res.Status, w.summary(ctx, c), nil
	}
	return run.Status, w.summary(ctx, c), nil
}

// summary is the summary.md of claim c's run, or a line saying where it
// is not.
func (w *watcher) summary(ctx context.Context, c *taskpool.Claim) []byte {
	sk := fs.New(w.dir).Private(orchestrator.StateDir)
	if rd, err := report.RunDir(ctx, sk, c.TaskID, c.RunID); err == nil {
		if b, err := os.ReadFile(filepath.Join(w.dir, filepath.FromSlash(rd), "summary.md")); err == nil {
			return b
		}
	}
	return fmt.Appendf(nil, "# %s\n\nRun %s left no summary.md; `stratus status %s` says how it ended.\n", c.TaskID, c.RunID, c.RunID)
}

// refusedSummary is the summary of a task that could not run.
func refusedSummary(id, why string) []byte {
	return fmt.Appendf(nil, "# %s\n\nThe task did not run: %s\n", id, why)
}

// file moves claim c's task to state beside its summary, makes the audit
// commit of those files and releases the claim.
func (w *watcher) file(ctx context.Context, c *taskpool.Claim, state string, summary []byte) {
	paths, err := w.pool.Move(w.dir, c, state, summary)
	if err != nil {
		w.say("%v", err)
		return
	}
	// The audit commit is made even when the watcher is being stopped: the
	// task's files have moved.
	commit, note, err := w.pool.AuditCommit(context.WithoutCancel(ctx), w.dir, w.cfg.Git.AuditMessage(c.TaskID), paths)
	switch {
	case err != nil:
		note = "audit commit failed: " + err.Error()
	case commit != "":
		note = "audit commit " + commit[:min(12, len(commit))]
	}
	if err := w.pool.Release(c); err != nil {
		w.say("release the claim of task %s: %v", c.TaskID, err)
	}
	w.say("task %s %s: %s (%s)", c.TaskID, state, paths[1], note)
}
