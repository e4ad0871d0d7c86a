package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// engine writes body as a shell script and returns a LaunchSpec running it
// with `sh`.
func engine(t *testing.T, body string) LaunchSpec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "engine.sh")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return LaunchSpec{Command: "sh", Args: []string{path}}
}

var queryReq = Request{Kind: "explore", Input: json.RawMessage(`{"query":"q"}`)}

func run(t *testing.T, spec LaunchSpec, req Request) (Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := NewRunner().Run(context.Background(), spec, req, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res, time.Since(start)
}

func wantTerminal(t *testing.T, res Result, want Terminal) {
	t.Helper()
	if res.Terminal != want {
		t.Fatalf("terminal = %s (failure %q, report %s), want %s", res.Terminal, res.Failure, res.Report, want)
	}
}

func wantReport(t *testing.T, res Result, want string) {
	t.Helper()
	wantTerminal(t, res, Captured)
	if !jsonEqual(t, res.Report, []byte(want)) {
		t.Fatalf("report = %s, want %s", res.Report, want)
	}
}

func intp(v int) *int { return &v }

// pidFile returns a path for an engine to write a grandchild pid into.
func pidFile(t *testing.T) string { return filepath.Join(t.TempDir(), "pid") }

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("engine never wrote its grandchild pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone fails unless pid dies (or becomes a zombie) within 3 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
			return
		} else if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived the group kill", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- docs/contracts.md § The request line ----

func TestEnvelope_ExactLineWithOptionalFields(t *testing.T) { // docs/contracts.md § The request line
	t.Parallel()
	got, err := Envelope("cr-7", Request{
		Kind:     "explore",
		Input:    json.RawMessage("{\n  \"query\": \"…\"\n}"),
		MaxSteps: intp(24),
		Schema:   json.RawMessage(`{ "type": "object" }`),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"workflow_contract":1,"id":"cr-7","kind":"explore","max_steps":24,"schema":{"type":"object"},"input":{"query":"…"}}` + "\n"
	if string(got) != want {
		t.Fatalf("envelope\n got %q\nwant %q", got, want)
	}
}

func TestEnvelope_OptionalFieldsAbsentWhenUnset(t *testing.T) { // docs/contracts.md § The request line
	t.Parallel()
	for _, schema := range []json.RawMessage{nil, json.RawMessage("null")} {
		got, err := Envelope("cr-1", Request{Kind: "echo", Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"workflow_contract":1,"id":"cr-1","kind":"echo","input":null}` + "\n"
		if string(got) != want {
			t.Fatalf("envelope\n got %q\nwant %q", got, want)
		}
	}
	got, err := Envelope("cr-2", Request{Kind: "k", Input: json.RawMessage(`[1, 2]`), MaxSteps: intp(0)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"workflow_contract":1,"id":"cr-2","kind":"k","max_steps":0,"input":[1,2]}` + "\n"; string(got) != want {
		t.Fatalf("a set max_steps of 0 must be sent\n got %q\nwant %q", got, want)
	}
}

func TestEnvelope_RejectsInvalidInputAndSchema(t *testing.T) { // docs/contracts.md § The request line
	t.Parallel()
	for _, req := range []Request{
		{Kind: "k", Input: json.RawMessage(`{"query":`)},
		{Kind: "k", Input: json.RawMessage(`1 2`)},
		{Kind: "k", Input: json.RawMessage(`{}`), Schema: json.RawMessage(`[1]`)},
		{Kind: "k", Input: json.RawMessage(`{}`), Schema: json.RawMessage(`{"a":`)},
	} {
		if line, err := Envelope("cr-1", req); err == nil {
			t.Errorf("Envelope(%s, %s) = %q, want an error", req.Input, req.Schema, line)
		}
	}
	// Run turns a bad request into Failed without launching, not into an error.
	res, err := NewRunner().Run(context.Background(), LaunchSpec{Command: "/nonexistent"},
		Request{Kind: "k", Input: json.RawMessage(`{`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantTerminal(t, res, Failed)
	if !strings.Contains(res.Failure, "invalid request") || res.Attempt.ID != "cr-1" {
		t.Fatalf("result = %+v", res)
	}
}

func TestRun_RequestLineIsTheEnvelope(t *testing.T) { // docs/contracts.md § The request line
	t.Parallel()
	spec := engine(t, `read -r line; printf '{"subrun_report":%s}\n' "$line"`)
	req := Request{
		Kind:     "review",
		Input:    json.RawMessage(`{"goal": "tidy <&>"}`),
		MaxSteps: intp(24),
		Schema:   json.RawMessage(`{"type":"object"}`),
	}
	res, _ := run(t, spec, req)
	want, err := Envelope(res.Attempt.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	wantReport(t, res, string(want))
	if res.Attempt.ID != "cr-1" {
		t.Fatalf("id = %q, want cr-1", res.Attempt.ID)
	}
}

func TestRun_EnvelopeCheckedByEngine(t *testing.T) { // docs/contracts.md § The request line
	t.Parallel()
	runVector(t, "envelope_checked")
}

func TestRun_StdinKeptOpenAfterRequest(t *testing.T) { // docs/contracts.md § Process lifecycle, § The request line
	t.Parallel()
	runVector(t, "stdin_kept_open")
}

func TestRun_RequestWriteInsideDeadline(t *testing.T) { // docs/contracts.md § Timing, environment and argv
	t.Parallel()
	// 4 MiB of input against a child that never reads: far above pipe capacity.
	big, _ := json.Marshal(map[string]string{"query": strings.Repeat("x", 4<<20)})
	spec := engine(t, "exec sleep 30\n")
	spec.DeadlineMS, spec.CancelGraceMS = 300, 100
	res, wall := run(t, spec, Request{Kind: "explore", Input: big})
	wantTerminal(t, res, TimedOut)
	if wall > 3*time.Second {
		t.Fatalf("wall %v: the blocked write escaped the deadline", wall)
	}
}

// ----
// docs/contracts.md § Process lifecycle and § Timing, environment and argv:
// environment, cwd ----

func TestRun_EnvOverlayAndCwd(t *testing.T) { // docs/contracts.md § Process lifecycle, § Timing, environment and argv
	t.Parallel()
	body := `read -r line
printf '{"subrun_report":{"x":"%s","home":"%s","path":"%s","pwd":"%s"}}\n' "$STRATUS_CONTRACT_X" "$HOME" "$PATH" "$(pwd -P)"
`
	t.Run("overlay and dir", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		spec := engine(t, body)
		spec.Env = map[string]string{"STRATUS_CONTRACT_X": "overlay", "HOME": "/overlaid"}
		spec.Dir = dir
		res, _ := run(t, spec, queryReq)
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]string{"x": "overlay", "home": "/overlaid", "path": os.Getenv("PATH"), "pwd": real})
		wantReport(t, res, string(want))
	})
	t.Run("parent env and own cwd", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, engine(t, body), queryReq)
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		real, err := filepath.EvalSymlinks(wd)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]string{"x": os.Getenv("STRATUS_CONTRACT_X"), "home": os.Getenv("HOME"), "path": os.Getenv("PATH"), "pwd": real})
		wantReport(t, res, string(want))
	})
	t.Run("invalid overlay key", func(t *testing.T) {
		t.Parallel()
		spec := engine(t, body)
		spec.Env = map[string]string{"A=B": "x"}
		res, _ := run(t, spec, queryReq)
		wantTerminal(t, res, Failed)
	})
}

func TestRun_StderrInheritedNeverRead(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	spec := engine(t, `read -r line; printf 'stderr is not the event stream (expected noise)\n' >&2; printf '{"event":"agent_step","step":1}\n'`)
	res, _ := run(t, spec, queryReq)
	wantTerminal(t, res, NoReport)
	if res.Attempt.Steps != 1 {
		t.Fatalf("steps = %d", res.Attempt.Steps)
	}
}

func TestRun_SpawnFailureIsFailedAttempt(t *testing.T) { // docs/contracts.md § Terminal classification
	t.Parallel()
	for _, spec := range []LaunchSpec{
		{Command: "/nonexistent/stratus-engine"},
		{Command: "stratus-no-such-engine-on-path"},
		{Command: "sh", Args: []string{"-c", "true"}, Dir: "/nonexistent/dir"},
	} {
		res, _ := run(t, spec, queryReq)
		wantTerminal(t, res, Failed)
		a := res.Attempt
		if res.Failure == "" || a.ID != "cr-1" || a.ExitCode != nil || a.CostUSD != nil || a.Steps != 0 {
			t.Fatalf("%+v: result = %+v", spec, res)
		}
	}
}

func TestRun_ExitStatusAwaitedAfterEOF(t *testing.T) { // docs/contracts.md § Process lifecycle, § Terminal classification
	t.Parallel()
	spec := engine(t, "read -r line\nexec >&-\nsleep 0.3\nexit 5\n")
	res, _ := run(t, spec, queryReq)
	wantTerminal(t, res, Failed)
	if res.Failure != "exit status 5" || res.Attempt.ExitCode == nil || *res.Attempt.ExitCode != 5 {
		t.Fatalf("failure %q exit %v", res.Failure, res.Attempt.ExitCode)
	}
}

func TestRun_LingeringChildKilledAfterEOFWait(t *testing.T) { // docs/contracts.md § Process lifecycle, § Timing, environment and argv
	t.Parallel()
	spec := engine(t, "read -r line\nprintf '{\"subrun_report\":\"x\"}\\n'\nexec >&-\nexec sleep 30\n")
	res, wall := run(t, spec, queryReq)
	wantReport(t, res, `"x"`)
	if wall < ExitWaitMS*time.Millisecond || wall > ExitWaitMS*time.Millisecond+2*time.Second {
		t.Fatalf("wall %v, want about the %d ms exit wait", wall, ExitWaitMS)
	}
	if res.Attempt.ExitCode != nil {
		t.Fatalf("exit code %d for a child the runner killed", *res.Attempt.ExitCode)
	}
}

func TestRun_GrandchildHoldingStdoutDoesNotHoldRunner(t *testing.T) { // docs/contracts.md § Process lifecycle, § Timing, environment and argv
	t.Parallel()
	pf := pidFile(t)
	spec := engine(t, `read -r line
sleep 30 &
echo $! > "$PIDFILE"
printf '{"subrun_report":"done"}\n'
exit 0
`)
	spec.Env = map[string]string{"PIDFILE": pf}
	res, wall := run(t, spec, queryReq)
	wantReport(t, res, `"done"`)
	if res.Attempt.ExitCode == nil || *res.Attempt.ExitCode != 0 {
		t.Fatalf("exit code = %v, want 0", res.Attempt.ExitCode)
	}
	if wall > PostExitDrainMS*time.Millisecond+2*time.Second {
		t.Fatalf("wall %v: the grandchild held the runner", wall)
	}
	waitGone(t, readPid(t, pf))
}

// A Stderr writer that is no file (the runner keeps a tail of it for
// internal/failclass) does not let a grandchild that left the group and
// holds stderr keep Run waiting after the child exited.
func TestRun_GrandchildHoldingStderrWriterDoesNotHoldRunner(t *testing.T) { // docs/contracts.md § Process lifecycle, § Timing, environment and argv
	t.Parallel()
	pf := pidFile(t)
	spec := engine(t, `read -r line
setsid sleep 30 >/dev/null </dev/null &
echo $! > "$PIDFILE"
echo "the engine's last words" >&2
printf '{"subrun_report":"done"}\n'
exit 0
`)
	spec.Env = map[string]string{"PIDFILE": pf}
	var stderr syncWriter
	spec.Stderr = &stderr
	res, wall := run(t, spec, queryReq)
	pid := readPid(t, pf)
	syscall.Kill(pid, syscall.SIGKILL) // it left the group: the runner's kill does not reach it
	wantReport(t, res, `"done"`)
	if wall > (ExitWaitMS+PostExitDrainMS)*time.Millisecond+3*time.Second {
		t.Fatalf("wall %v: the grandchild's stderr held the runner", wall)
	}
	if !strings.Contains(stderr.String(), "the engine's last words") {
		t.Errorf("stderr %q; want the engine's line", stderr.String())
	}
}

// syncWriter is a Stderr that is no *os.File.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestRun_DeadlineClosesStdinThenKillsGroup(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	pf := pidFile(t)
	spec := engine(t, `read -r line
printf '{"event":"agent_step","step":2}\n'
sleep 30 &
echo $! > "$PIDFILE"
cat >/dev/null
printf '{"event":"usage","usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":4,"cost_usd":0.5}}\n'
wait
`)
	spec.Env = map[string]string{"PIDFILE": pf}
	spec.DeadlineMS, spec.CancelGraceMS = 300, 300
	res, wall := run(t, spec, queryReq)
	wantTerminal(t, res, TimedOut)
	a := res.Attempt
	// The usage line printed after stdin EOF, inside the grace, still counts.
	if a.Steps != 2 || a.PromptTokens != 4 || a.CompletionTokens != 2 || a.ExitCode != nil {
		t.Fatalf("attempt = %+v", a)
	}
	checkCost(t, a.CostUSD, ptr(0.5))
	if wall < 600*time.Millisecond || wall > 2500*time.Millisecond {
		t.Fatalf("wall %v, want deadline+grace", wall)
	}
	waitGone(t, readPid(t, pf))
}

func TestRun_DeadlineTimeout(t *testing.T) { // docs/contracts.md § Process lifecycle, § Terminal classification
	t.Parallel()
	runVector(t, "deadline_timeout")
}

func TestRun_ReportInsideGraceCounts(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	runVector(t, "report_in_grace")
}

func TestRun_CallerCancelKillsGroupAndReturnsCtxErr(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	pf := pidFile(t)
	spec := engine(t, `read -r line
printf '{"event":"agent_step","step":3}\n'
sleep 30 &
echo $! > "$PIDFILE"
wait
`)
	spec.Env = map[string]string{"PIDFILE": pf}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		readPid(t, pf)
		cancel()
	}()
	start := time.Now()
	res, err := NewRunner().Run(ctx, spec, queryReq, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.Terminal != "" {
		t.Fatalf("cancellation folded into terminal %s", res.Terminal)
	}
	if res.Attempt.ID != "cr-1" || res.Attempt.Steps != 3 {
		t.Fatalf("attempt = %+v", res.Attempt)
	}
	if wall := time.Since(start); wall > 3*time.Second {
		t.Fatalf("wall %v", wall)
	}
	waitGone(t, readPid(t, pf))

	// A context done before the call launches nothing.
	res, err = NewRunner().Run(ctx, spec, queryReq, nil)
	if !errors.Is(err, context.Canceled) || res.Terminal != "" {
		t.Fatalf("pre-cancelled: %+v, %v", res, err)
	}
}

func TestRun_CallerDeadlineIsCancellationNotTimedOut(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := NewRunner().Run(ctx, engine(t, "read -r line\nexec sleep 30\n"), queryReq, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

// ---- docs/contracts.md § The event stream ----

func TestRun_FinalLineWithoutNewlineCounts(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	res, _ := run(t, engine(t, `read -r line; printf '{"subrun_report":{"tail":true}}'`), queryReq)
	wantReport(t, res, `{"tail":true}`)
}

func TestRun_LongLineBeyondScannerLimit(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	payload := strings.Repeat("y", 3<<20)
	data := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(data, []byte(`{"subrun_report":"`+payload+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := engine(t, `read -r line; cat "$DATA"`)
	spec.Env = map[string]string{"DATA": data}
	res, _ := run(t, spec, queryReq)
	wantTerminal(t, res, Captured)
	var got string
	if err := json.Unmarshal(res.Report, &got); err != nil || got != payload {
		t.Fatalf("report of %d bytes mangled (%v)", len(res.Report), err)
	}
}

func TestRun_OverlongLineSkipped(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	exact := `{"subrun_report":"` + strings.Repeat("x", 44) + `"}` // 64 bytes
	if len(exact) != 64 {
		t.Fatal(len(exact))
	}
	over := `{"subrun_report":"` + strings.Repeat("z", 45) + `"}` // 65 bytes
	long := `{"subrun_report":"` + strings.Repeat("w", 200) + `"}`
	data := filepath.Join(t.TempDir(), "out")
	lines := strings.Join([]string{`{"subrun_report":"a"}`, exact, over, `{"event":"agent_step","step":2}`, long}, "\n") // no final newline
	if err := os.WriteFile(data, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := engine(t, `read -r line; cat "$DATA"`)
	spec.Env = map[string]string{"DATA": data}
	spec.MaxLineBytes = 64
	res, _ := run(t, spec, queryReq)
	wantReport(t, res, `"`+strings.Repeat("x", 44)+`"`)
	if res.Attempt.Steps != 2 {
		t.Fatalf("steps = %d: the line after an overlong one was lost", res.Attempt.Steps)
	}
	// The skipped lines are counted, with the longest's size, so
	// a NoReport they caused can say so.
	if res.Attempt.DroppedLines != 2 || res.Attempt.DroppedMaxBytes != int64(len(long)) {
		t.Errorf("dropped %d lines, longest %d bytes; want 2 and %d", res.Attempt.DroppedLines, res.Attempt.DroppedMaxBytes, len(long))
	}
}

func TestRun_NonJSONLinesSkipped(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	runVector(t, "noise_skipped")
	spec := engine(t, `read -r line
printf 'panic: not json\n[1,2]\n42\n"s"\n{"event":5}\n{"subrun_report":1\n\n{"event":"agent_step","step":1,"level":"info"}\n'
`)
	res, _ := run(t, spec, queryReq)
	wantTerminal(t, res, NoReport)
	if res.Attempt.Steps != 1 {
		t.Fatalf("steps = %d", res.Attempt.Steps)
	}
}

func TestIntegral(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2", 2, true}, {"2.0", 2, true}, {"1e2", 100, true}, {"1.5e1", 15, true}, {"100e-2", 1, true},
		{"-3", -3, true}, {"0", 0, true}, {"-0.0", 0, true}, {"0e99999999999", 0, true},
		{"9223372036854775807", 9223372036854775807, true}, {"-9223372036854775808", -9223372036854775808, true},
		{"1.5", 0, false}, {"1e-1", 0, false}, {"3.0000000000000000001", 0, false},
		{"9223372036854775808", 0, false}, {"1e19", 0, false}, {"1e999999999999999999", 0, false},
		{`"5"`, 0, false}, {"null", 0, false}, {"true", 0, false}, {"", 0, false}, {"{}", 0, false},
	} {
		got, ok := integral(json.RawMessage(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("integral(%s) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestRun_StepIntegralOnlyAndMax(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	spec := engine(t, `read -r line
for s in 1.5 2.0 '"9"' 9.5 null 1; do printf '{"event":"agent_step","step":%s}\n' "$s"; done
printf '{"event":"agent_step"}\n'
`)
	res, _ := run(t, spec, queryReq)
	wantTerminal(t, res, NoReport)
	if res.Attempt.Steps != 2 {
		t.Fatalf("steps = %d, want 2 (2.0 accepted, 1.5/9.5/\"9\" ignored, max kept)", res.Attempt.Steps)
	}
}

func usageEngine(t *testing.T, usages ...string) LaunchSpec {
	t.Helper()
	var b strings.Builder
	b.WriteString("read -r line\n")
	for _, u := range usages {
		fmt.Fprintf(&b, "printf '%%s\\n' '{\"event\":\"usage\",\"usage\":%s}'\n", u)
	}
	return engine(t, b.String())
}

func wantTokens(t *testing.T, a Attempt, prompt, completion int64, cost *float64) {
	t.Helper()
	if a.PromptTokens != prompt || a.CompletionTokens != completion {
		t.Fatalf("tokens = %d/%d, want %d/%d", a.PromptTokens, a.CompletionTokens, prompt, completion)
	}
	checkCost(t, a.CostUSD, cost)
}

func ptr(v float64) *float64 { return &v }

func TestRun_UsageMissingFieldIgnoredWhole(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	res, _ := run(t, usageEngine(t,
		`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":10}`,
		`{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,"prompt_cache_hit_tokens":0,"cost_usd":1}`,
		`{"completion_tokens":50,"total_tokens":150,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":10}`,
		`5`,
		`null`,
	), queryReq)
	wantTerminal(t, res, NoReport)
	wantTokens(t, res.Attempt, 10, 5, nil)
}

func TestRun_UsageFractionalOrNonNumberIgnoredWhole(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	res, _ := run(t, usageEngine(t,
		`{"prompt_tokens":1.5,"completion_tokens":1,"total_tokens":2.5,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1,"cost_usd":1}`,
		`{"prompt_tokens":1,"completion_tokens":"1","total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1}`,
		`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":null,"prompt_cache_miss_tokens":1}`,
		`{"prompt_tokens":2.0,"completion_tokens":1e1,"total_tokens":12,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":2}`,
	), queryReq)
	wantTokens(t, res.Attempt, 2, 10, nil)
}

func TestRun_UsageInvalidCostVoidsWholeLine(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	const base = `"prompt_tokens":1000,"completion_tokens":1000,"total_tokens":2000,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1000`
	res, _ := run(t, usageEngine(t,
		`{`+base+`,"cost_usd":-1}`,
		`{`+base+`,"cost_usd":"free"}`,
		`{`+base+`,"cost_usd":null}`,
		`{`+base+`,"cost_usd":1e400}`,
		`{`+base+`,"cost_usd":true}`,
		`{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":3,"cost_usd":0.125}`,
	), queryReq)
	wantTokens(t, res.Attempt, 3, 1, ptr(0.125))
}

func TestRun_UsageAbsentCostIsUnknown(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	const tok = `"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1`
	t.Run("never priced", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, usageEngine(t, `{`+tok+`}`, `{`+tok+`}`), queryReq)
		wantTokens(t, res.Attempt, 2, 2, nil)
	})
	t.Run("zero is known, not unknown", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, usageEngine(t, `{`+tok+`,"cost_usd":0}`, `{`+tok+`}`), queryReq)
		wantTokens(t, res.Attempt, 2, 2, ptr(0))
	})
	t.Run("known costs summed", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, usageEngine(t, `{`+tok+`,"cost_usd":0.1}`, `{`+tok+`}`, `{`+tok+`,"cost_usd":0.2}`), queryReq)
		wantTokens(t, res.Attempt, 3, 3, ptr(0.3))
	})
}

func TestRun_UsageRulesVector(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	runVector(t, "usage_rules")
}

func TestRun_ProgressIsCumulative(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	spec := engine(t, `read -r line
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7,"cost_usd":0.5}}\n'
printf '{"event":"agent_step","step":1.5}\n'
printf '{"event":"agent_step","step":2}\n'
printf '{"event":"usage","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1}}\n'
printf '{"subrun_report":1}\n'
`)
	var mu sync.Mutex
	var got []string
	res, err := NewRunner().Run(context.Background(), spec, queryReq, func(p Progress) {
		cost := "nil"
		if p.CostUSD != nil {
			cost = strconv.FormatFloat(*p.CostUSD, 'g', -1, 64)
		}
		mu.Lock()
		got = append(got, fmt.Sprintf("%d/%d/%d/%s", p.Steps, p.PromptTokens, p.CompletionTokens, cost))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	wantTerminal(t, res, Captured)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"1/0/0/nil", "1/7/3/0.5", "2/7/3/0.5", "2/8/4/0.5"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("progress = %v, want %v", got, want)
	}
}

func TestRun_FailureEventNeedsStringReason(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	res, _ := run(t, engine(t, `read -r line
printf '{"event":"turn_failed","error":5}\n{"event":"agent_aborted"}\n{"event":"context_yield","to_sequence":1.5,"answer":"a"}\n'
`), queryReq)
	wantTerminal(t, res, NoReport)
	res, _ = run(t, engine(t, `read -r line
printf '{"event":"command_error","error":"first"}\n{"event":"turn_failed","error":"second"}\n'
`), queryReq)
	wantTerminal(t, res, Failed)
	if res.Failure != "first" {
		t.Fatalf("failure = %q, want the first reason", res.Failure)
	}
}

// ---- docs/contracts.md § The report line ----

func TestRun_LastReportWins(t *testing.T) { // docs/contracts.md § The report line
	t.Parallel()
	runVector(t, "last_report_wins")
}

func TestRun_NullReportIsCaptured(t *testing.T) { // docs/contracts.md § The report line
	t.Parallel()
	res, _ := run(t, engine(t, `read -r line; printf '{"subrun_report":null}\n'`), queryReq)
	wantTerminal(t, res, Captured)
	if string(res.Report) != "null" {
		t.Fatalf("report = %q", res.Report)
	}
	out, _ := json.Marshal(res)
	if !bytes.Contains(out, []byte(`"report":null`)) {
		t.Fatalf("JSON %s lost the null report", out)
	}
}

// ---- docs/contracts.md § Terminal classification ----

func TestRun_PrecedenceTable(t *testing.T) { // docs/contracts.md § Terminal classification
	t.Parallel()
	cases := []struct {
		name     string
		body     string
		deadline int
		want     Terminal
		failure  string
	}{
		{"report beats failure event", `printf '{"event":"command_error","error":"transient"}\n{"subrun_report":1}\n'`, 0, Captured, ""},
		{"report beats nonzero exit", `printf '{"subrun_report":1}\n'; exit 4`, 0, Captured, ""},
		{"failure beats nonzero exit", `printf '{"event":"turn_failed","error":"boom"}\n'; exit 2`, 0, Failed, "boom"},
		{"failure beats timeout", `printf '{"event":"turn_failed","error":"late"}\n'; exec sleep 30`, 300, Failed, "late"},
		{"nonzero exit beats max steps", `printf '{"event":"max_steps_exhausted"}\n'; exit 3`, 0, Failed, "exit status 3"},
		{"signal crash is failed", `printf '{"event":"context_yield","to_sequence":1,"answer":"a"}\n'; kill -KILL $$`, 0, Failed, "signal: killed"},
		{"timeout beats max steps", `printf '{"event":"max_steps_exhausted"}\n'; exec sleep 30`, 300, TimedOut, ""},
		{"max steps beats context yield", `printf '{"event":"context_yield","to_sequence":4,"answer":"p"}\n{"event":"max_steps_exhausted"}\n'`, 0, MaxSteps, ""},
		{"context yield", `printf '{"event":"context_yield","to_sequence":4,"answer":"partial"}\n'`, 0, ContextYield, ""},
		{"clean exit without report", `printf '{"event":"agent_step","step":1}\n'`, 0, NoReport, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := engine(t, "read -r line\n"+c.body+"\n")
			spec.DeadlineMS, spec.CancelGraceMS = c.deadline, 100
			res, _ := run(t, spec, queryReq)
			wantTerminal(t, res, c.want)
			if !strings.Contains(res.Failure, c.failure) {
				t.Fatalf("failure = %q, want %q", res.Failure, c.failure)
			}
			if c.want == ContextYield && (res.Yield == nil || *res.Yield != (Yield{ToSequence: 4, Answer: "partial"})) {
				t.Fatalf("yield = %+v", res.Yield)
			}
		})
	}
	for _, name := range []string{"report_beats_failure", "failure_beats_maxsteps", "failed_event", "max_steps", "context_yield", "no_report", "echo_minimal"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runVector(t, name)
		})
	}
}

func TestRun_NonzeroExitWithoutExplanationIsFailed(t *testing.T) { // docs/contracts.md § Terminal classification
	t.Parallel()
	runVector(t, "crash_nonzero")
	res, _ := run(t, engine(t, "read -r line\nexit 3\n"), queryReq)
	wantTerminal(t, res, Failed)
	if res.Failure != "exit status 3" || res.Attempt.ExitCode == nil || *res.Attempt.ExitCode != 3 {
		t.Fatalf("failure %q, exit %v", res.Failure, res.Attempt.ExitCode)
	}
}

func TestRun_AttemptOnEveryTerminal(t *testing.T) { // docs/contracts.md § Terminal classification
	t.Parallel()
	const acct = `printf '{"event":"agent_step","step":2}\n{"event":"usage","usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":5,"cost_usd":0.25}}\n'`
	for _, c := range []struct {
		tail     string
		deadline int
		want     Terminal
	}{
		{`printf '{"subrun_report":1}\n'`, 0, Captured},
		{`printf '{"event":"turn_failed","error":"x"}\n'`, 0, Failed},
		{`exec sleep 30`, 300, TimedOut},
		{`printf '{"event":"max_steps_exhausted"}\n'`, 0, MaxSteps},
		{`printf '{"event":"context_yield","to_sequence":1,"answer":""}\n'`, 0, ContextYield},
		{`true`, 0, NoReport},
	} {
		t.Run(string(c.want), func(t *testing.T) {
			t.Parallel()
			spec := engine(t, "read -r line\n"+acct+"\n"+c.tail+"\n")
			spec.DeadlineMS, spec.CancelGraceMS = c.deadline, 100
			res, _ := run(t, spec, queryReq)
			wantTerminal(t, res, c.want)
			a := res.Attempt
			if a.ID != "cr-1" || a.Steps != 2 || a.WallMS < 0 {
				t.Fatalf("attempt = %+v", a)
			}
			wantTokens(t, a, 5, 1, ptr(0.25))
			if (c.want == TimedOut) != (a.ExitCode == nil) {
				t.Fatalf("exit code %v on %s", a.ExitCode, c.want)
			}
		})
	}
}

func TestResult_JSONShape(t *testing.T) { // docs/contracts.md § Terminal classification
	t.Parallel()
	out, err := json.Marshal(Result{Terminal: NoReport, Attempt: Attempt{ID: "cr-1", WallMS: 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"terminal":"NoReport","attempt":{"id":"cr-1","steps":0,"prompt_tokens":0,"completion_tokens":0,"cost_usd":null,"exit_code":null,"wall_ms":3}}`
	if string(out) != want {
		t.Fatalf("JSON\n got %s\nwant %s", out, want)
	}
}

// ---- docs/contracts.md § The reference engine: attempt ids ----

func TestRunner_AttemptIDsPerRunnerAndConcurrent(t *testing.T) { // docs/contracts.md § The reference engine
	t.Parallel()
	spec := engine(t, `read -r line; printf '{"subrun_report":%s}\n' "$line"`)
	r := NewRunner()
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(context.Background(), spec, queryReq, nil)
			if err != nil || res.Terminal != Captured {
				t.Errorf("run %d: %+v, %v", i, res, err)
				return
			}
			var env struct{ ID string }
			if err := json.Unmarshal(res.Report, &env); err != nil || env.ID != res.Attempt.ID {
				t.Errorf("envelope id %q, attempt id %q (%v)", env.ID, res.Attempt.ID, err)
			}
			ids[i] = res.Attempt.ID
		}()
	}
	wg.Wait()
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) < len(ids[j]) || len(ids[i]) == len(ids[j]) && ids[i] < ids[j] })
	for i, id := range ids {
		if want := fmt.Sprintf("cr-%d", i+1); id != want {
			t.Fatalf("ids = %v", ids)
		}
	}
	var zero Runner // the zero value numbers from cr-1 too
	res, _ := zero.Run(context.Background(), spec, queryReq, nil)
	if res.Attempt.ID != "cr-1" {
		t.Fatalf("fresh runner id = %q", res.Attempt.ID)
	}
}

// docs/contracts.md § The event stream: token counts are counts (a negative
// one voids the line), totals never wrap, and a negative cost (even one that
// underflows to -0) voids the whole line.
func TestApplyUsage_NegativeOverflowAndNegativeZero(t *testing.T) {
	t.Parallel()
	u := func(p, c, cost string) string {
		l := `{"event":"usage","usage":{"prompt_tokens":` + p + `,"completion_tokens":` + c + `,"total_tokens":0,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":0`
		if cost != "" {
			l += `,"cost_usd":` + cost
		}
		return l + `}}`
	}
	var o observed
	for _, l := range []string{u("-5", "3", ""), u("1", "1", "-1e-400"), u("1", "1", "-0.5")} {
		if o.apply([]byte(l)) || o.promptTokens != 0 || o.costKnown {
			t.Errorf("%s was charged: %+v", l, o)
		}
	}
	if !o.apply([]byte(u("5000000000000000000", "1", "-0"))) || !o.costKnown || o.cost != 0 {
		t.Fatalf("a valid line (literal -0 cost) was refused: %+v", o)
	}
	if o.apply([]byte(u("5000000000000000000", "1", ""))) || o.promptTokens != 5000000000000000000 {
		t.Errorf("a line that would wrap the totals was charged: %+v", o)
	}
}

// docs/contracts.md § Process lifecycle: the attempt owns the engine's
// process group; whatever the engine left running in it (a tool, a wrapped
// CLI's child) ends with the attempt, even after a normal exit with a report.
func TestRun_LeftoversInTheEngineGroupEndWithTheAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := "read l; sleep 30 >/dev/null 2>&1 & echo $! > " + pidFile + "; printf '{\"subrun_report\":1}\\n'"
	res, err := NewRunner().Run(context.Background(), LaunchSpec{Command: "sh", Args: []string{"-c", script}}, Request{Kind: "agent", Input: []byte("null")}, nil)
	if err != nil || res.Terminal != Captured {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the engine's background process %d outlived the attempt", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
