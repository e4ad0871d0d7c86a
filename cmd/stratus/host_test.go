package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// okEngine answers every step "ok".
const okEngine = "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n"

// treeOf returns every file under root with its bytes.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A new run given an existing run's id (run --run-id, as the host is
// given one by run --detach) is refused before it writes anything under
// that id or archives the task's ctx dir: the earlier run's bundle,
// definition and logs stay as they were, and status still reads it.
func TestRun_AnExistingRunsIDIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", okEngine, "", "t-taken")
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := decodeRun(t, r.stdout).RunID
	before := treeOf(t, filepath.Join(dir, ".stratus"))
	again := runCLI(t, "run", task, "--dir", dir, "--run-id", id)
	if again.code == ExitOK || !strings.Contains(again.stderr, "run "+id+" already exists") {
		t.Errorf("run --run-id of an existing run: exit %d\n%s", again.code, again.stderr)
	}
	after := treeOf(t, filepath.Join(dir, ".stratus"))
	for p, body := range before {
		if filepath.Base(p) == "stratus.db" || strings.HasPrefix(filepath.Base(p), "stratus.db-") {
			continue // the store is opened
		}
		if after[p] != body {
			t.Errorf("%s changed by the refused run", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && !strings.HasPrefix(filepath.Base(p), "stratus.db") && !strings.HasSuffix(p, ".lock") {
			t.Errorf("the refused run wrote %s", p)
		}
	}
	if s := statusOf(t, dir, id); s.Status != "done" {
		t.Errorf("status of the earlier run: %s", s.Status)
	}
}
