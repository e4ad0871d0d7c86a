package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/stratusflow/stratus/internal/gitwork"
)

// RunChecks runs a checks node on the runner (worc configuration.md §
// checks). For command_profile it selects the command sets by the work
// tree's diff (SelectSets), then runs every command of every selected set —
// all of them, no fail-fast — each as an argv without a shell, in its cwd
// inside the work dir, with the set's timeout and the environment
// CommandEnv builds (the allowlisted variables, checks.env, and a HOME,
// TMPDIR and cache dir), keeping the last 64 KiB of its combined output. Its exit
// status is its result; when it ends, whatever it left running in its
// process group is killed (run). A command
// whose binary is absent in a skip_if_unavailable set is recorded
// "skipped"; in any other set it is a launch error. progress, when set, is
// called with the number of commands finished after each one (the runner
// posts it as a heartbeat). For citation it verifies the manifest
// (RunCitation).
//
// The error is non-nil only when ctx ends (the runner is stopping) or the
// spec is not a checks spec; every outcome of the checks themselves is in
// the result, for ChecksVerdict to judge.
func RunChecks(ctx context.Context, s Spec, progress func(done int)) (*ChecksResult, error) {
	if s.Kind != KindChecks || s.Checks == nil {
		return nil, fmt.Errorf("exec spec of kind %q carries no checks", s.Kind)
	}
	switch s.Checks.Checker {
	case CommandProfile:
	case Citation:
		return RunCitation(s.Dir, s.Checks.Manifest), nil
	default:
		return nil, fmt.Errorf("checker %q is not supported by this build; supported: %s, %s", s.Checks.Checker, CommandProfile, Citation)
	}
	res := &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{}}
	if len(s.Checks.CommandSets) == 0 {
		res.Note = "config.yaml sets no checks.command_sets: there is no gate, the node passes vacuously"
		return res, nil
	}
	changed, tree, why := ChangedPaths(ctx, s.Dir, s.Checks.Exclude)
	if s.Checks.Base != "" {
		changed, tree, why = ChangedSince(ctx, s.Dir, s.Checks.Base, s.Checks.Exclude)
	}
	sets := s.Checks.CommandSets
	if tree {
		res.Selection = SelectedByDiff
		res.ChangedTotal = len(changed)
		res.Changed = changed[:min(len(changed), maxChangedListed)]
		sets = SelectSets(sets, changed)
		switch {
		case len(changed) == 0:
			res.Note = "the work tree has no changes: no command set is selected and the node passes vacuously"
		case len(sets) == 0:
			res.Note = "no command set's paths match the changed paths"
		}
	} else {
		res.Selection = SelectedAll
		res.Note = "every command set ran: " + why
	}
	env, envErr := CommandEnv(s.AllowedEnvironment, s.Env)
	done := 0
	for _, set := range sets {
		for _, c := range set.Commands {
			r, err := runCheck(ctx, s.Dir, env, set, c)
			if envErr != nil {
				r, err = CheckRun{Set: set.Name, Name: c.Name, Argv: c.Argv, Cwd: c.Cwd, Status: StatusLaunchError, ExitCode: -1, Error: envErr.Error()}, nil
			}
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, r)
			done++
			if progress != nil {
				progress(done)
			}
		}
	}
	return res, nil
}

// runCheck runs one command of a set.
func runCheck(ctx context.Context, dir string, env []string, set CommandSet, c Command) (CheckRun, error) {
	r := CheckRun{Set: set.Name, Name: c.Name, Argv: c.Argv, Cwd: c.Cwd}
	cwd, err := inside(dir, c.Cwd)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(cwd); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", cwd)
		}
	}
	if err != nil {
		r.Status, r.ExitCode, r.Error = StatusLaunchError, -1, "cwd: "+err.Error()
		return r, nil
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		r.Status, r.ExitCode, r.Error = StatusLaunchError, -1, "empty argv"
		return r, nil
	}
	bin, err := resolveBinary(c.Argv[0], cwd, env)
	switch {
	case errors.Is(err, errAbsent) && set.SkipIfUnavailable:
		r.Status, r.ExitCode, r.Error = StatusSkipped, -1, "toolchain absent: "+err.Error()
		return r, nil
	case err != nil:
		r.Status, r.ExitCode, r.Error = StatusLaunchError, -1, err.Error()
		return r, nil
	}
	timeout := time.Duration(set.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = 7200 * time.Second
	}
	out := &tailBuffer{max: OutputTailBytes}
	pr, err := run(ctx, proc{path: bin, argv: c.Argv, dir: cwd, env: env, timeout: timeout, stdout: out, combined: true})
	if err != nil {
		return r, err
	}
	r.Status, r.ExitCode, r.Error, r.DurationMS = pr.status, pr.exitCode, pr.err, pr.duration.Milliseconds()
	r.Output, r.OutputBytes = out.String(), out.total
	return r, nil
}

// inside joins a relative path to root, refusing one that leaves it.
func inside(root, rel string) (string, error) {
	if rel == "" {
		return root, nil
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q is absolute; valid: a path relative to the work dir", rel)
	}
	p := filepath.Join(root, filepath.FromSlash(rel))
	if r, err := filepath.Rel(root, p); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%q leaves the work dir", rel)
	}
	return p, nil
}

// SelectSets returns, in order, the sets a diff selects (worc
// configuration.md § Diff-based selection): on a non-empty diff a set with
// no paths, and every set with a glob matching a changed path; on an empty
// diff none. Globs are doublestar patterns against repo-relative,
// slash-separated paths; a malformed glob matches nothing (the server
// refuses one before dispatch).
func SelectSets(sets []CommandSet, changed []string) []CommandSet {
	if len(changed) == 0 {
		return nil
	}
	var out []CommandSet
	for _, s := range sets {
		if len(s.Paths) == 0 || matchAny(s.Paths, changed) {
			out = append(out, s)
		}
	}
	return out
}

func matchAny(globs, paths []string) bool {
	for _, g := range globs {
		for _, p := range paths {
			if ok, _ := doublestar.Match(g, p); ok {
				return true
			}
		}
	}
	return false
}

// ChangedSince lists the paths that differ between commit base and the
// work tree dir is in (its commits since base and anything uncommitted),
// both sides of a rename, minus those under an exclude directory: the
// change of a run whose repository travels. tree and why as
// ChangedPaths's.
func ChangedSince(ctx context.Context, dir, base string, exclude []string) (changed []string, tree bool, why string) {
	t, err := gitwork.Open(ctx, dir)
	if errors.Is(err, gitwork.ErrNotTree) {
		return nil, false, dir + " is not a git work tree (" + gitwork.Reason(err) + ")"
	} else if err != nil {
		return nil, false, "git could not run (" + err.Error() + "), so the diff is unknown"
	}
	snap, err := t.Snapshot(ctx, base, exclude)
	if err != nil {
		return nil, false, "git diff against " + base + " failed in " + t.Root + " (" + err.Error() + "), so the diff is unknown"
	}
	changed = []string{}
	for _, p := range snap.Paths {
		changed = append(changed, p.Path)
		if p.Old != "" {
			changed = append(changed, p.Old)
		}
	}
	return changed, true, ""
}

// ChangedPaths lists the changes of the git work tree dir is in: `git
// status --porcelain -z --untracked-files=all`, untracked files included,
// both sides of a rename, as repo-relative slash paths, minus those under
// an exclude directory (relative to dir). tree is false when dir is not a
// git work tree — no repository contains it, git is not installed, or the
// enclosing repository ignores dir itself (gitwork.Open) — or git failed;
// why then says which, and every command set runs.
func ChangedPaths(ctx context.Context, dir string, exclude []string) (changed []string, tree bool, why string) {
	t, err := gitwork.Open(ctx, dir)
	if errors.Is(err, gitwork.ErrNotTree) {
		return nil, false, dir + " is not a git work tree (" + gitwork.Reason(err) + ")"
	} else if err != nil {
		return nil, false, "git could not run (" + err.Error() + "), so the diff is unknown"
	}
	entries, err := t.Status(ctx, gitwork.StatusOptions{Exclude: exclude})
	if err != nil {
		return nil, false, "git status failed in " + t.Root + " (" + err.Error() + "), so the diff is unknown"
	}
	changed = []string{}
	for _, e := range entries {
		changed = append(changed, e.Path)
		if e.Orig != "" {
			changed = append(changed, e.Orig)
		}
	}
	return changed, true, ""
}
