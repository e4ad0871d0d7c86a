package orchestrator

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/statedir"
)

// CtxMarker is the file Stratus writes into every ctx dir it creates,
// before anything is projected there. Only a directory carrying it is ever
// moved by a rerun: a placement such as "{task_id}" with task id "src"
// resolves to the user's own src/, which holds no marker and is never
// touched (docs/contracts.md § Files are the server's job: the ctx dir is
// Stratus's; nothing else is). No part may take its name
// (projection.CheckPartName).
const CtxMarker = projection.CtxMarker

// prepareCtxDir readies a task's ctx dir for a new run: it refuses a ctx
// dir Stratus did not create (checkCtxDir), moves what the previous run
// left behind into <logs>/attempt-N/ (archivePrevious), then creates the
// ctx dir with its marker. It returns the archive dir, or "" when there was
// nothing to archive. placement is config.yaml's projection.placement, for
// the refusal message.
func prepareCtxDir(logsDir, ctxDir, placement, taskID string) (string, error) {
	if err := checkCtxDir(ctxDir, placement, taskID); err != nil {
		return "", err
	}
	arch, err := archivePrevious(logsDir, ctxDir)
	if err != nil {
		return "", fmt.Errorf("archive the previous run of task %s: %w", taskID, err)
	}
	return arch, markCtxDir(ctxDir, placement, taskID)
}

// markCtxDir creates the ctx dir of task taskID when it is missing and
// writes CtxMarker into it.
func markCtxDir(ctxDir, placement, taskID string) error {
	// In the state dir (projection.StatePlacement) the owner's alone, as
	// everything there; in the work dir a project's modes
	// (docs/security.md § Files under .stratus).
	dirPerm, filePerm := os.FileMode(0o755), os.FileMode(0o644)
	if projection.InState(placement) {
		dirPerm, filePerm = statedir.DirPerm, statedir.FilePerm
	}
	if err := os.MkdirAll(ctxDir, dirPerm); err != nil {
		return fmt.Errorf("create the ctx dir of task %s: %w", taskID, err)
	}
	where := fmt.Sprintf("projection.placement %q", placement)
	if projection.InState(placement) {
		where = "in the state dir: its run's repository travels"
	}
	note := fmt.Sprintf("This directory is the ctx dir of Stratus task %s (%s).\n"+
		"The next run of the task moves it into .stratus/logs/%s/attempt-N/ because this file is here.\n", taskID, where, taskID)
	if err := os.WriteFile(filepath.Join(ctxDir, CtxMarker), []byte(note), filePerm); err != nil {
		return fmt.Errorf("mark the ctx dir of task %s: %w", taskID, err)
	}
	return nil
}

// checkCtxDir refuses, touching nothing, a ctx dir path that exists but is
// not a directory carrying CtxMarker: whatever is there was not made by a
// Stratus run, so it is the user's and a rerun must not move it. The error
// is EINVALID (Field "projection.placement") naming the path and the
// placement.
func checkCtxDir(ctxDir, placement, taskID string) error {
	fi, err := os.Lstat(ctxDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("inspect the ctx dir of task %s: %w", taskID, err)
	}
	what := "a directory that Stratus did not create (it has no " + CtxMarker + " file)"
	if !fi.IsDir() {
		what = "not a directory"
	} else if m, err := os.Lstat(filepath.Join(ctxDir, CtxMarker)); err == nil && m.Mode().IsRegular() {
		return nil
	}
	return stratus.FieldErrorf(stratus.EINVALID, "projection.placement",
		"the ctx dir of task %s, %s (projection.placement %q in config.yaml), already exists and is %s; "+
			"a run moves its ctx dir aside when it starts, so it refuses to start rather than move your files. "+
			"Change projection.placement (e.g. workspace/tasks/{task_id}/ctx) or rename the task; "+
			"if it is a ctx dir left by an older stratus, remove it or create %s to let the run archive it",
		taskID, ctxDir, placement, what, filepath.Join(ctxDir, CtxMarker))
}

// archivePrevious moves what an earlier run of the same task left behind,
// its ctx dir and its logs, into <logs>/attempt-N/ (N = 1, 2, ...), so a
// rerun starts from a clean ctx dir and the earlier run stays readable
// (docs/contracts.md § Prompt audit: "archived into attempt-<N>/ on rerun
// like the rest of the task's logs"). It returns the archive dir, or "" when
// there was nothing to archive. The ctx dir is moved only when it is a
// directory carrying CtxMarker (the caller checks that first: checkCtxDir);
// anything else at that path is left where it is.
func archivePrevious(logsDir, ctxDir string) (string, error) {
	entries, err := os.ReadDir(logsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var move []string
	n := 1
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "attempt-") {
			n++
			continue
		}
		move = append(move, e.Name())
	}
	fi, ctxErr := os.Lstat(ctxDir)
	if ctxErr == nil {
		if m, err := os.Lstat(filepath.Join(ctxDir, CtxMarker)); !fi.IsDir() || err != nil || !m.Mode().IsRegular() {
			ctxErr = os.ErrNotExist // not ours: never moved
		}
	}
	if len(move) == 0 && ctxErr != nil {
		return "", nil
	}
	dst := filepath.Join(logsDir, fmt.Sprintf("attempt-%d", n))
	for {
		if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		n++
		dst = filepath.Join(logsDir, fmt.Sprintf("attempt-%d", n))
	}
	if err := os.MkdirAll(dst, statedir.DirPerm); err != nil {
		return "", err
	}
	for _, name := range move {
		if err := os.Rename(filepath.Join(logsDir, name), filepath.Join(dst, name)); err != nil {
			return "", err
		}
	}
	if ctxErr == nil {
		if err := os.Rename(ctxDir, filepath.Join(dst, "ctx")); err != nil {
			return "", err
		}
		// Made for the user's project (fs.DirPerm, fs.FilePerm), the ctx
		// files are now in the state dir: the owner's alone there
		// (docs/security.md § Files under .stratus).
		if err := statedir.Tighten(filepath.Join(dst, "ctx")); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// reclaimLogs makes the task's logs dir, and its ctx dir, run runID's again
// before the run is resumed (a resumed older run wrote into the latest
// run's summary, ctx files and runner logs). When a later
// run of the task holds them, that run's are archived into attempt-N/ as a
// rerun would, and this run's are moved back from the attempt-K/ they were
// archived to; when none are kept, the later run's are archived all the
// same and this run starts a fresh set. It returns a sentence saying what
// moved ("" when nothing did). The ctx dir is refused, touching nothing,
// when it is not one a run made (checkCtxDir).
func reclaimLogs(ctx context.Context, sk sink.Sink, logsDir, ctxDir, placement, taskID, runID string) (string, error) {
	key, err := report.RunDir(ctx, sk, taskID, runID)
	switch {
	case err == nil && key == report.Dir(taskID):
		return "", nil // still the latest run's
	case err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND:
		return "", err
	}
	if err := checkCtxDir(ctxDir, placement, taskID); err != nil {
		return "", err
	}
	arch, err := archivePrevious(logsDir, ctxDir)
	if err != nil {
		return "", fmt.Errorf("archive the later run of task %s: %w", taskID, err)
	}
	var said []string
	if arch != "" {
		said = append(said, "the later run's ctx dir and logs of task "+taskID+" moved to "+arch)
	}
	if key != "" {
		own := filepath.Join(logsDir, filepath.Base(key))
		entries, err := os.ReadDir(own)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			to := filepath.Join(logsDir, e.Name())
			if e.Name() == "ctx" {
				to = ctxDir
				perm := os.FileMode(0o755)
				if projection.InState(placement) {
					perm = statedir.DirPerm
				}
				if err := os.MkdirAll(filepath.Dir(to), perm); err != nil {
					return "", err
				}
			}
			if err := os.Rename(filepath.Join(own, e.Name()), to); err != nil {
				return "", fmt.Errorf("move run %s's logs back from %s: %w", runID, own, err)
			}
			if to == ctxDir && !projection.InState(placement) {
				// Back in the user's project: the modes the ctx files were
				// made with there (archivePrevious tightened them).
				if err := projectModes(ctxDir); err != nil {
					return "", err
				}
			}
		}
		if err := os.Remove(own); err != nil {
			return "", err
		}
		said = append(said, "run "+runID+"'s moved back from "+own)
	}
	return strings.Join(said, "; "), markCtxDir(ctxDir, placement, taskID)
}

// projectModes gives a ctx dir moved back out of the state dir the modes
// the sink makes the work dir's files with (fs.DirPerm, fs.FilePerm),
// following no link.
func projectModes(ctxDir string) error {
	r, err := os.OpenRoot(ctxDir)
	if err != nil {
		return err
	}
	defer r.Close()
	return iofs.WalkDir(r.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return r.Chmod(p, fs.DirPerm)
		case d.Type().IsRegular():
			return r.Chmod(p, fs.FilePerm)
		}
		return nil
	})
}
