package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus/internal/benchfig"
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

// STRATUS_TRACE and STRATUS_CPUPROFILE are the stratus process's own: it
// unsets them, so that what it starts (its reaper, when stratus-runner is
// not beside it; runner processes) cannot write over its files at their
// exit; one file named by both gets the profile, not the trace.
func TestProfilePaths_TheProcesssOwn(t *testing.T) {
	t.Setenv(EnvCPUProfile, "/x/cpu.prof")
	t.Setenv(EnvTrace, "/x/run.trace")
	if cpu, trace := profilePaths(); cpu != "/x/cpu.prof" || trace != "/x/run.trace" {
		t.Errorf("profilePaths() = %q, %q", cpu, trace)
	}
	if os.Getenv(EnvCPUProfile) != "" || os.Getenv(EnvTrace) != "" {
		t.Errorf("the variables are still set for the processes it starts")
	}
	t.Setenv(EnvCPUProfile, "/x/same")
	t.Setenv(EnvTrace, "/x/same")
	if cpu, trace := profilePaths(); cpu != "/x/same" || trace != "" {
		t.Errorf("one file for both: profilePaths() = %q, %q; want the profile only", cpu, trace)
	}
}

// A run's trace holds its steps' regions and reads whole, and its
// profile parses (README.md § Performance), the binary alone as `go
// install` leaves it (its reaper is itself).
func TestTraceAndProfile_OfARun(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", fourLineEngine, "", "traced")
	out := t.TempDir()
	// Alone, without stratus-runner beside it, as `go install` leaves it:
	// its reaper is itself (`stratus runner reap`).
	bin := filepath.Join(t.TempDir(), "stratus")
	if err := os.Link(stratusBin, bin); err != nil {
		data, err := os.ReadFile(stratusBin)
		if err == nil {
			err = os.WriteFile(bin, data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	trace, prof := filepath.Join(out, "run.trace"), filepath.Join(out, "cpu.prof")
	cmd := exec.Command(bin, "run", task, "--dir", dir)
	cmd.Env = append(os.Environ(), EnvTrace+"="+trace, EnvCPUProfile+"="+prof)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, b)
	}
	r, err := benchfig.ReadRegions(trace)
	if err != nil || r.Count["engine"] == 0 || r.Count["dispatch agent"] == 0 {
		t.Errorf("the run's trace: %v, regions %v; want whole, with its engines and dispatches", err, r.Count)
	}
	if b, err := exec.Command("go", "tool", "pprof", "-top", stratusBin, prof).CombinedOutput(); err != nil {
		t.Errorf("the run's profile does not parse: %v\n%s", err, b)
	}
}
