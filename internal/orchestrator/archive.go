package orchestrator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// archivePrevious moves what an earlier run of the same task left behind,
// its ctx dir and its logs, into <logs>/attempt-N/ (N = 1, 2, ...), so a
// rerun starts from a clean ctx dir and the earlier run stays readable
// (seed 004 § prompt_audit: "archived into attempt-<N>/ on rerun like the
// rest of the task's logs"). It returns the archive dir, or "" when there
// was nothing to archive.
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
	_, ctxErr := os.Stat(ctxDir)
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
	if err := os.MkdirAll(dst, 0o755); err != nil {
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
	}
	return dst, nil
}
