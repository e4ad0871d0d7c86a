package main

import (
	"os"
	"path/filepath"
	"testing"
)

// STRATUS_CPUPROFILE=FILE writes the process's CPU profile (README.md §
// Performance); a file that cannot be made leaves the command running
// without one.
func TestCPUProfile_WrittenOrSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop := cpuProfile(path)
	for i := 0; i < 1e6; i++ {
		_ = i * i
	}
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile %s: %v", path, err)
	}
	cpuProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))() // warns, runs on
	cpuProfile("")()
}
