package lambdas_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

func invoke(t *testing.T, fn *lambdas.Function, payload string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return fn.Invoke(ctx, []byte(payload))
}

// A function under the emulator gets Lambda's reserved variables, the
// credentials and endpoint it is started with, and its own variables, and
// answers with its handler's result; the first invocation is a cold start
// whose REPORT has an init duration and the runtime's peak memory.
func TestInvoke_ReturnsTheHandlersResultWithLambdasEnvironment(t *testing.T) {
	logs := &syncBuffer{b: new(bytes.Buffer)}
	fn := startFake(t, lambdas.Config{Name: "fake-env", MemoryMB: 256, Timeout: 7 * time.Second,
		Env: map[string]string{"STRATUS_TABLE": "tbl"}, AccessKeyID: "AKID", SecretAccessKey: "SECRET",
		Endpoint: "http://127.0.0.1:1", Region: "eu-west-1", LogWriter: logs})
	out, err := invoke(t, fn, `{"env":["AWS_LAMBDA_FUNCTION_NAME","AWS_LAMBDA_FUNCTION_MEMORY_SIZE","AWS_LAMBDA_FUNCTION_TIMEOUT","AWS_REGION","AWS_ACCESS_KEY_ID","AWS_SECRET_ACCESS_KEY","AWS_ENDPOINT_URL","STRATUS_TABLE","HOME","LOG_LEVEL","AWS_LAMBDA_RUNTIME_API"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fake-env", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "7", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID",
		"AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "STRATUS_TABLE": "tbl", "HOME": "", "LOG_LEVEL": ""}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q; want %q", k, env[k], v)
		}
	}
	if env["AWS_LAMBDA_RUNTIME_API"] == "" {
		t.Error("AWS_LAMBDA_RUNTIME_API is not set: the runtime did not run under the emulator")
	}
	if out, err := invoke(t, fn, `{"echo":{"a":[1,2]}}`); err != nil || string(out) != `{"a":[1,2]}` {
		t.Errorf("echo: %s, %v", out, err)
	}
	reps := fn.Reports()
	if len(reps) != 2 {
		t.Fatalf("%d reports; want 2: %v", len(reps), reps)
	}
	if reps[0].Init <= 0 || reps[1].Init != 0 {
		t.Errorf("init durations %v, %v; want the first (cold) > 0, the second (warm) 0", reps[0].Init, reps[1].Init)
	}
	for _, r := range reps {
		if r.MemorySizeMB != 256 || r.MaxMemoryUsedMB <= 0 || r.MaxMemoryUsedMB >= 256 {
			t.Errorf("report %v: want memory size 256 and a measured max memory under it", r)
		}
	}
	if !strings.Contains(logs.String(), "fake-env[0] REPORT RequestId: ") {
		t.Errorf("the log has no prefixed REPORT line:\n%s", logs.String())
	}
}

// A handler's error reaches the caller as a *FunctionError with its
// errorType and errorMessage; a runtime that exits as Runtime.ExitError,
// and the next invocation starts a new runtime.
func TestInvoke_FunctionErrorsCarryTypeAndMessage(t *testing.T) {
	fn := startFake(t, lambdas.Config{})
	_, err := invoke(t, fn, `{"fail":"asked to fail"}`)
	var fe *lambdas.FunctionError
	if !errors.As(err, &fe) || fe.Message != "asked to fail" || fe.Type != "errorString" {
		t.Fatalf("err = %v; want a FunctionError errorString: asked to fail", err)
	}
	_, err = invoke(t, fn, `{"exit":3}`)
	if !errors.As(err, &fe) || fe.Type != "Runtime.ExitError" {
		t.Fatalf("err = %v; want a FunctionError Runtime.ExitError", err)
	}
	if out, err := invoke(t, fn, `{"echo":"again"}`); err != nil || string(out) != `"again"` {
		t.Errorf("after the exit: %s, %v; want a fresh runtime's answer", out, err)
	}
}

// An invocation past the function's timeout is ErrTimeout (the emulator
// kills the runtime), and the next one is served by a new runtime: a cold
// start again.
func TestInvoke_PastTheTimeoutIsErrTimeout(t *testing.T) {
	fn := startFake(t, lambdas.Config{Timeout: time.Second})
	start := time.Now()
	_, err := invoke(t, fn, `{"sleep_ms":5000}`)
	if !errors.Is(err, lambdas.ErrTimeout) {
		t.Fatalf("err = %v; want ErrTimeout", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the timeout took %v; want about 1 s", d)
	}
	if out, err := invoke(t, fn, `{"echo":1}`); err != nil || string(out) != "1" {
		t.Fatalf("after the timeout: %s, %v", out, err)
	}
	reps := fn.Reports()
	if len(reps) != 2 || !reps[0].TimedOut || reps[1].TimedOut || reps[1].Init <= 0 {
		t.Errorf("reports %v; want a timed-out one, then a cold start", reps)
	}
}

// Requests and responses over 6 MB are ErrPayloadTooLarge.
func TestInvoke_PayloadsOver6MBAreTooLarge(t *testing.T) {
	fn := startFake(t, lambdas.Config{MemoryMB: 512})
	big := `{"echo":"` + strings.Repeat("x", lambdas.MaxPayloadBytes) + `"}`
	if _, err := invoke(t, fn, big); !errors.Is(err, lambdas.ErrPayloadTooLarge) {
		t.Errorf("a 6 MB request: err = %v; want ErrPayloadTooLarge", err)
	}
	if _, err := invoke(t, fn, `{"big":7000000}`); !errors.Is(err, lambdas.ErrPayloadTooLarge) {
		t.Errorf("a 7 MB response: err = %v; want ErrPayloadTooLarge", err)
	}
	if out, err := invoke(t, fn, `{"big":1000}`); err != nil || len(out) != 1002 {
		t.Errorf("a 1 kB response: %d bytes, %v", len(out), err)
	}
}

// Stop ends the emulator, the runtime and what the runtime started, even
// in a process group of its own; Invoke after Stop is ErrStopped.
func TestStop_NothingOutlivesTheFunction(t *testing.T) {
	fn := startFake(t, lambdas.Config{Concurrency: 2})
	out, err := invoke(t, fn, `{"child":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var pids struct{ Pid, Self int }
	if err := json.Unmarshal(out, &pids); err != nil || pids.Pid == 0 {
		t.Fatalf("%s: %v", out, err)
	}
	fn.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range []int{pids.Pid, pids.Self} {
		for syscall.Kill(p, 0) == nil && !zombie(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still alive after Stop", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := invoke(t, fn, `{"echo":1}`); !errors.Is(err, lambdas.ErrStopped) {
		t.Errorf("Invoke after Stop: %v; want ErrStopped", err)
	}
}

// Concurrency instances serve invocations side by side, each one at a time.
func TestInvoke_ConcurrencyInstancesServeInParallel(t *testing.T) {
	fn := startFake(t, lambdas.Config{Concurrency: 2, Timeout: 10 * time.Second})
	start := time.Now()
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := invoke(t, fn, `{"sleep_ms":1500}`); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 2900*time.Millisecond {
		t.Errorf("two 1.5 s invocations on two instances took %v; want them side by side", d)
	}
}

// An emulator that died (killed from outside) is replaced on the next
// invocation, which is a cold start.
func TestInvoke_ADeadEmulatorIsReplaced(t *testing.T) {
	fn := startFake(t, lambdas.Config{})
	out, err := invoke(t, fn, `{"pids":true}`)
	if err != nil {
		t.Fatal(err)
	}
	var pids struct{ Self, Parent int }
	if err := json.Unmarshal(out, &pids); err != nil || pids.Parent == 0 {
		t.Fatalf("%s: %v", out, err)
	}
	if err := syscall.Kill(pids.Parent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Until it is reaped: a zombie leader's other threads may still
	// hold its listening socket.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pids.Parent, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the emulator was not reaped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err = invoke(t, fn, `{"pids":true}`)
	if err != nil {
		t.Fatalf("after the emulator died: %v", err)
	}
	var again struct{ Self, Parent int }
	json.Unmarshal(out, &again)
	if again.Parent == pids.Parent {
		t.Errorf("the same emulator %d answered", again.Parent)
	}
	if reps := fn.Reports(); len(reps) != 2 || reps[1].Init <= 0 {
		t.Errorf("reports %v; want the second a cold start", reps)
	}
}

// Summarize gives the spread and median of the cold starts' init
// durations and the largest max memory.
func TestSummarize_ColdStartsAndPeakMemory(t *testing.T) {
	ms := time.Millisecond
	s := lambdas.Summarize("F", 256, []lambdas.Report{
		{Init: 30 * ms, MaxMemoryUsedMB: 18}, {MaxMemoryUsedMB: 19}, {Init: 10 * ms, MaxMemoryUsedMB: 17}, {Init: 20 * ms}, {Init: 40 * ms},
	})
	if s.ColdStarts != 4 || s.Invocations != 5 || s.InitMin != 10*ms || s.InitMax != 40*ms || s.InitMedian != 25*ms || s.MaxMemoryUsedMB != 19 {
		t.Errorf("%+v", s)
	}
	if got, want := s.String(), "F: init 10.0–40.0 ms, median 25.0 ms (4 cold starts), max memory 19 MB of 256 MB (5 invocations)"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

// A bootstrap built for another architecture is refused at Start, naming
// `make lambdas`.
func TestStart_RefusesABootstrapOfAnotherArchitecture(t *testing.T) {
	other := elf.EM_AARCH64
	if runtime.GOARCH == "arm64" {
		other = elf.EM_X86_64
	}
	// An ELF header of an executable for the other machine, and no more.
	hdr := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(other), Version: uint32(elf.EV_CURRENT), Ehsize: 64, Phentsize: 56, Shentsize: 64}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bin, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := lambdas.Start(context.Background(), lambdas.Config{Name: "other", Bootstrap: bin, RIE: rie(t)})
	if err == nil || !strings.Contains(err.Error(), "this machine is "+runtime.GOARCH) || !strings.Contains(err.Error(), "make lambdas") {
		t.Errorf("Start: %v; want an error naming make lambdas", err)
	}
}
