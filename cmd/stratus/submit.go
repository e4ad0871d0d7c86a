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
	Task   string
	Dir    string
	JSON   bool
	Target string
	AWS    AWSOptions
}

// SubmitResult is what `stratus submit --json` prints.
type SubmitResult struct {
	TaskID string `json:"task_id"`
	File   string `json:"file"`             // where the task file is queued (a path, or an s3:// URL)
	RunID  string `json:"run_id,omitempty"` // the run prepared for it (--target aws)
}

func newSubmitCmd(io IO) *cobra.Command {
	o := &SubmitOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "submit TASK.md [--dir DIR] [--target aws ...]",
		Short: "Queue a task in the task pool, where stratus watch (or, on a stack, its claim function) runs it",
		Long: `submit queues task file TASK.md in a task pool (README.md § Task pool) and returns;
nothing runs in this process.

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
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.Task = args[0]
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
	var res SubmitResult
	var err error
	if o.Target == TargetAWS {
		res, err = submitAWS(awsContext(), o)
	} else {
		res, err = submitLocal(o)
	}
	if err != nil {
		return usageOr(err)
	}
	if o.JSON {
		return printJSON(o.IO.Out, res)
	}
	fmt.Fprintf(o.IO.Out, "task %s queued: %s\n", res.TaskID, res.File)
	if res.RunID != "" {
		fmt.Fprintf(o.IO.Out, "run %s (prepared; the stack's claim starts it)\n", res.RunID)
	}
	return nil
}

// submitLocal checks task file o.Task (it parses; its flow loads) and
// copies it into the work dir's pool's pending/, never over a file of
// that name. Errors: the task's or the flow's (EINVALID, ENOTFOUND);
// EINVALID when pending/ has a file of that name or a task of that id.
func submitLocal(o *SubmitOptions) (SubmitResult, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return SubmitResult{}, err
	}
	_, pool, err := openPool(dir)
	if err != nil {
		return SubmitResult{}, err
	}
	body, err := os.ReadFile(o.Task)
	if err != nil {
		return SubmitResult{}, stratus.FieldErrorf(stratus.ENOTFOUND, "task", "%s: %v", o.Task, err)
	}
	tk, err := task.Parse(o.Task, body)
	if err != nil {
		return SubmitResult{}, err
	}
	if _, err := flow.Load(filepath.Join(dir, orchestrator.StateDir, orchestrator.FlowsDir), tk.TaskType); err != nil {
		return SubmitResult{}, err
	}
	if e, err := pool.Find(taskpool.Pending, tk.ID); err == nil {
		return SubmitResult{}, stratus.FieldErrorf(stratus.EINVALID, "task", "task %s is queued already as %s; wait for it to run, or remove that file", tk.ID, e.Path)
	}
	if err := os.MkdirAll(pool.Dir(taskpool.Pending), statedir.DirPerm); err != nil {
		return SubmitResult{}, err
	}
	to := filepath.Join(pool.Dir(taskpool.Pending), filepath.Base(o.Task))
	// Written aside, then linked in whole: watch never reads it half-written.
	tmp, err := os.CreateTemp(pool.Dir(taskpool.Pending), ".submit-*")
	if err != nil {
		return SubmitResult{}, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return SubmitResult{}, err
	}
	if err := tmp.Close(); err != nil {
		return SubmitResult{}, err
	}
	if err := os.Link(tmp.Name(), to); errors.Is(err, os.ErrExist) {
		return SubmitResult{}, stratus.FieldErrorf(stratus.EINVALID, "task", "%s exists already; rename the task file or remove that one", to)
	} else if err != nil {
		return SubmitResult{}, err
	}
	return SubmitResult{TaskID: tk.ID, File: to}, nil
}
