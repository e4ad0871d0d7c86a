package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// issue 14 § 2: a run whose work dir fills up ends at once with its result
// line, a summary and a true status — interrupted (resume it once space is
// freed), never left running — and the artifacts accepted before stay.
// The work dir is a 4 MiB tmpfs (mounting one needs root and
// CAP_SYS_ADMIN: without them the test is skipped).
func TestRun_FullDiskEndsTheRunWithItsResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
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
