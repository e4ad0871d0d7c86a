package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/publish"
	"github.com/stratusflow/stratus/internal/publish/github"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker/publishing"
)

// MergeTaskOptions are the flags of `stratus merge-task`.
type MergeTaskOptions struct {
	IO            IO
	RunID         string
	Dir           string
	Strategy      string
	WaitForChecks bool
	Target        string
	AWS           AWSOptions
}

func newMergeTaskCmd(io IO) *cobra.Command {
	o := &MergeTaskOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "merge-task RUN [--strategy merge|squash|rebase] [--wait-for-checks] [--dir DIR | --target aws ...]",
		Short: "Merge the pull request a run's publish step opened, merging its base in first",
		Long: `merge-task merges the pull request the run's publish step opened
(README.md § Publishing; worc's merge-task). It first merges the pull
request's base branch into the task branch when the branch does not hold it:
a clean merge is the orchestrator's merge commit, pushed to the branch; a
merge that stops on conflicts runs the flow config git.merge_flow names (the
built-in merge flow: resolve the markers, run the checks, fix) on a clone of
the branch in DIR/.stratus/merges/, and its result becomes the merge commit
— never a force-push. Then it merges the pull request with the strategy
(default git.auto_merge_strategy), or with --wait-for-checks arms GitHub's
own auto-merge. The token is the publisher's: STRATUS_GIT_TOKEN, GITHUB_TOKEN
or GH_TOKEN, else ` + "`gh auth token`" + `. The run's record says the pull
request's new state.

` + runArgHelp + `
Exit status: 0 merged (or auto-merge armed, or merged already), 2 bad input
(no such run, a run with no pull request, a bad strategy), 1 the merge was
refused or the merge flow did not end done.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.RunID = args[0]
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			return runMergeTask(c, o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "the work directory: its config.yaml gives the git settings and the merge flow")
	cmd.Flags().StringVar(&o.Strategy, "strategy", "", "merge, squash or rebase (default: config git.auto_merge_strategy, squash)")
	cmd.Flags().BoolVar(&o.WaitForChecks, "wait-for-checks", false, "arm GitHub's auto-merge, which merges once the required checks pass (default: config git.auto_merge_wait_for_checks)")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}

func runMergeTask(c *cobra.Command, o *MergeTaskOptions) error {
	ctx := awsContext()
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	var st store.Store
	if o.Target == TargetAWS {
		if st, _, err = o.AWS.openRecords(ctx); err != nil {
			return usageOr(err)
		}
	} else {
		s, err := openRuns(dir)
		if err != nil {
			return usageOr(err)
		}
		defer s.Close()
		st = s
	}
	run, err := runview.Resolve(ctx, st, o.RunID)
	if err != nil {
		return usageOr(err)
	}
	pub := run.Publication
	if pub == nil || pub.PullRequest == nil {
		return &exitError{code: ExitUsage, err: fmt.Errorf("run %s opened no pull request (its publish step did not push, or its policy opens none): nothing to merge", run.ID)}
	}
	cfg, err := config.Load(filepath.Join(dir, orchestrator.StateDir, orchestrator.ConfigFile))
	if err != nil {
		return usageOr(err)
	}
	g := cfg.Git
	strategy, err := github.ParseStrategy(cmp.Or(o.Strategy, g.Strategy()))
	if err != nil {
		return &exitError{code: ExitUsage, err: fmt.Errorf("--strategy: %w", err)}
	}
	wait := g.AutoMergeWaitForChecks
	if c.Flags().Changed("wait-for-checks") {
		wait = o.WaitForChecks
	}
	token := publish.Token(ctx, os.Getenv)
	api, repo := publishing.Host(g, pub.URL)
	if api == "" {
		return &exitError{code: ExitUsage, err: fmt.Errorf("run %s's remote %s (%s) is not a GitHub repository: merge branch %s yourself (for GitHub Enterprise set git.api_url)", run.ID, pub.Remote, pub.URL, pub.Branch)}
	}
	owner, name, _ := strings.Cut(repo, "/")
	host, err := github.New(api, token, owner, name, github.Options{})
	if err != nil {
		return usageOr(err)
	}
	pr, err := host.GetPR(ctx, pub.PullRequest.Number)
	if err != nil {
		return err
	}
	out := o.IO.Err
	if pr.Merged {
		fmt.Fprintf(out, "stratus: pull request #%d %s is merged already\n", pr.Number, pr.URL)
		return recordMerge(ctx, st, run, pr.MergeCommitSHA, "")
	}
	// The base first: the branch must hold it for the pull request to merge
	// cleanly (worc: a clean base-merge is mechanical, a conflict runs the
	// merge flow).
	work := filepath.Join(dir, orchestrator.StateDir, "merges", run.ID+"-"+time.Now().UTC().Format("20060102T150405"))
	m, err := publish.MergeBase(ctx, publish.BaseMergeSpec{Dir: work, Remote: pub.Remote, URL: pub.URL, Branch: pub.Branch, Base: pr.Base, Token: token})
	if err != nil {
		return err
	}
	head := m.BranchTip
	switch {
	case m.UpToDate:
		os.RemoveAll(work)
	case len(m.Conflicts) == 0:
		fmt.Fprintf(out, "stratus: merged %s into %s cleanly (%s)\n", pr.Base, pub.Branch, short12(m.Head))
		head = m.Head
	default:
		fmt.Fprintf(out, "stratus: merging %s into %s stopped on conflicts in %s: running flow %s in %s\n", pr.Base, pub.Branch, strings.Join(m.Conflicts, ", "), g.MergeFlowName(), work)
		if head, err = runMergeFlow(ctx, o.IO, dir, work, run, pr, m, g.MergeFlowName()); err != nil {
			return err
		}
	}
	if head != m.BranchTip {
		if _, err := publish.Push(ctx, publish.Spec{Dir: work, Remote: m.RemoteName, Branch: pub.Branch, Head: head, Token: token}); err != nil {
			return err
		}
		fmt.Fprintf(out, "stratus: pushed %s at %s\n", pub.Branch, short12(head))
		os.RemoveAll(work)
	}
	if wait {
		if err := host.EnableAutoMerge(ctx, pr.Number, strategy); err != nil {
			return err
		}
		got, err := host.GetPR(ctx, pr.Number)
		if err == nil && got.Merged {
			fmt.Fprintf(out, "stratus: pull request #%d %s merged (%s)\n", pr.Number, pr.URL, strategy)
			return recordMerge(ctx, st, run, got.MergeCommitSHA, "")
		}
		fmt.Fprintf(out, "stratus: pull request #%d %s: auto-merge (%s) armed; GitHub merges it once its required checks pass\n", pr.Number, pr.URL, strategy)
		return recordMerge(ctx, st, run, "", string(strategy))
	}
	res, err := host.Merge(ctx, pr.Number, strategy, head)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stratus: pull request #%d %s merged (%s) at %s\n", pr.Number, pr.URL, strategy, short12(res.SHA))
	return recordMerge(ctx, st, run, res.SHA, "")
}

// runMergeFlow runs the merge flow on the conflicted clone work (a run of
// its own, embedded, its state in work/.stratus) and returns the merge
// commit of its result.
func runMergeFlow(ctx context.Context, io IO, dir, work string, run stratus.Run, pr *github.PR, m *publish.BaseMerge, flowName string) (string, error) {
	// The flow runs with the work dir's own config, flows and tools.
	state, from := filepath.Join(work, orchestrator.StateDir), filepath.Join(dir, orchestrator.StateDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", err
	}
	// What install has the operator commit (.stratus/.gitignore keeps the
	// rest out): config.yaml, the script engine's scenario, flows, tools.
	for _, f := range []string{orchestrator.ConfigFile, "scenario.yaml"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if errors.Is(err, os.ErrNotExist) && f != orchestrator.ConfigFile {
			continue
		} else if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(state, f), b, 0o600); err != nil {
			return "", err
		}
	}
	for _, sub := range []string{orchestrator.FlowsDir, "tools"} {
		if _, err := os.Stat(filepath.Join(from, sub)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := copyFiles(filepath.Join(from, sub), filepath.Join(state, sub)); err != nil {
			return "", err
		}
	}
	taskID := run.TaskID + "-merge"
	task := filepath.Join(state, "merge-task.md")
	var list strings.Builder
	for _, p := range m.Conflicts {
		fmt.Fprintf(&list, "- `%s`\n", p)
	}
	body := fmt.Sprintf("---\nid: %s\ntitle: %q\ntask_type: %s\nworkspace: worktree\n---\n## Description\n\nMerging branch `%s` into `%s` (pull request #%d, %s) stopped on conflicts. These files hold conflict markers:\n\n%s\n## Acceptance criteria\n\n- No file holds a conflict marker.\n- Both the task's change and the base branch's changes are kept.\n- The checks pass.\n",
		taskID, "Resolve the merge of "+pr.Base+" into "+pr.Head, flowName, pr.Base, pr.Head, pr.Number, pr.URL, list.String())
	if err := os.WriteFile(task, []byte(body), 0o600); err != nil {
		return "", err
	}
	d := newDisplay(io, false)
	res, err := orchestrator.Run(ctx, orchestrator.Options{Dir: work, TaskPath: task, Progress: d})
	d.Close()
	if err != nil {
		return "", fmt.Errorf("merge flow %s: %w (its clone stays at %s)", flowName, err, work)
	}
	if res.Status != stratus.RunDone {
		return "", fmt.Errorf("merge flow %s ended %s: %s; the conflicted clone stays at %s (resolve it by hand, commit and push branch %s, then merge-task again)", flowName, res.Status, res.Cause, work, pr.Head)
	}
	resolved := "refs/heads/stratus/" + taskID
	sha, err := publish.CommitMerge(ctx, work, m, resolved, publish.MergeMessage(pr.Base, pr.Head))
	if err != nil {
		return "", fmt.Errorf("%w (the clone stays at %s)", err, work)
	}
	return sha, nil
}

// recordMerge records the pull request's new state on run.
func recordMerge(ctx context.Context, st store.Store, run stratus.Run, mergeSHA, armed string) error {
	p := *run.Publication
	pr := *p.PullRequest
	if mergeSHA != "" {
		pr.State, pr.MergeSHA = "merged", mergeSHA
	}
	if armed != "" {
		pr.AutoMerge = armed
	}
	p.PullRequest = &pr
	return st.SetPublication(ctx, run.ID, p)
}

func short12(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// copyFiles copies the regular files under src to dst, replacing what is
// there (a branch that tracks .stratus/ brings its own copies).
func copyFiles(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}
