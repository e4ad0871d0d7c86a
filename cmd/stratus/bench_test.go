package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/benchfig"
)

// installChain installs Stratus into dir with a straight flow of agent
// steps (testdata/ten/<flow>.yaml, e.g. "twenty") and the echo engine as primary,
// and returns a task file of that flow.
func installChain(tb testing.TB, dir, flow string) string {
	tb.Helper()
	if out, err := exec.Command(stratusBin, "install", "--dir", dir, "--primary", "echo").CombinedOutput(); err != nil {
		tb.Fatalf("install: %v %s", err, out)
	}
	for _, f := range []string{flow + ".yaml", "ten/step.md"} {
		b, err := os.ReadFile(filepath.Join("testdata/ten", f))
		if err != nil {
			tb.Fatal(err)
		}
		dst := filepath.Join(dir, ".stratus/flows", f)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		os.WriteFile(dst, b, 0o644)
	}
	task := filepath.Join(dir, "task.md")
	os.WriteFile(task, []byte("---\nid: bench\ntitle: Bench\ntask_type: "+flow+"\n---\nbody\n"), 0o644)
	return task
}

// BenchmarkFigure_Start prints `make bench`'s start figure:
// `stratus --help` from exec to exit, next to one spawn of the four-line
// engine (fourLineEngine, docs/contracts.md § Conformance checklist)
// answering a request; goal: within 2× of it. Each round is the median of 5
// runs of each, interleaved. Beside it, start-floor is the same figure for
// testdata/sqlitehello, a program that only links the SQLite driver a stratus
// command reading its store needs: where the goal stands against what linking
// that driver costs on this machine.
func BenchmarkFigure_Start(b *testing.B) {
	engine := filepath.Join(b.TempDir(), "engine.sh")
	if err := os.WriteFile(engine, []byte(fourLineEngine), 0o644); err != nil {
		b.Fatal(err)
	}
	envelope := []byte(`{"workflow_contract":1,"id":"cr-1","kind":"agent","input":{"query":"q"}}` + "\n")
	run := func(name string, args []string, stdin []byte) float64 {
		var ms []float64
		for range 5 {
			cmd := exec.Command(name, args...)
			cmd.Stdin = bytes.NewReader(stdin)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v %s", name, err, out)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1e3)
		}
		slices.Sort(ms)
		return ms[len(ms)/2]
	}
	floor := filepath.Join(b.TempDir(), "sqlitehello")
	if out, err := exec.Command("go", "build", "-o", floor, "./testdata/sqlitehello").CombinedOutput(); err != nil {
		b.Fatalf("build the floor: %v %s", err, out)
	}
	printed := false
	for b.Loop() {
		r := benchfig.Measure(benchfig.Figure{Name: "start", Unit: "ms", Goal: 2},
			func() float64 { return run(stratusBin, []string{"--help"}, nil) },
			func() float64 { return run("sh", []string{engine}, envelope) })
		f := benchfig.Measure(benchfig.Figure{Name: "start-floor", Unit: "ms", Goal: 2},
			func() float64 { return run(floor, nil, nil) },
			func() float64 { return run("sh", []string{engine}, envelope) })
		if !printed {
			r.Print(os.Stdout)
			f.Print(os.Stdout)
			printed = true
		}
	}
}

// BenchmarkFigure_Overhead prints `make bench`'s overhead figure
// (README.md § Performance): what Stratus adds per step of an embedded run —
// measured on a 20-step chain whose engine is the four-line engine, its wall
// time over 20 steps minus one spawn of that engine — next to that spawn,
// measured in the same round; goal: within 2× of it.
func BenchmarkFigure_Overhead(b *testing.B) {
	var anchor float64
	round := func() float64 {
		dir := b.TempDir()
		task := installChain(b, dir, "twenty")
		engine := filepath.Join(dir, "engine.sh")
		writeTestFile(b, engine, fourLineEngine)
		usePrimaryShellEngineEnv(b, dir, "four", "")
		anchor = spawnMS(b, engine, 5)
		start := time.Now()
		if out, err := exec.Command(stratusBin, "run", task, "--dir", dir).CombinedOutput(); err != nil {
			b.Fatalf("run: %v\n%s", err, out)
		}
		return float64(time.Since(start).Microseconds())/1e3/20 - anchor
	}
	printed := false
	for b.Loop() {
		r := benchfig.Measure(benchfig.Figure{Name: "overhead", Unit: "ms/step", Goal: 2}, round, func() float64 { return anchor })
		if !printed {
			r.Print(os.Stdout)
			printed = true
		}
	}
}
