package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// namedRuns is a work dir with three ended runs of two tasks, the newest
// last.
func namedRuns(t *testing.T) (dir string, ids []string) {
	t.Helper()
	dir = t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, orchestrator.StateDir, orchestrator.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	ids = []string{"r-20261204T160000-aaa111", "r-20261204T160001-abc222", "r-20261204T160002-abd333"}
	for i, task := range []string{"fix-login", "add-retry", "fix-login"} {
		r := stratus.Run{ID: ids[i], TaskID: task, TaskTitle: "A task", Flow: "implementation", Status: stratus.RunDone, WorkDir: dir,
			CreatedAt: t0.Add(time.Duration(i) * time.Second), EndedAt: t0.Add(time.Duration(i)*time.Second + time.Minute)}
		if err := st.CreateRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ids
}

// README § Naming a run: every command taking RUN takes a unique prefix
// of a run id, a task id (its newest run) or latest; an ambiguous prefix
// lists the candidates and exits 2, a name of no run exits 2 naming it.
func TestNamingARun_PrefixTaskLatest(t *testing.T) {
	t.Parallel()
	dir, ids := namedRuns(t)
	for _, c := range []struct{ ref, want string }{
		{"r-20261204T160001", ids[1]},
		{"r-20261204T160000-a", ids[0]},
		{"fix-login", ids[2]},
		{"add-retry", ids[1]},
		{"latest", ids[2]},
	} {
		var out, errb bytes.Buffer
		if code := Main([]string{"status", c.ref, "--dir", dir}, IO{Out: &out, Err: &errb}); code != ExitOK || !strings.HasPrefix(out.String(), "run "+c.want+": done") {
			t.Errorf("status %s: exit %d, want run %s:\n%s%s", c.ref, code, c.want, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	code := Main([]string{"status", "r-2026", "--dir", dir}, IO{Out: &out, Err: &errb})
	if code != ExitUsage || !strings.Contains(errb.String(), `"r-2026" is ambiguous`) {
		t.Errorf("status r-2026: exit %d, want 2 saying it is ambiguous:\n%s", code, errb.String())
	}
	for _, id := range ids {
		if !strings.Contains(errb.String(), id) {
			t.Errorf("the ambiguous prefix does not list %s:\n%s", id, errb.String())
		}
	}
	if !strings.Contains(errb.String(), "task fix-login  done  started 2026-12-04T16:00:02Z") {
		t.Errorf("a candidate lacks its task, status or start:\n%s", errb.String())
	}
	for _, args := range [][]string{{"status", "nope"}, {"logs", "nope"}, {"cancel", "nope"}, {"pull", "nope"}, {"resume", "nope"}, {"approve", "nope", "gate"}} {
		errb.Reset()
		args = append(args, "--dir", dir)
		if code := Main(args, IO{Out: &out, Err: &errb}); code != ExitUsage || !strings.Contains(errb.String(), `run "nope" not found`) {
			t.Errorf("%v: exit %d, want 2 naming the run looked for:\n%s", args, code, errb.String())
		}
	}
}
