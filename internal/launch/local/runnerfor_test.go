package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The small runner beside stratus when it is an executable file; `stratus
// runner` otherwise.
func TestRunnerFor(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "stratus")
	if bin, args := RunnerFor(exe); bin != exe || !slices.Equal(args, []string{"runner"}) {
		t.Errorf("no small runner: %s %v", bin, args)
	}
	small := filepath.Join(dir, RunnerBinary)
	os.WriteFile(small, []byte("#!/bin/sh\n"), 0o644)
	if bin, _ := RunnerFor(exe); bin != exe {
		t.Errorf("a small runner that is not executable was taken: %s", bin)
	}
	os.Chmod(small, 0o755)
	if bin, args := RunnerFor(exe); bin != small || args != nil {
		t.Errorf("the small runner beside stratus: %s %v", bin, args)
	}
}
