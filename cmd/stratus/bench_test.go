package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// installTen installs Stratus into a temp dir with the 10-step flow and the
// echo engine as primary, and returns the dir and a task file.
func installTen(tb testing.TB, dir string) string {
	tb.Helper()
	if out, err := exec.Command(stratusBin, "install", "--dir", dir, "--primary", "echo").CombinedOutput(); err != nil {
		tb.Fatalf("install: %v %s", err, out)
	}
	for _, f := range []string{"ten.yaml", "ten/step.md"} {
		b, err := os.ReadFile(filepath.Join("testdata/ten", f))
		if err != nil {
			tb.Fatal(err)
		}
		dst := filepath.Join(dir, ".stratus/flows", f)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		os.WriteFile(dst, b, 0o644)
	}
	task := filepath.Join(dir, "task.md")
	os.WriteFile(task, []byte("---\nid: bench\ntitle: Bench\ntask_type: ten\n---\nbody\n"), 0o644)
	return task
}

// BenchmarkOrchestrationOverhead measures the embedded orchestration
// overhead per step (from one step's report to the next step's engine
// start: submit, fold, projection, task-token completion, the next state,
// dispatch, prompt render, runner start, prompt fetch) against the baseline
// of spawning the engine itself (`stratus engine echo` to completion), in
// the same process. Target: overhead within 2x of the spawn.
func BenchmarkOrchestrationOverhead(b *testing.B) {
	envelope := []byte(`{"workflow_contract":1,"id":"cr-1","kind":"agent","input":{"query":"q"}}` + "\n")
	var spawns []time.Duration
	for range 20 {
		cmd := exec.Command(stratusBin, "engine", "echo")
		cmd.Stdin = bytes.NewReader(envelope)
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		spawns = append(spawns, time.Since(start))
	}
	slices.Sort(spawns)
	spawn := spawns[len(spawns)/2]

	var medians []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		task := installTen(b, dir)
		out, err := exec.Command(stratusBin, "run", task, "--dir", dir, "--json").Output()
		if err != nil {
			b.Fatalf("run: %v", err)
		}
		res := decodeRun(b, string(out))
		if res.Status != "done" || res.OverheadMedianMS == nil {
			b.Fatalf("run: %+v", res)
		}
		medians = append(medians, *res.OverheadMedianMS)
	}
	b.StopTimer()
	slices.Sort(medians)
	overhead := medians[len(medians)/2]
	spawnMS := float64(spawn.Microseconds()) / 1000
	b.ReportMetric(overhead, "overhead-ms/step")
	b.ReportMetric(spawnMS, "spawn-ms")
	b.ReportMetric(overhead/spawnMS, "overhead/spawn")
	b.ReportMetric(0, "ns/op")
}
