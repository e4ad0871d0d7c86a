package core

import (
	"context"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/workspace"
)

// watchStart is the operator's work dir as an attempt's worker found it
// (Service.WatchWorkDir), or why it could not be read.
type watchStart struct {
	state *workspace.WorkDirState
	err   error
}

func watchKey(tid string, n int) string { return fmt.Sprintf("%s#%d", tid, n) }

// watches reports whether attempts of run are watched.
func (s *Service) watches(run stratus.Run) bool {
	return s.WatchWorkDir && run.Workspace != nil && run.WorkDir != ""
}

// watchExclude lists what Stratus itself writes in the work dir while a
// step runs: its state dir, the run's ctx and report dirs.
func watchExclude(env *RunEnv, run stratus.Run) []string {
	exclude, err := WorkspaceExclude(env, run)
	if err != nil {
		exclude = []string{StateDirName}
	}
	if rd := ReportDir(env.Flow, run.TaskID); rd != "" {
		exclude = append(exclude, rd)
	}
	return exclude
}

// WatchStarted stamps the operator's work dir before attempt n of step
// tid's worker launches.
func (s *Service) WatchStarted(ctx context.Context, run stratus.Run, env *RunEnv, tid string, n int) {
	if !s.watches(run) {
		return
	}
	st, err := workspace.ReadWorkDir(ctx, run.WorkDir, watchExclude(env, run))
	s.watched.Store(watchKey(tid, n), watchStart{st, err})
}

// WatchReason is why the caller's report must fail its step: the files of
// the operator's work dir that changed since its worker launched, or that
// the dir could not be read; "" when nothing changed or the attempt is
// not watched. The stamp taken at launch is kept: every report of the
// attempt is held to it.
func (s *Service) WatchReason(ctx context.Context, c *Caller) string {
	if !s.watches(c.Run) {
		return ""
	}
	v, ok := s.watched.Load(watchKey(c.Step.TID, c.Attempt.N))
	if !ok {
		return "" // launched before this process watched it (a resumed run's leftover)
	}
	start := v.(watchStart)
	if start.err != nil {
		return fmt.Sprintf("the work dir %s could not be read when %s started (%v), so what its engine wrote there cannot be known (docs/security.md § Workspace commits)",
			c.Run.WorkDir, c.Step.StepRef, start.err)
	}
	now, err := workspace.ReadWorkDir(ctx, c.Run.WorkDir, watchExclude(c.Env, c.Run))
	if err != nil {
		return fmt.Sprintf("the work dir %s could not be read when %s reported (%v), so what its engine wrote there cannot be known (docs/security.md § Workspace commits)",
			c.Run.WorkDir, c.Step.StepRef, err)
	}
	changed := start.state.Changed(now)
	if len(changed) == 0 {
		return ""
	}
	shown := changed
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(changed)-10))
	}
	return fmt.Sprintf("while %s ran, %d %s of the operator's work dir %s changed: %s; with workspace: worktree its engine works in a checkout of its own and must not write there (docs/security.md § Workspace commits), so the step fails and its commit is not taken; see what changed (git status, git diff), restore what is not yours, then `stratus resume %s`",
		c.Step.StepRef, len(changed), plural(len(changed), "file", "files"), c.Run.WorkDir, strings.Join(shown, ", "), c.Run.ID)
}

// watchDone forgets the stamps taken for the attempts of step tid once it
// has ended: each holds a listing of the work dir.
func (s *Service) watchDone(tid string) {
	if tid == "" || !s.WatchWorkDir {
		return
	}
	s.watched.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), tid+"#") {
			s.watched.Delete(k)
		}
		return true
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
