package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
)

// PullOptions are the flags of `stratus pull`.
type PullOptions struct {
	IO     IO
	RunID  string
	Dir    string
	JSON   bool
	Force  bool
	Target string
	AWS    AWSOptions
}

func newPullCmd(io IO) *cobra.Command {
	o := &PullOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "pull RUN [--dir DIR | --target aws ...]",
		Short: "Bring a run's commits back into the repository as branch stratus/<task_id>",
		Long: `pull fetches the commits of a run whose repository travelled (every run
with --target aws; an embedded run in worktree mode, the default in a git
repository) into the git repository at DIR as the branch stratus/<task_id>,
recreated on top of the commit that was checked out when the run started:
first the changes to tracked files that were uncommitted then (they went into
the run's snapshot), then one commit per step that changed the workspace,
authored by Stratus, with the step ref as its message. Files that were
untracked at the start (the task file, another run's scratch) are never on
the branch. The branch merges cleanly and can become a pull request. pull never
touches the checked-out branch, the index or uncommitted work, and refuses
when stratus/<task_id> is the branch checked out. Pulling again recreates the
branch; a branch holding commits of yours is not moved without --force (an
earlier run's result is replaced: the reflog keeps it). A run that changed
nothing makes no branch.

` + runArgHelp + `
Exit status: 0 pulled, 2 bad input (no such run, no workspace, not a git
repository), 1 anything else.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.RunID = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			return runPull(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "the work directory (its git repository gets the branch)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print {run_id, branch, tip, commits} as JSON on stdout")
	cmd.Flags().BoolVar(&o.Force, "force", false, "move stratus/<task_id> even over commits that are not Stratus's (they stay in the reflog)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

// PullResult is what `stratus pull --json` prints.
type PullResult struct {
	RunID   string   `json:"run_id"`
	Branch  string   `json:"branch"`
	Tip     string   `json:"tip"`
	Commits []string `json:"commits"`
}

func runPull(o *PullOptions) error {
	ctx := awsContext()
	var st store.Store
	var sk sink.Sink
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	if o.Target == TargetAWS {
		var err error
		if st, sk, err = o.AWS.openRecords(ctx); err != nil {
			return usageOr(err)
		}
	} else {
		s, err := openRuns(dir)
		if err != nil {
			return usageOr(err)
		}
		defer s.Close()
		st, sk = s, fs.New(dir)
	}
	run, err := runview.Resolve(ctx, st, o.RunID)
	if err != nil {
		return usageOr(err)
	}
	pr, err := pull(ctx, o.IO, sk, run, dir, o.Force)
	if err != nil {
		return usageOr(err)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(pr)
	}
	return nil
}

// pull brings run's workspace into the repository at dir and says so on
// io.Err.
func pull(ctx context.Context, io IO, sk sink.Sink, run stratus.Run, dir string, force bool) (*PullResult, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	p, err := lifecycle.PullWorkspace(ctx, sk, run, dir, force)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(io.Err, "stratus: "+lifecycle.PulledLine(run, dir, p))
	if p.Commits == nil {
		p.Commits = []string{}
	}
	return &PullResult{RunID: run.ID, Branch: p.Branch, Tip: p.Tip, Commits: p.Commits}, nil
}
