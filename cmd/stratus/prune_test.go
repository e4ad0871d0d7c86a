package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/security.md § Retention, end to end: two runs of the example (the
// second archives the first's ctx dir and logs), then `stratus prune` as
// if 31 days had passed: --dry-run lists both runs and removes nothing;
// the prune removes their run dirs and the archive and keeps the task's
// latest ctx dir and summary. The runs stay listed: `runs` marks them
// pruned, `status` says when (not an obscure failure), `resume` and `logs`
// refuse saying they were pruned, and the task runs again.
func TestPrune_RunsOlderThanRetentionGoAndSaySo(t *testing.T) {
	t.Parallel()
	dir := installExample(t, testenv.ModuleRoot(t))
	task := filepath.Join(dir, "task.md")
	var ids []string
	for range 2 {
		r := runCLI(t, "run", task, "--dir", dir, "--json")
		if r.code != ExitOK {
			t.Fatalf("run exit %d\n%s", r.code, r.stderr)
		}
		ids = append(ids, decodeRun(t, r.stdout).RunID)
	}
	state := filepath.Join(dir, ".stratus")
	archive := filepath.Join(state, "logs/demo-greeting/attempt-1")
	for _, p := range []string{filepath.Join(state, "runs", ids[0], "bundle"), filepath.Join(state, "runs", ids[1], "bundle"), archive} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("before the prune: %v", err)
		}
	}
	later := time.Now().Add(31 * 24 * time.Hour)

	var out bytes.Buffer
	if err := runPrune(context.Background(), &PruneOptions{IO: IO{Out: &out, Err: &out}, Dir: dir, Now: later, DryRun: true, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var rep PruneReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.DryRun || rep.RetentionDays != 30 || len(rep.Runs) != 2 {
		t.Fatalf("dry run report %s (%v); want both runs, retention_days 30", out.String(), err)
	}
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("the dry run removed %s", archive)
	}

	out.Reset()
	if err := runPrune(context.Background(), &PruneOptions{IO: IO{Out: &out, Err: &out}, Dir: dir, Now: later}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pruned 2 runs and 0 archives") || !strings.Contains(out.String(), "pruned run "+ids[0]) {
		t.Errorf("prune said:\n%s", out.String())
	}
	for _, p := range []string{filepath.Join(state, "runs", ids[0]), filepath.Join(state, "runs", ids[1]), archive} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	for _, p := range []string{filepath.Join(dir, "workspace/tasks/demo-greeting/ctx/planning.md"), filepath.Join(state, "logs/demo-greeting/summary.md")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the task's latest result %s was removed (%v)", p, err)
		}
	}

	if r := runCLI(t, "runs", "--dir", dir); r.code != 0 || strings.Count(r.stdout, "done (pruned)") != 2 {
		t.Errorf("runs: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "status", ids[0], "--dir", dir); r.code != 0 || !strings.Contains(r.stdout, "run "+ids[0]+": done") || !strings.Contains(r.stdout, "pruned:") {
		t.Errorf("status of a pruned run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := runCLI(t, "status", ids[0], "--dir", dir, "--json")
	var st StatusResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.PrunedAt.IsZero() || len(st.Steps) != 0 {
		t.Errorf("status --json of a pruned run: %d\n%s", r.code, r.stdout)
	}
	for _, args := range [][]string{{"resume", ids[0]}, {"logs", ids[0]}} {
		r := runCLI(t, append(args, "--dir", dir)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "was pruned") {
			t.Errorf("%s of a pruned run: exit %d\n%s", args[0], r.code, r.stderr)
		}
	}
	if r := runCLI(t, "run", task, "--dir", dir); r.code != ExitOK {
		t.Errorf("the task again after the prune: exit %d\n%s", r.code, r.stderr)
	}
}
