package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// BenchmarkFigure_Overhead prints `make bench`'s overhead figures
// (README.md § Performance), from rounds that each run, one after the other,
// Stratus's 20-step chain whose engine is the four-line engine (`stratus
// run`, wall time over 20 steps), the floor program on 20 steps
// (testdata/overheadfloor: per step, the two SQLite transactions, three
// files and one spawn a durable step must make) and 5 spawns of the engine
// (their median); each figure is the medians of 7 rounds:
//
//   - overhead: a step's whole time (Stratus's own time plus the spawn)
//     next to the floor's step; goal: within 1.5× of it.
//   - overhead-spawn: Stratus's own time per step (the chain's step minus
//     the spawn) next to the spawn; goal: within 2× of it.
//   - overhead-floor: the floor's step next to the spawn, with
//     overhead-spawn's goal: where that goal stands against what durability
//     costs on this machine.
//
// Then one more traced run of each (STRATUS_TRACE) gives where a step's
// time goes, as PHASE lines (printPhases).
func BenchmarkFigure_Overhead(b *testing.B) {
	const steps, rounds = 20, 7
	floor := filepath.Join(b.TempDir(), "overheadfloor")
	if out, err := exec.Command("go", "build", "-o", floor, "./testdata/overheadfloor").CombinedOutput(); err != nil {
		b.Fatalf("build the floor: %v %s", err, out)
	}
	traceTo := "" // set for the traced runs: STRATUS_TRACE of the run and the floor
	chain := func() float64 {
		dir := b.TempDir()
		task := installChain(b, dir, "twenty")
		writeTestFile(b, filepath.Join(dir, "engine.sh"), fourLineEngine)
		usePrimaryShellEngineEnv(b, dir, "four", "")
		cmd := exec.Command(stratusBin, "run", task, "--dir", dir)
		cmd.Env = append(os.Environ(), EnvTrace+"="+traceTo)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("run: %v\n%s", err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1e3 / steps
	}
	durable := func() float64 {
		dir := b.TempDir()
		engine := filepath.Join(dir, "engine.sh")
		writeTestFile(b, engine, fourLineEngine)
		cmd := exec.Command(floor, filepath.Join(dir, "floor"), engine, strconv.Itoa(steps))
		cmd.Env = append(os.Environ(), EnvTrace+"="+traceTo)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("floor: %v\n%s", err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1e3 / steps
	}
	engine := filepath.Join(b.TempDir(), "engine.sh")
	writeTestFile(b, engine, fourLineEngine)
	printed := false
	for b.Loop() {
		if printed {
			continue
		}
		var whole, own, floorStep, spawn []float64
		for range rounds {
			c := chain()
			f := durable()
			s := spawnMS(b, engine, 5)
			whole, own, floorStep, spawn = append(whole, c), append(own, c-s), append(floorStep, f), append(spawn, s)
		}
		benchfig.FromSamples(benchfig.Figure{Name: "overhead", Unit: "ms/step", Goal: 1.5}, whole, floorStep).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "overhead-spawn", Unit: "ms/step", Goal: 2}, own, spawn).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "overhead-floor", Unit: "ms/step", Goal: 2}, floorStep, spawn).Print(os.Stdout)
		traced := func(name string, run func() float64) benchfig.Regions {
			traceTo = filepath.Join(b.TempDir(), name+".trace")
			defer func() { traceTo = "" }()
			run()
			r, err := benchfig.ReadRegions(traceTo)
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		// A step of the chain: its Task state's wall, split by the worker
		// API's routes, its dispatch and its engine; the floor's by its parts.
		traced("chain", chain).PrintPhases(os.Stdout, "overhead", steps, "state Task", []benchfig.Phase{
			{Name: "dispatch", Regions: []string{"dispatch agent"}},
			{Name: "bootstrap", Regions: []string{"POST /v1/worker/bootstrap"}},
			{Name: "prompt", Regions: []string{"GET /v1/worker/prompt"}},
			{Name: "stats", Regions: []string{"POST /v1/worker/stats"}},
			{Name: "engine", Regions: []string{"engine"}},
			{Name: "submit", Regions: []string{"POST /v1/worker/submit"}},
		})
		traced("floor", durable).PrintPhases(os.Stdout, "overhead-floor", steps, "step", []benchfig.Phase{
			{Name: "tx", Regions: []string{"tx"}},
			{Name: "files", Regions: []string{"files"}},
			{Name: "engine", Regions: []string{"engine"}},
		})
		printed = true
	}
}
