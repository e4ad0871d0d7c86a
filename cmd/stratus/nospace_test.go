package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docs/security.md § Output that did not persist: a step whose file the
// disk refused (ENOSPC while its submit projects a 1.5 MB body to
// first.md) never reads done — not in `status`, not in `status --json` —
// and the run stops at once, interrupted (exit 130), its why naming the
// step, the file, the disk full and the resume; once space is freed,
// resume runs that step again, its file is written, and the run goes on
// to done. (Before: the step read done, the run failed with a projection
// error `status` never showed, and resume skipped the step, going on
// without its file.)
// The task's workspace is a 1 MiB tmpfs (mounting one needs root and
// CAP_SYS_ADMIN: without them the test is skipped); the store is not on
// it, so it is the projection, not the record of the report, that the
// disk refuses.
func TestRun_OutputThatDidNotPersistIsNotDone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, ws, "1m")
	// Every step reports a 1.5 MB body: first.md does not fit in 1 MiB.
	_, task := tinyRun(t, dir, `read line
printf '{"subrun_report": "'
head -c 1500000 /dev/zero | tr '\0' x
printf '"}\n'
`, "", "t-nospace")
	ctx := filepath.Join(ws, "tasks/t-nospace/ctx")

	r := runCLI(t, "run", task, "--dir", dir, "--json")
	res := decodeRun(t, r.stdout)
	if r.code != ExitInterrupted || res.Status != "interrupted" {
		t.Fatalf("run: exit %d, status %s; want the run interrupted (exit %d)\n%s", r.code, res.Status, ExitInterrupted, r.stderr)
	}
	for _, want := range []string{"first#1", "the disk is full", "ENOSPC", filepath.Join(ctx, "first.md"), "`stratus resume " + res.RunID} {
		if !strings.Contains(res.Cause, want) {
			t.Errorf("the run's error %q / %q does not say %q", res.Error, res.Cause, want)
		}
	}
	s := statusOf(t, dir, res.RunID)
	if s.Status != "interrupted" {
		t.Errorf("status --json: the run is %s; want interrupted", s.Status)
	}
	if got := stepRefs(s); got != "first#1:failed" {
		t.Errorf("status --json steps %s; want first#1 failed (its output did not persist)", got)
	}
	for _, st := range s.Steps {
		if st.StepRef == "first#1" && (st.Verdict != "failed" || !strings.Contains(st.Reason, "the disk is full (ENOSPC)")) {
			t.Errorf("status --json: first#1 verdict %q reason %q; want failed, saying the disk is full", st.Verdict, st.Reason)
		}
	}
	txt := runCLI(t, "status", res.RunID, "--dir", dir)
	if line := lineWith(txt.stdout, "first#1"); !strings.Contains(line, " failed ") || !strings.Contains(line, "the disk is full (ENOSPC)") {
		t.Errorf("status: the line of first#1 is %q; want it failed, saying the disk is full\n%s", line, txt.stdout)
	}
	if _, err := os.Stat(filepath.Join(ctx, "first.md")); err == nil {
		t.Errorf("first.md exists though the disk refused it")
	}

	if out, err := exec.Command("mount", "-o", "remount,size=16m", ws).CombinedOutput(); err != nil {
		t.Fatalf("remount the workspace bigger: %v: %s", err, out)
	}
	r = runCLI(t, "resume", res.RunID, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "first#1 runs again") {
		t.Errorf("resume does not say first#1 runs again:\n%s", r.stderr)
	}
	if got := join(steps(r.stderr)); got != "first#2:done answer#1:done publish#1:done" {
		t.Errorf("resumed steps: %s; want first again, then answer and publish", got)
	}
	if res := decodeRun(t, r.stdout); res.Status != "done" {
		t.Errorf("resume result %+v; want done", res)
	}
	for _, name := range []string{"first.md", "answer.md"} {
		if fi, err := os.Stat(filepath.Join(ctx, name)); err != nil || fi.Size() < 1500000 {
			t.Errorf("%s after the resume: %v", name, err)
		}
	}
	if got := stepRefs(statusOf(t, dir, res.RunID)); got != "first#1:failed first#2:completed answer#1:completed publish#1:completed" {
		t.Errorf("status after the resume: %s", got)
	}
}

// lineWith is the first line of s that contains sub ("" when none does).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
