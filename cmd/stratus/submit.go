package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// SubmitOptions are the flags of `stratus submit`.
type SubmitOptions struct {
	IO     IO
	Tasks  []string
	Dir    string
	JSON   bool
	Target string
	AWS    AWSOptions
}

// SubmitResult is one queued task of `stratus submit --json` (a list, in
// the order the files were given).
type SubmitResult struct {
	TaskID string `json:"task_id"`
	File   string `json:"file"`             // where the task file is queued (a path, or an s3:// URL)
	RunID  string `json:"run_id,omitempty"` // the run prepared for it (--target aws)
}

func newSubmitCmd(io IO) *cobra.Command {
	o := &SubmitOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "submit TASK.md... [--dir DIR] [--target aws ...]",
		Short: "Queue a task in the task pool, where stratus watch (or, on a stack, its claim function) runs it",
		Long: `submit queues each task file TASK.md in a task pool (README.md § Task pool) and
returns; nothing runs in this process. Every file is checked before any is
queued: one that does not check queues none.

On this machine it checks the task (its front matter, its flow) and copies it
into DIR/<paths.tasks_dir>/pending/, where stratus watch takes it by queue,
priority and depends_on; a file of that name already there is never replaced.

With --target aws the run is prepared as run --target aws prepares it
(checked, compiled, its work dir, config and flows frozen to the stack's
bucket, its state machine created), the task file is written under the
bucket's tasks/pending/ prefix and the stack's claim function is woken: it
starts the run when the pool's rules let it, at most MaxConcurrentTasks at a
time, with no process of yours left running. stratus tasks --target aws lists
the pool; the run's id is printed now.

Exit status: 0 queued, 2 bad input (a task that does not check, one queued
already, a stack without a task pool).`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("missing TASK.md (usage: stratus submit TASK.md... [--dir DIR] [--target aws ...])")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.Tasks = args
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			return runSubmit(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (config, flows) and the task pool")
	cmd.Flags().BoolVar(&o.JSON, "json", false, `print {"task_id", "file", "run_id"} as JSON on stdout`)
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runSubmit(o *SubmitOptions) error {
	var res []SubmitResult
	var err error
	if o.Target == TargetAWS {
		res, err = submitAWS(awsContext(), o)
	} else {
		res, err = submitLocal(o)
	}
	if err != nil {
		// Those queued before the failure are said: nothing accepted is
		// lost from sight.
		for _, r := range res {
			fmt.Fprintf(o.IO.Err, "stratus: task %s was queued (%s) before this error\n", r.TaskID, r.File)
		}
		return usageOr(err)
	}
	if o.JSON {
		return printJSON(o.IO.Out, res)
	}
	for _, r := range res {
		fmt.Fprintf(o.IO.Out, "task %s queued: %s\n", r.TaskID, r.File)
		if r.RunID != "" {
			fmt.Fprintf(o.IO.Out, "  run %s prepared; the stack's claim starts it (stratus tasks%s lists the pool)\n", r.RunID, o.AWS.flagsHint())
		}
	}
	return nil
}

// submitLocal checks each task file of o.Tasks (it parses; its flow
// loads; no task of its id is pending) and then copies each into the work
// dir's pool's pending/, never over a file of that name. Errors: the
// task's or the flow's (EINVALID, ENOTFOUND), naming the file; EINVALID
// when pending/ has a task of that id or a file of that name (the files
// before it are queued).
func submitLocal(o *SubmitOptions) ([]SubmitResult, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	_, pool, err := openPool(dir)
	if err != nil {
		return nil, err
	}
	if err := uniqueFiles(o.Tasks); err != nil {
		return nil, err
	}
	var bodies [][]byte
	var ids []string
	byID := map[string]string{}
	for _, path := range o.Tasks {
		body, err := os.ReadFile(path)
		if err != nil {
			return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "task", "%s: %v", path, err)
		}
		tk, err := task.Parse(path, body)
		if err != nil {
			return nil, err
		}
		if _, err := flow.Load(filepath.Join(dir, orchestrator.StateDir, orchestrator.FlowsDir), tk.TaskType); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if e, err := pool.Find(taskpool.Pending, tk.ID); err == nil {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "task", "%s: task %s is queued already as %s; wait for it to run, or remove that file", path, tk.ID, e.Path)
		}
		if other, dup := byID[tk.ID]; dup {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "task", "%s and %s are both task %s: the ids of a pool's tasks are unique", other, path, tk.ID)
		}
		if to := filepath.Join(pool.Dir(taskpool.Pending), filepath.Base(path)); fileExists(to) {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "task", "%s: %s exists already; rename the task file or remove that one", path, to)
		}
		for _, st := range []string{taskpool.Done, taskpool.Failed} {
			if e, err := pool.Find(st, filepath.Base(path)); err == nil && e.File == filepath.Base(path) && e.ID() != tk.ID {
				return nil, stratus.FieldErrorf(stratus.EINVALID, "task", "%s: %s is task %s's: once run, this task's file would replace it; rename the task file", path, e.Path, e.ID())
			}
		}
		byID[tk.ID] = path
		bodies, ids = append(bodies, body), append(ids, tk.ID)
	}
	if err := os.MkdirAll(pool.Dir(taskpool.Pending), statedir.DirPerm); err != nil {
		return nil, err
	}
	out := []SubmitResult{}
	for i, path := range o.Tasks {
		to := filepath.Join(pool.Dir(taskpool.Pending), filepath.Base(path))
		if err := linkIn(pool.Dir(taskpool.Pending), to, bodies[i]); err != nil {
			return out, err
		}
		out = append(out, SubmitResult{TaskID: ids[i], File: to})
	}
	return out, nil
}

// uniqueFiles refuses two task files of one name: each is queued under its
// base name. Errors: EINVALID naming both.
func uniqueFiles(paths []string) error {
	seen := map[string]string{}
	for _, p := range paths {
		if other, dup := seen[filepath.Base(p)]; dup {
			return stratus.FieldErrorf(stratus.EINVALID, "task", "%s and %s would both be queued as %s: give one another name", other, p, filepath.Base(p))
		}
		seen[filepath.Base(p)] = p
	}
	return nil
}

// fileExists reports whether path names something.
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// linkIn writes body beside to, then links it in whole: watch never reads
// it half-written, and a file of that name is never replaced. Errors:
// EINVALID naming to when it exists.
func linkIn(dir, to string, body []byte) error {
	tmp, err := os.CreateTemp(dir, ".submit-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), to); errors.Is(err, os.ErrExist) {
		return stratus.FieldErrorf(stratus.EINVALID, "task", "%s exists already; rename the task file or remove that one", to)
	} else if err != nil {
		return err
	}
	return nil
}
