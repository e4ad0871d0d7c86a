package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// PromoteOptions are the flags of `stratus promote`.
type PromoteOptions struct {
	IO   IO
	Dir  string
	Ref  string
	All  bool
	JSON bool
}

func newPromoteCmd(io IO) *cobra.Command {
	o := &PromoteOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "promote ID|FILE|--all [--dir DIR]",
		Short: "Move a task from the pool's preparing/ to pending/, where stratus watch takes it",
		Long: `promote moves task ID (or the file FILE) from DIR/<paths.tasks_dir>/preparing to
pending/ whole, at once (a hard link into pending/, then the old name
removed: it never replaces a file of that name), so that stratus watch never
reads a task half-written
(README.md § Task pool). --all moves every task file in preparing/. A file
whose front matter does not parse is moved all the same: watch warns of it
and leaves it in pending/ until it parses.

Exit status: 0 moved, 2 no such task in preparing/ (or one of that name
already in pending/).`,
		Args: func(c *cobra.Command, args []string) error {
			if o.All && len(args) > 0 || !o.All && len(args) != 1 {
				return usageError{errors.New("give one task id or file, or --all")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Ref = args[0]
			}
			return runPromote(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ and the task pool")
	cmd.Flags().BoolVar(&o.All, "all", false, "promote every task in preparing/")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the moved files as JSON")
	return cmd
}

func runPromote(o *PromoteOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	_, pool, err := openPool(dir)
	if err != nil {
		return usageOr(err)
	}
	var todo []taskpool.Entry
	if o.All {
		if todo, err = pool.List(taskpool.Preparing); err != nil {
			return err
		}
	} else {
		e, err := pool.Find(taskpool.Preparing, o.Ref)
		if err != nil {
			return usageOr(err)
		}
		todo = []taskpool.Entry{e}
	}
	if err := os.MkdirAll(pool.Dir(taskpool.Pending), statedir.DirPerm); err != nil {
		return err
	}
	var moved []string
	for _, e := range todo {
		to := filepath.Join(pool.Dir(taskpool.Pending), e.File)
		// link + remove is a rename that refuses to replace a file of
		// that name in pending/.
		if err := os.Link(e.Path, to); errors.Is(err, os.ErrExist) {
			return usageOr(stratus.FieldErrorf(stratus.EINVALID, "task", "%s is already in %s; rename one of them", e.File, pool.Dir(taskpool.Pending)))
		} else if err != nil {
			return fmt.Errorf("promote %s: %w", e.File, err)
		}
		if err := os.Remove(e.Path); err != nil {
			return fmt.Errorf("promote %s: %w", e.File, err)
		}
		moved = append(moved, to)
		if !o.JSON {
			fmt.Fprintf(o.IO.Out, "%s -> %s\n", e.Path, to)
		}
	}
	if o.JSON {
		return printJSON(o.IO.Out, map[string][]string{"promoted": append([]string{}, moved...)})
	}
	if len(moved) == 0 {
		fmt.Fprintf(o.IO.Err, "stratus: nothing to promote in %s\n", pool.Dir(taskpool.Preparing))
	}
	return nil
}
