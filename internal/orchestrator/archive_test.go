package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A placement that resolves onto a directory Stratus did not create (here
// "{task_id}" with task id "src": the user's own src/) refuses the run with
// EINVALID naming the dir and the placement, and moves nothing: not the
// directory, not the task's earlier logs (it used to be "archived" into
// .stratus/logs/src/attempt-1/ctx/).
func TestPrepareCtxDir_UnmarkedDirIsRefusedAndUntouched(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(t *testing.T, ctx string){
		"user dir":   func(t *testing.T, ctx string) { write(t, filepath.Join(ctx, "main.go"), "package main\n") },
		"empty dir":  func(t *testing.T, ctx string) { os.MkdirAll(ctx, 0o755) },
		"a file":     func(t *testing.T, ctx string) { write(t, ctx, "not a dir\n") },
		"marker dir": func(t *testing.T, ctx string) { os.MkdirAll(filepath.Join(ctx, CtxMarker), 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ctx := filepath.Join(dir, "src")
			logs := filepath.Join(dir, ".stratus/logs/src")
			setup(t, ctx)
			write(t, filepath.Join(logs, "summary.md"), "earlier run\n")
			before := tree(t, dir)

			arch, err := prepareCtxDir(logs, ctx, "{task_id}", "src")
			if stratus.ErrorCode(err) != stratus.EINVALID || arch != "" {
				t.Fatalf("err = %v, arch = %q; want EINVALID and nothing archived", err, arch)
			}
			for _, want := range []string{ctx, `"{task_id}"`, "projection.placement", CtxMarker} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not name %s: %v", want, err)
				}
			}
			if after := tree(t, dir); after != before {
				t.Errorf("the work dir changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// A rerun moves the previous run's ctx dir (it carries the marker) and
// logs into <logs>/attempt-N/ and starts from a fresh, marked ctx dir; the
// next rerun archives into attempt-2.
func TestPrepareCtxDir_RerunArchivesTheMarkedCtxDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := filepath.Join(dir, "workspace/tasks/t1/ctx")
	logs := filepath.Join(dir, ".stratus/logs/t1")

	arch, err := prepareCtxDir(logs, ctx, "workspace/tasks/{task_id}/ctx", "t1")
	if err != nil || arch != "" {
		t.Fatalf("first run: arch %q, err %v", arch, err)
	}
	if _, err := os.Stat(filepath.Join(ctx, CtxMarker)); err != nil {
		t.Fatalf("the first run's ctx dir has no marker: %v", err)
	}
	write(t, filepath.Join(ctx, "plan.md"), "run 1\n")
	write(t, filepath.Join(logs, "summary.md"), "run 1\n")

	for n, want := range []string{"attempt-1", "attempt-2"} {
		arch, err = prepareCtxDir(logs, ctx, "workspace/tasks/{task_id}/ctx", "t1")
		if err != nil || arch != filepath.Join(logs, want) {
			t.Fatalf("rerun %d: arch %q, err %v; want %s", n+1, arch, err, want)
		}
		if got := readOrEmpty(filepath.Join(arch, "ctx/plan.md")); n == 0 && got != "run 1\n" {
			t.Errorf("archived plan.md = %q", got)
		}
		if got := readOrEmpty(filepath.Join(arch, "summary.md")); n == 0 && got != "run 1\n" {
			t.Errorf("archived summary.md = %q", got)
		}
		entries, _ := os.ReadDir(ctx)
		if len(entries) != 1 || entries[0].Name() != CtxMarker {
			t.Errorf("rerun %d: the new ctx dir holds %v, want only the marker", n+1, entries)
		}
	}
}

func readOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// tree lists every path under root with its size, for before/after checks.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b.WriteString(rel)
		if !fi.IsDir() {
			b.WriteString("=" + readOrEmpty(p))
		}
		b.WriteString(";")
		return nil
	})
	return b.String()
}
