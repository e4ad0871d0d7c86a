package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/benchfig"
)

// benchLines is a realistic stdout mix of a model-driven engine
// (docs/contracts.md § The event stream, § The report line): mostly steps and
// usage, some extra-field and unknown events, a little non-JSON noise from
// tool subprocesses, and the report last.
func benchLines(steps int) [][]byte {
	var lines [][]byte
	add := func(format string, args ...any) { lines = append(lines, fmt.Appendf(nil, format, args...)) }
	for i := 1; i <= steps; i++ {
		add(`{"event":"agent_step","step":%d,"timestamp":"2026-01-01T00:00:%02dZ","level":"info","source":"loop"}`, i, i%60)
		add(`{"event":"tool_call","name":"read_file","args":{"path":"internal/contract/run.go","offset":%d}}`, i*100)
		if i%2 == 0 {
			add(`{"event":"usage","usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_cache_hit_tokens":%d,"prompt_cache_miss_tokens":%d,"cost_usd":0.00%d}}`,
				1200+i, 300+i, 1500+2*i, 1000, 200+i, i%9+1)
		} else {
			add(`{"event":"usage","usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":%d}}`,
				800+i, 150, 950+i, 800+i)
		}
		if i%5 == 0 {
			add(`warning: tool subprocess wrote to stdout (%d)`, i)
		}
		if i%7 == 0 {
			add(`{"event":"assistant_text","text":"Looking at the deadline handling in run.go: the grace timer starts when stdin closes, step %d."}`, i)
		}
	}
	add(`{"subrun_report":{"schema_version":1,"answer":"The runner closes stdin at the deadline and drains for the grace window.","citations":[{"file":"internal/contract/run.go","line":212}]}}`)
	return lines
}

// BenchmarkEventLines measures the stdout line classifier alone.
//
// Its anchor, in the same run: json.Valid over the same lines, the floor of
// reading them at all (README.md § Performance: goal ≥ 0.5 of its
// throughput).
func BenchmarkEventLines(b *testing.B) {
	lines := benchLines(100)
	var size int64
	for _, l := range lines {
		size += int64(len(l)) + 1
	}
	report := func(b *testing.B) {
		secs := b.Elapsed().Seconds()
		b.ReportMetric(float64(b.N*len(lines))/secs, "lines/s")
		b.ReportMetric(float64(int64(b.N)*size)/secs/1e6, "MB/s")
	}
	b.Run("classifier", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			var o observed
			for _, l := range lines {
				o.apply(l)
			}
			if !o.hasReport || o.steps != 100 {
				b.Fatalf("classifier lost the stream: steps %d, report %v", o.steps, o.hasReport)
			}
		}
		report(b)
	})
	b.Run("anchor_json_Valid", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		valid := 0
		for b.Loop() {
			for _, l := range lines {
				if json.Valid(l) {
					valid++
				}
			}
		}
		if valid == 0 {
			b.Fatal("no line is JSON")
		}
		report(b)
	})
}

// BenchmarkRunnerVsBare compares one Run of a small engine with running
// the same engine bare (`sh engine.sh < request`, output discarded): the
// ratio is the runner's own cost over process start-up and I/O.
func BenchmarkRunnerVsBare(b *testing.B) {
	dir := b.TempDir()
	engine := filepath.Join(dir, "engine.sh")
	var script strings.Builder
	script.WriteString("read line\ncat <<'EOF'\n")
	for _, l := range benchLines(100) { // ~410 lines
		script.Write(l)
		script.WriteByte('\n')
	}
	script.WriteString("EOF\n")
	if err := os.WriteFile(engine, []byte(script.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	req := Request{Kind: "explore", Input: []byte(`{"query":"how does the deadline work?"}`)}
	request, err := Envelope("cr-bench", req)
	if err != nil {
		b.Fatal(err)
	}
	spec := LaunchSpec{Command: "sh", Args: []string{engine}}
	runner := NewRunner()

	var runnerT, bareT time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := runner.Run(context.Background(), spec, req, nil)
		runnerT += time.Since(start)
		if err != nil || res.Terminal != Captured || res.Attempt.Steps != 100 {
			b.Fatalf("runner: %v, %s (%s), steps %d", err, res.Terminal, res.Failure, res.Attempt.Steps)
		}

		start = time.Now()
		cmd := exec.Command("sh", engine)
		cmd.Stdin = bytes.NewReader(request)
		cmd.Stdout = io.Discard
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("bare: %v", err)
		}
		bareT += time.Since(start)
	}
	runnerMS := runnerT.Seconds() * 1e3 / float64(b.N)
	bareMS := bareT.Seconds() * 1e3 / float64(b.N)
	b.ReportMetric(runnerMS, "runner_ms")
	b.ReportMetric(bareMS, "bare_ms")
	b.ReportMetric(runnerMS/bareMS, "runner/bare")
}

// BenchmarkFigure_Events prints `make bench`'s events figure
// (README.md § Performance): classifying the benchmark stream's lines, µs a line, next to
// json.Valid over the same lines; goal: at least half its throughput.
func BenchmarkFigure_Events(b *testing.B) {
	lines := benchLines(100)
	const reps = 200
	classify := func() float64 {
		return benchfig.PerItem(reps*len(lines), func() {
			for range reps {
				var o observed
				for _, l := range lines {
					o.apply(l)
				}
			}
		})
	}
	valid := func() float64 {
		return benchfig.PerItem(reps*len(lines), func() {
			for range reps {
				for _, l := range lines {
					json.Valid(l)
				}
			}
		})
	}
	printed := false
	for b.Loop() {
		r := benchfig.Measure(benchfig.Figure{Name: "events", Unit: "µs/line", Goal: 0.5, AtLeast: true, Invert: true}, classify, valid)
		if !printed { // once per run, however many times -benchtime loops
			r.Print(os.Stdout)
			printed = true
		}
	}
}
