package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/host"
)

// openEntries lists what under root is open to other users: a directory
// whose mode is not 0700, a file with a group or other bit.
func openEntries(t *testing.T, root string) []string {
	t.Helper()
	var open []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return err
		}
		if perm := fi.Mode().Perm(); (d.IsDir() && perm != 0o700) || perm&0o077 != 0 {
			open = append(open, fi.Mode().String()+" "+strings.TrimPrefix(p, root))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// docs/security.md § Files under .stratus: the state dir holds the HMAC
// key, the store, the runs' logs (prompts, outputs), bundles and
// workspaces; after install, a run, a detached run in the host (its socket
// dir, its log, the store's -wal and -shm while it is up) and a rerun (the
// earlier ctx dir archived into the logs), every directory in it is 0700
// and no file has a group or other bit (the finding: they were 0755 and
// 0644). An install an older stratus left open is tightened by the next
// command that writes it. A worktree run's ctx dir is in the state dir,
// as private as the rest.
func TestStateDir_EveryFileIsTheOwnersAlone(t *testing.T) {
	t.Parallel()
	dir, task := wsProject(t, t.TempDir())
	state := filepath.Join(dir, ".stratus")
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := detach(t, dir, task)
	eventually(t, 90*time.Second, "the detached run ends", func() bool { return statusOf(t, dir, id).Status != "running" })
	if s := statusOf(t, dir, id); s.Status != "done" {
		t.Fatalf("the detached run: %s", s.Status)
	}
	eventually(t, 30*time.Second, "the host lets the run go", func() bool {
		c, err := host.Dial(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, runs, err := c.Runs(context.Background())
		return err == nil && len(runs) == 0
	})
	for _, p := range []string{"host/host.sock", "host.log", "runs/" + id + "/run.log", "logs/t-ws/attempt-1/ctx", "stratus.db-wal", "hmac.key"} {
		if _, err := os.Lstat(filepath.Join(state, p)); err != nil {
			t.Errorf("the test means to check %s: %v", p, err)
		}
	}
	if open := openEntries(t, state); len(open) > 0 {
		t.Errorf("open to other users in %s:\n%s", state, strings.Join(open, "\n"))
	}
	// The run's repository travels: its ctx dir is in the state dir, out
	// of the repository's tree, the owner's alone (README § Workspaces).
	if fi, err := os.Stat(filepath.Join(state, "ctx/t-ws/review.md")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a ctx file of a worktree run: %v; want it in .stratus/ctx/t-ws, 0600", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace")); err == nil {
		t.Errorf("a worktree run made workspace/ in the operator's repository")
	}

	// An older stratus's modes, then the next run.
	filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink == 0 {
			if d.IsDir() {
				os.Chmod(p, 0o755)
			} else {
				os.Chmod(p, 0o644)
			}
		}
		return nil
	})
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run after loosening: exit %d\n%s", r.code, r.stderr)
	}
	if open := openEntries(t, state); len(open) > 0 {
		t.Errorf("open to other users in %s after a run of an older install:\n%s", state, strings.Join(open, "\n"))
	}
}
