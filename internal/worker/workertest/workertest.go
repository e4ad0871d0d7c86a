// Package workertest holds what tests of the worker service and of what
// serves it (internal/httpapi, functions/handler) share: the state
// machine's side of the task tokens, a launcher that starts nothing, the
// built-in implementation flow as files, and the Rig — a whole worker
// service (worker.New) over SQLite and an fs sink — with the flows and
// fakes the operation packages' tests under internal/worker drive it
// with. It imports the facade (internal/worker), so a package the facade
// imports (core, the layers, the operations) may use it only from its
// external test package (package x_test).
package workertest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/launch"
)

// FakeTokens records task-token completions (the state machine's side of
// worker.Tokens). The zero value is ready; it is safe for concurrent use.
type FakeTokens struct {
	mu        sync.Mutex
	successes map[string]json.RawMessage
	failures  map[string]string
	// HeartbeatErr is what SendTaskHeartbeat answers (nil: success).
	HeartbeatErr error
	heartbeats   map[string]int
}

// SendTaskSuccess records out as tok's output.
func (t *FakeTokens) SendTaskSuccess(_ context.Context, tok string, out json.RawMessage) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.successes == nil {
		t.successes = map[string]json.RawMessage{}
	}
	t.successes[tok] = out
	return nil
}

// SendTaskFailure records tok's failure as "name: cause".
func (t *FakeTokens) SendTaskFailure(_ context.Context, tok, name, cause string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failures == nil {
		t.failures = map[string]string{}
	}
	t.failures[tok] = name + ": " + cause
	return nil
}

// SendTaskHeartbeat counts tok's heartbeats and answers HeartbeatErr.
func (t *FakeTokens) SendTaskHeartbeat(_ context.Context, tok string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.heartbeats == nil {
		t.heartbeats = map[string]int{}
	}
	t.heartbeats[tok]++
	return t.HeartbeatErr
}

// Heartbeats returns how many heartbeats tok got.
func (t *FakeTokens) Heartbeats(tok string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heartbeats[tok]
}

// Successes returns a copy of the outputs of the tokens succeeded so far.
func (t *FakeTokens) Successes() map[string]json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.successes)
}

// Failures returns a copy of the failures ("name: cause") so far by token.
func (t *FakeTokens) Failures() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.failures)
}

// Success is tok's output, nil unless tok succeeded.
func (t *FakeTokens) Success(tok string) json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.successes[tok]
}

// Failure is tok's failure ("name: cause"), "" unless tok failed.
func (t *FakeTokens) Failure(tok string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failures[tok]
}

// Counts returns how many task tokens have succeeded and failed so far.
func (t *FakeTokens) Counts() (successes, failures int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.successes), len(t.failures)
}

// FakeLauncher records worker specs instead of starting processes; the
// handle it returns is the spec's. The zero value is ready; it is safe for
// concurrent use.
type FakeLauncher struct {
	mu    sync.Mutex
	specs []launch.Spec
	// Exchange, when set, plays the worker's runner: a spec launched with
	// a one-time bootstrap value has it exchanged for the step's handle
	// (worker.Service.ExchangeBootstrap) and is recorded with the handle,
	// as the tests then use it.
	Exchange func(ctx context.Context, bootstrap string) (handle string, err error)
	// InMemory makes it a launcher whose workers get their spec in memory
	// (launch.InMemory): dispatch then hands it the handle itself.
	InMemory bool
}

// HandsHandleInMemory is l.InMemory (launch.InMemory).
func (l *FakeLauncher) HandsHandleInMemory() bool { return l.InMemory }

// Launch records s.
func (l *FakeLauncher) Launch(ctx context.Context, s launch.Spec) (string, error) {
	if l.Exchange != nil && strings.HasPrefix(s.Handle, "wb-") {
		h, err := l.Exchange(ctx, s.Handle)
		if err != nil {
			return "", fmt.Errorf("exchange the bootstrap value: %w", err)
		}
		s.Handle = h
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specs = append(l.specs, s)
	return s.Handle, nil
}

// Stop does nothing.
func (l *FakeLauncher) Stop(context.Context, string) error { return nil }

// Launched returns the specs launched so far, oldest first.
func (l *FakeLauncher) Launched() []launch.Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.specs)
}

// Last returns how many specs were launched so far and the newest (the
// zero Spec when none was), without copying the others: a benchmark
// reading it after each of 1,000 dispatches stays O(1) a dispatch.
func (l *FakeLauncher) Last() (int, launch.Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.specs) == 0 {
		return 0, launch.Spec{}
	}
	return len(l.specs), l.specs[len(l.specs)-1]
}

// ImplementationFlow returns the built-in implementation flow's files
// (path under the flows directory → text): the flow and its role files.
func ImplementationFlow(tb testing.TB) map[string]string {
	tb.Helper()
	files := map[string]string{}
	for _, p := range []string{"implementation.yaml", "implementation/planning.md", "implementation/implementation.md", "implementation/review.md", "implementation/fixing.md"} {
		b, err := builtin.Flows.ReadFile("flows/" + p)
		if err != nil {
			tb.Fatal(err)
		}
		files[p] = string(b)
	}
	return files
}

// WriteFiles writes files (path under dir → text) below dir, making the
// directories they need.
func WriteFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
