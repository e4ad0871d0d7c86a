package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/host"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// BenchmarkScale prints `make bench-scale`'s figure: N embedded runs
// (STRATUS_BENCH_SCALE, e.g. 1000; unset: skipped) of a 2-step flow whose
// engine is the four-line engine, handed at once to one host (`stratus host`,
// as `run --detach` hands them), until every run has ended. It prints the
// peak RSS of all the processes (the host, its reaper, the engines; sampled
// every 100 ms from /proc) against the goal of 1 GiB, with the wall time,
// runs a minute, the host's CPU per step and the four-line engine's spawn
// measured in the same run.
func BenchmarkScale(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("STRATUS_BENCH_SCALE"))
	if n <= 0 {
		b.Skip("STRATUS_BENCH_SCALE is not set (make bench-scale sets it)")
	}
	for b.Loop() {
		scale(b, n)
	}
}

func scale(b *testing.B, n int) {
	dir := b.TempDir()
	if out, err := exec.Command(stratusBin, "install", "--dir", dir).CombinedOutput(); err != nil {
		b.Fatalf("install: %v %s", err, out)
	}
	writeTestFile(b, filepath.Join(dir, "engine.sh"), fourLineEngine)
	usePrimaryShellEngineEnv(b, dir, "four", "")
	writeTwoStepFlow(b, dir)
	tasks := make([]string, n)
	for i := range tasks {
		tasks[i] = filepath.Join(dir, "tasks", fmt.Sprintf("t%04d.md", i))
		writeTestFile(b, tasks[i], fmt.Sprintf("---\nid: t%04d\ntitle: Scale\ntask_type: tiny\n---\nbody\n", i))
	}
	spawn := spawnMS(b, filepath.Join(dir, "engine.sh"), 7)

	hostCmd := exec.Command(stratusBin, "host", "--dir", dir, "--idle", "0")
	hostLog, err := os.Create(filepath.Join(dir, "host.stderr"))
	if err != nil {
		b.Fatal(err)
	}
	defer hostLog.Close()
	hostCmd.Stderr = hostLog
	if err := hostCmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		hostCmd.Process.Signal(os.Interrupt)
		hostCmd.Wait()
	}()
	var c *host.Client
	eventually(b, 30*time.Second, "the host serves", func() bool {
		var err error
		c, err = host.Dial(dir)
		return err == nil
	})

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if rss := treeRSS(hostCmd.Process.Pid); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16) // the callers, not the host, are bounded
	ids := make([]string, n)
	for i, task := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id, err := c.Start(context.Background(), host.StartRequest{Task: task, RunID: lifecycle.NewRunID()})
			if err != nil {
				b.Errorf("start %s: %v", task, err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	// Every run ends; a host that makes no progress for two minutes is
	// stuck: its goroutines (SIGQUIT) are the failure's evidence.
	last, lastChange := -1, time.Now()
	eventually(b, 60*time.Minute, "every run ends", func() bool {
		_, runs, err := c.Runs(context.Background())
		if err == nil && len(runs) != last {
			last, lastChange = len(runs), time.Now()
		}
		if time.Since(lastChange) > 2*time.Minute {
			hostCmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
			log := readFile(b, hostLog.Name())
			b.Fatalf("the host made no progress for 2 minutes with %d runs under way; its goroutines:\n%s", last, log[max(0, len(log)-20000):])
		}
		return err == nil && len(runs) == 0
	})
	wall := time.Since(start)
	close(stop)
	<-sampled
	cpu := cpuMS(hostCmd.Process.Pid)

	st, err := sqlite.Open(filepath.Join(dir, ".stratus/stratus.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	statuses := map[string]int{}
	for _, id := range ids {
		run, err := st.GetRun(context.Background(), id)
		if err != nil {
			b.Fatalf("run %s: %v\nhost log:\n%s", id, err, readFile(b, hostLog.Name()))
		}
		statuses[run.Status]++
	}
	if statuses["done"] != n {
		b.Errorf("runs by status: %v; want all %d done", statuses, n)
	}
	steps := 2 * n
	const goal = 1 << 30
	verdict := "MISSED"
	if peak.Load() <= goal {
		verdict = "met"
	}
	fmt.Printf("BENCH scale project=%dMiB goal<=1GiB %s runs=%d wall=%.1fs runs/min=%.0f host_cpu=%.2fms/step spawn=%.2fms\n",
		peak.Load()>>20, verdict, n, wall.Seconds(), float64(n)/wall.Minutes(), cpu/float64(steps), spawn)
}

// spawnMS is the median of n spawns of the shell engine file engine
// (the four-line engine) answering a request, in ms: the benchmarks'
// anchor.
func spawnMS(b *testing.B, engine string, n int) float64 {
	envelope := []byte(`{"workflow_contract":1,"id":"cr-1","kind":"agent","input":{"query":"q"}}` + "\n")
	var ms []float64
	for range n {
		cmd := exec.Command("sh", engine)
		cmd.Stdin = bytes.NewReader(envelope)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("engine: %v %s", err, out)
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1e3)
	}
	slices.Sort(ms)
	return ms[len(ms)/2]
}

// treeRSS is the resident memory of pid and all its descendants, bytes.
func treeRSS(root int) int64 {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	rss := map[int]int64{}
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		rss[pid] = pages * page
	}
	var sum int64
	for pid, r := range rss {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				sum += r
				break
			}
		}
	}
	return sum
}

// cpuMS is the CPU time (user and system) pid has used, ms.
func cpuMS(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 1000 / 100 // clock ticks of 1/100 s
}
