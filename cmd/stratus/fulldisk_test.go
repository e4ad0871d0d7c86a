package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// docs/security.md § Output that did not persist: a run whose work dir fills
// up ends at once with its result line, a summary and a true status —
// interrupted (resume it once space is freed), never left running — and the
// artifacts accepted before stay. The work dir is a 4 MiB tmpfs (mounting one
// needs root and CAP_SYS_ADMIN: without them the test is skipped).
func TestRun_FullDiskEndsTheRunWithItsResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mountTmpfs(t, dir, "4m")
	// Ten 600 kB artifacts through the worker API: the sixth fills the disk.
	art := t.TempDir()
	writeTestFile(t, filepath.Join(art, "bin"), stratusBin)
	_, task := tinyRun(t, dir, `read line
head -c 600000 /dev/zero | tr '\0' x > "$TMPDIR_ART/art.txt"
i=0
while [ $i -lt 10 ]; do
  if "$(cat "$TMPDIR_ART/bin")" worker artifact --name "a$i.txt" "$TMPDIR_ART/art.txt" 2>>"$TMPDIR_ART/errors"; then echo ok >> "$TMPDIR_ART/codes"; else echo refused >> "$TMPDIR_ART/codes"; fi
  i=$((i+1))
done
printf '{"subrun_report": "ok"}\n'
`, "{TMPDIR_ART: "+art+"}", "t-full")

	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitInterrupted || !strings.Contains(r.stdout, ": interrupted") || !strings.Contains(r.stdout, "why:      the disk is full") ||
		!strings.Contains(r.stdout, "summary:") {
		t.Fatalf("exit %d; want 130 with the result line saying the disk is full\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The 507 itself is internal/httpapi's test: here the run stops the
	// engine as soon as the disk refuses a write.
	if codes := readFile(t, filepath.Join(art, "codes")); !strings.HasPrefix(codes, "ok\n") || strings.Count(codes, "ok") >= 10 {
		t.Errorf("artifacts %q; want some accepted before the disk filled, not all ten", codes)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace/tasks/t-full/ctx/a0.txt")); err != nil {
		t.Errorf("an artifact accepted before the disk filled is gone: %v", err)
	}
	if s := runCLI(t, "status", strings.Fields(r.stdout)[1][:len(strings.Fields(r.stdout)[1])-1], "--dir", dir); !strings.Contains(s.stdout, "interrupted") {
		t.Errorf("status after the full disk:\n%s%s", s.stdout, s.stderr)
	}
}

// mountTmpfs mounts a tmpfs of size (as mount's -o size=) on dir, which
// exists, until the test ends; mounting one needs root and CAP_SYS_ADMIN:
// without them the test is skipped.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// docs/security.md § Output that did not persist: wherever the disk fills
// during a run — as the run starts, as a step is dispatched, as a step's
// output is kept, as the summary is written — `stratus run` ends it the
// same way: interrupted (exit 130) with its result (why: the disk is full,
// and the command that resumes it; its ctx dir; its summary, or where it
// would have been), and `runs` shows it interrupted, on the full disk and
// once space is freed. A disk too full to record the run at all fails
// `run` with the disk's error and keeps no run; one with room for all of
// it ends the run done (read interrupted only if the store refused to
// record that end, as its result says). The work dir is a tmpfs filled
// before the run but for a level; the levels step 8 KiB at a time through
// all that a run writes. (Before: at most levels, `run` failed with the
// bare write error, exit 1, the run left recorded running.)
func TestRun_AFullDiskAtEveryFillLevelEndsTheRunInterrupted(t *testing.T) {
	t.Parallel()
	mountTmpfs(t, t.TempDir(), "1m") // skips the test where no tmpfs mounts
	const step, top = 8 << 10, 800 << 10
	var mu sync.Mutex
	ends := map[string]int{}
	t.Cleanup(func() {
		if ends["done"] == 0 || ends["interrupted"] == 0 || ends["refused"] == 0 {
			t.Errorf("the levels ended %v; want some refused, some interrupted and some done: they no longer span a run", ends)
		}
	})
	diskError := func(s string) bool {
		// SQLITE_IOERR_SHMSIZE: a new store's -shm file did not fit.
		return strings.Contains(s, "no space left on device") || strings.Contains(s, "database or disk is full") || strings.Contains(s, "disk I/O error (4874)")
	}
	for leave := int64(0); leave <= top; leave += step {
		t.Run(fmt.Sprintf("%dKiB", leave>>10), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			mountTmpfs(t, dir, "8m")
			_, task := tinyRun(t, dir, "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n", "", "t-fill")
			free := fillDisk(t, dir, leave)
			r := runCLI(t, "run", task, "--dir", dir)
			runID, status := firstRunLine(r.stdout)
			end, reads := status, status
			if strings.Contains(r.stdout, "\n  record:   the run's end could not be recorded") {
				reads = "interrupted"
			}
			switch {
			case r.code == ExitOK && status == "done":
			case r.code == ExitInterrupted && status == "interrupted":
				for _, want := range []string{"\n  why:      the disk is full (", "; free space, then `stratus resume " + runID + " --dir " + dir + "` goes on\n",
					"\n  ctx dir:  " + filepath.Join(dir, "workspace/tasks/t-fill/ctx") + "\n", "\n  summary:  "} {
					if !strings.Contains(r.stdout, want) {
						t.Errorf("the result of the interrupted run does not say %q:\n%s", want, r.stdout)
					}
				}
				t.Logf("%s", lineWith(r.stdout, "why:"))
			case r.code == ExitFailed && runID == "" && diskError(r.stderr):
				end = "refused"
			default:
				t.Fatalf("run on a disk with %d KiB left: exit %d, %q; want done (0), interrupted (130), or refused before the run was recorded\n%s%s", leave>>10, r.code, status, r.stdout, r.stderr)
			}
			mu.Lock()
			ends[end]++
			mu.Unlock()
			for _, full := range []bool{true, false} {
				l := runCLI(t, "runs", "--dir", dir)
				switch {
				case end == "refused":
					// On the full disk, a store the refused run began may
					// not open either.
					if none := strings.Contains(l.stdout, "no runs yet") || strings.Contains(l.stderr, "no run was made"); !none && !(full && diskError(l.stderr)) {
						t.Errorf("runs after a refused run (disk full: %v): exit %d\n%s%s; want no run", full, l.code, l.stdout, l.stderr)
					}
				case l.code != ExitOK || !strings.Contains(lineWith(l.stdout, runID), " "+reads+" "):
					t.Errorf("runs (disk full: %v): exit %d, the run's line %q; want it %s\n%s", full, l.code, lineWith(l.stdout, runID), reads, l.stderr)
				case !full && strings.Contains(l.stdout, "note:"):
					t.Errorf("runs once space is freed still says the run could not be recorded:\n%s", l.stdout)
				}
				if full {
					free()
				}
			}
		})
	}
}

// docs/security.md § Output that did not persist: a summary the disk
// refuses at the publish step stops the run interrupted (exit 130), not
// failed: its why names the publish step, the summary's file, the disk
// full and the command that resumes it; publish#1 reads canceled, never
// done. Once space is freed, resume publishes again and the run is done,
// its summary written. The task's logs dir (where the summary goes) is a
// 1 MiB tmpfs that answer's engine fills.
func TestRun_ASummaryTheDiskRefusesStopsTheRunAndResumePublishesAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := filepath.Join(dir, ".stratus/logs/t-pub")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	_, task := tinyRun(t, dir, `read line
case "$line" in *Answer*) head -c 4000000 /dev/zero > "$LOGS/filler" 2>/dev/null ;; esac
printf '{"subrun_report": "ok"}\n'
`, "{LOGS: "+logs+"}", "t-pub")
	mountTmpfs(t, logs, "1m")

	r := runCLI(t, "run", task, "--dir", dir, "--json")
	res := decodeRun(t, r.stdout)
	if r.code != ExitInterrupted || res.Status != "interrupted" {
		t.Fatalf("run: exit %d, status %s; want interrupted (exit %d)\n%s", r.code, res.Status, ExitInterrupted, r.stderr)
	}
	for _, want := range []string{"the disk is full (publish#1: write the summary: ", filepath.Join(logs, "summary.json"), "no space left on device", "`stratus resume " + res.RunID} {
		if !strings.Contains(res.Cause, want) {
			t.Errorf("the run's why %q does not say %q", res.Cause, want)
		}
	}
	if !strings.Contains(res.SummaryError, "it would have been "+filepath.Join(logs, "summary.json")) {
		t.Errorf("the result's summary_error %q; want it saying where the summary would have been", res.SummaryError)
	}
	if s := statusOf(t, dir, res.RunID); s.Status != "interrupted" || stepRefs(s) != "first#1:completed answer#1:completed publish#1:canceled" {
		t.Errorf("status: %s %s; want interrupted, publish#1 canceled", s.Status, stepRefs(s))
	}

	if err := os.Remove(filepath.Join(logs, "filler")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "resume", res.RunID, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "publish#2:done" {
		t.Errorf("resumed steps: %s; want publish again, alone", got)
	}
	if res := decodeRun(t, r.stdout); res.Status != "done" || res.SummaryError != "" || len(res.Summary) != 2 {
		t.Errorf("resume result %+v; want done, its summary written", res)
	}
	if _, err := os.Stat(filepath.Join(logs, "summary.md")); err != nil {
		t.Errorf("the summary after the resume: %v", err)
	}
}

// fillDisk takes all the free space of the file system holding dir but
// leave bytes, in file dir/filler, and returns what frees it again.
func fillDisk(t *testing.T, dir string, leave int64) (free func()) {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := int64(fs.Bavail)*fs.Bsize - leave; n > 0 {
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fill %s but %d bytes: %v", dir, leave, err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// docs/security.md § Output that did not persist: a run whose summary the
// disk refuses once its execution has ended is recorded ended all the same
// — `run` prints its result, its summary line saying the summary could not
// be written and where it would have been, and `runs` shows it failed.
// (Before: `run` failed with the bare write error and the run stayed
// recorded running, read interrupted.) The task's logs dir is a 1 MiB
// tmpfs that the failing engine fills.
func TestRun_ASummaryTheDiskRefusesAtTheEndStillRecordsTheRunsEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := filepath.Join(dir, ".stratus/logs/t-end")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	_, task := tinyRun(t, dir, `read line
head -c 4000000 /dev/zero > "$LOGS/filler" 2>/dev/null
echo "the engine broke" >&2
exit 3
`, "{LOGS: "+logs+"}", "t-end")
	mountTmpfs(t, logs, "1m")

	r := runCLI(t, "run", task, "--dir", dir)
	runID, status := firstRunLine(r.stdout)
	if r.code != ExitFailed || status != "failed" {
		t.Fatalf("run: exit %d, %q; want the run's result, failed\n%s%s", r.code, status, r.stdout, r.stderr)
	}
	want := "  summary:  the summary could not be written (fs sink: write " + filepath.Join(logs, "summary.json") + ": no space left on device); it would have been " +
		filepath.Join(logs, "summary.json") + " and " + filepath.Join(logs, "summary.md")
	if !strings.Contains(r.stdout, want+"\n") || strings.Contains(r.stdout, "record:") {
		t.Errorf("the result does not say %q alone:\n%s", want, r.stdout)
	}
	l := runCLI(t, "runs", "--dir", dir)
	if line := lineWith(l.stdout, runID); !strings.Contains(line, " failed ") || strings.Contains(l.stdout, "note:") {
		t.Errorf("runs: the run's line %q; want it recorded failed\n%s%s", line, l.stdout, l.stderr)
	}
}

// docs/security.md § Output that did not persist: reading a run needs no
// write. A run whose owner was killed reads interrupted — in `status`, its
// open step canceled, and in `runs`, text and --json — even on a disk too
// full to record that: each exits 0 and says, in a note, that it could not
// be recorded. Once space is freed, the next `status` records it and the
// note is gone. (Before: both failed, "database or disk is full".)
func TestStatus_AFullDiskStillShowsAKilledRunInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mountTmpfs(t, dir, "8m")
	_, task := tinyRun(t, dir, secondHangsEngine, "", "t-read")
	writeTestFile(t, filepath.Join(dir, "slow"), "")
	runID := killOwner(t, dir, startRun(t, dir, task))
	free := fillDisk(t, dir, 0)

	s := statusOf(t, dir, runID)
	if s.Status != "interrupted" || stepRefs(s) != "first#1:completed answer#1:canceled" {
		t.Errorf("status --json on the full disk: %s %s; want interrupted with answer#1 canceled", s.Status, stepRefs(s))
	}
	if !strings.Contains(s.Note, "could not be recorded") || !strings.Contains(s.Note, "database or disk is full") {
		t.Errorf("status --json: note %q; want it saying the interruption could not be recorded, and why", s.Note)
	}
	txt := runCLI(t, "status", runID, "--dir", dir)
	if txt.code != ExitOK || !strings.Contains(txt.stdout, "run "+runID+": interrupted\n  note:     ") {
		t.Errorf("status on the full disk: exit %d\n%s%s", txt.code, txt.stdout, txt.stderr)
	}
	l := runCLI(t, "runs", "--dir", dir)
	if l.code != ExitOK || !strings.Contains(lineWith(l.stdout, runID), " interrupted ") || !strings.Contains(l.stdout, "note: run "+runID+": ") {
		t.Errorf("runs on the full disk: exit %d\n%s%s", l.code, l.stdout, l.stderr)
	}
	l = runCLI(t, "runs", "--dir", dir, "--json")
	var lines []struct{ RunID, Status, Note string }
	if err := json.Unmarshal([]byte(l.stdout), &lines); err != nil || l.code != ExitOK || len(lines) != 1 ||
		lines[0].Status != "interrupted" || !strings.Contains(lines[0].Note, "could not be recorded") {
		t.Errorf("runs --json on the full disk: exit %d, %+v (%v)\n%s", l.code, lines, err, l.stderr)
	}

	free()
	if s := statusOf(t, dir, runID); s.Status != "interrupted" || s.Note != "" {
		t.Errorf("status once space is freed: %s, note %q; want interrupted, recorded", s.Status, s.Note)
	}
	if l := runCLI(t, "runs", "--dir", dir); strings.Contains(l.stdout, "note:") {
		t.Errorf("runs once the run is recorded still has a note:\n%s", l.stdout)
	}
}

// docs/security.md § Output that did not persist: a store last closed
// cleanly opens to be read on a disk that has filled up since — `runs` and
// `status` of a done run work with no byte free. (Before: both failed,
// "open sqlite store: disk I/O error": SQLite had deleted the store's -shm
// file at its close, and could not allocate it again.)
func TestRuns_AFullDiskStillReadsTheStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mountTmpfs(t, dir, "8m")
	_, task := tinyRun(t, dir, "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n", "", "t-closed")
	r := runCLI(t, "run", task, "--dir", dir)
	runID, status := firstRunLine(r.stdout)
	if r.code != ExitOK || status != "done" {
		t.Fatalf("run: exit %d, %q\n%s%s", r.code, status, r.stdout, r.stderr)
	}
	fillDisk(t, dir, 0)
	if l := runCLI(t, "runs", "--dir", dir); l.code != ExitOK || !strings.Contains(lineWith(l.stdout, runID), " done ") {
		t.Errorf("runs on the full disk: exit %d\n%s%s", l.code, l.stdout, l.stderr)
	}
	if s := statusOf(t, dir, runID); s.Status != "done" || s.Note != "" {
		t.Errorf("status on the full disk: %s, note %q; want done", s.Status, s.Note)
	}
}

// firstRunLine is the run id of "run <id>: <status>", the result line of
// `stratus run`, and that status ("", "" when stdout has none).
func firstRunLine(stdout string) (runID, status string) {
	for _, l := range strings.Split(stdout, "\n") {
		if id, st, ok := strings.Cut(strings.TrimPrefix(l, "run "), ": "); ok && strings.HasPrefix(l, "run r-") {
			return id, st
		}
	}
	return "", ""
}
