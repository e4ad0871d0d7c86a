package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

// Run runs the conformance suite against the stores newStore returns.
//
// newStore is called once per test (tests run in parallel) and returns a
// Store that test owns: Run closes it when the test ends and fails the
// test if Close fails. Anything else to undo (a temporary file, a table)
// newStore registers with t.Cleanup; it runs after Close. The stores may
// share one backend: every key a test writes is unique to it.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	su := &suite{newStore: newStore}
	t.Run("Run", su.testRuns)
	t.Run("Step", su.testSteps)
	t.Run("NextStep", su.testNextSteps)
	t.Run("Attempt", su.testAttempts)
	t.Run("Output", su.testOutput)
	t.Run("Handle", su.testHandles)
	t.Run("TakeHandle", su.testTakeHandle)
	t.Run("Time", su.testTimes)
	t.Run("CompleteAttempt", su.testCompleteAttempt)
	t.Run("Degradation", su.testDegradations)
	t.Run("RenderSize", su.testRenderSizes)
	t.Run("Totals", su.testTotals)
}

type suite struct {
	newStore func(t *testing.T) store.Store
}

// bundle is what one test needs: a store of its own, a context and a
// source of keys no other test uses.
type bundle struct {
	ctx    context.Context
	s      store.Store
	prefix string
	n      atomic.Int64
}

func (su *suite) setup(t *testing.T) *bundle {
	t.Helper()
	s := su.newStore(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &bundle{ctx: t.Context(), s: s, prefix: strings.ToLower(rand.Text()[:12])}
}

// key returns a key unique to this test, readable in failure messages.
func (b *bundle) key(kind string) string {
	return fmt.Sprintf("%s-%s-%d", kind, b.prefix, b.n.Add(1))
}

// base is the time fixtures start from: not UTC and with nanoseconds, so
// that a store which keeps the zone or truncates to seconds is caught.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535_897_932, time.FixedZone("IST", 5*3600+1800))

func (b *bundle) run() stratus.Run {
	return stratus.Run{
		ID:         b.key("run"),
		TaskID:     "T-42",
		TaskTitle:  "Add «retry» to the fetcher ✓",
		Flow:       "implementation",
		Status:     stratus.RunRunning,
		WorkDir:    "/home/op/proj",
		TaskPath:   "/home/op/proj/tasks/t-42.md",
		Execution:  "local:exec-1",
		Owner:      "laptop/31337/1741962566",
		MaxCostUSD: 3.25,
		MaxTokens:  500_000,
		CreatedAt:  base,
	}
}

func (b *bundle) createRun(t *testing.T) stratus.Run {
	t.Helper()
	r := b.run()
	if err := b.s.CreateRun(b.ctx, r); err != nil {
		t.Fatalf("CreateRun(%q): %v", r.ID, err)
	}
	return r
}

func (b *bundle) step(runID, node string, visit int) stratus.Step {
	tid := b.key("tid")
	return stratus.Step{
		TID:       tid,
		RunID:     runID,
		Node:      node,
		Kind:      "agent",
		Visit:     visit,
		StepRef:   fmt.Sprintf("%s#%d", node, visit),
		DedupKey:  b.key("dedup"),
		TaskToken: "AAAAKgAAAAIAAAAAAAAAAf-" + tid,
		Status:    stratus.StepRunning,
		Input:     json.RawMessage(`{"run_id":"` + runID + `","loops":{"review_fix":1},"last":{"outcome":"rework ✓"}}`),
		CreatedAt: base.Add(time.Duration(visit) * time.Second),
	}
}

func (b *bundle) createStep(t *testing.T, st stratus.Step) stratus.Step {
	t.Helper()
	got, created, err := b.s.CreateStep(b.ctx, st)
	if err != nil || !created {
		t.Fatalf("CreateStep(%q) = created %v, err %v; want created, no error", st.TID, created, err)
	}
	return got
}

func (b *bundle) attempt(tid string, n int) stratus.Attempt {
	return stratus.Attempt{
		TID:              tid,
		N:                n,
		Agent:            "review",
		Status:           stratus.AttemptRunning,
		System:           "You are the reviewer.\n",
		Prompt:           "# Review\n\nRead `impl.md`.\n",
		PromptTokens:     1 << 40, // beyond 32 bits
		CompletionTokens: 7,
		CostUSD:          ptr(0.0421),
		StartedAt:        base.Add(time.Duration(n) * time.Minute),
		Resolved: stratus.Resolved{Provider: "claude", Model: "claude-opus-5", Reasoning: "high", PermissionProfile: "read-only",
			TimeoutSeconds: 600, Configured: stratus.ModelChoice{Model: "claude-sonnet-5", Reasoning: "high"}},
	}
}

func (b *bundle) createAttempt(t *testing.T, a stratus.Attempt) stratus.Attempt {
	t.Helper()
	if err := b.s.CreateAttempt(b.ctx, a); err != nil {
		t.Fatalf("CreateAttempt(%q, %d): %v", a.TID, a.N, err)
	}
	return a
}

// parents creates a run, a step of it and attempt n of that step, as the
// dispatch path does before anything is appended or a handle is put.
func (b *bundle) parents(t *testing.T, n int) (stratus.Step, stratus.Attempt) {
	t.Helper()
	r := b.createRun(t)
	st := b.createStep(t, b.step(r.ID, "impl", 1))
	a := b.createAttempt(t, b.attempt(st.TID, n))
	return st, a
}

func (b *bundle) handle(tid string, attempt int) stratus.Handle {
	return stratus.Handle{
		Handle:    "wh-" + b.key("h"),
		RunID:     b.key("run"),
		TID:       tid,
		Attempt:   attempt,
		ExpiresAt: base.Add(10 * time.Minute),
	}
}

func ptr[T any](v T) *T { return &v }

// wantCode fails the test unless err carries code (stratus.ErrorCode).
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := stratus.ErrorCode(err); got != code {
		t.Errorf("%s: error %v has code %q, want %q", what, err, got, code)
	}
}

// checkTime checks that got is want to at least the millisecond, in UTC,
// and that the zero time stays the zero time.
func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if want.IsZero() {
		if !got.IsZero() {
			t.Errorf("%s = %v, want the zero time", what, got)
		}
		return
	}
	if d := got.Sub(want); d <= -time.Millisecond || d >= time.Millisecond {
		t.Errorf("%s = %v, want %v to the millisecond", what, got, want.UTC())
	}
	if got.Location() != time.UTC {
		t.Errorf("%s = %v is in %v, want UTC", what, got, got.Location())
	}
}

func checkRun(t *testing.T, got, want stratus.Run) {
	t.Helper()
	checkTime(t, "run "+want.ID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "run "+want.ID+" EndedAt", got.EndedAt, want.EndedAt)
	checkTime(t, "run "+want.ID+" ResumedAt", got.ResumedAt, want.ResumedAt)
	checkTime(t, "run "+want.ID+" PrunedAt", got.PrunedAt, want.PrunedAt)
	got.CreatedAt, got.EndedAt, got.ResumedAt, got.PrunedAt = want.CreatedAt, want.EndedAt, want.ResumedAt, want.PrunedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run:\n got %+v\nwant %+v", got, want)
	}
}

func checkStep(t *testing.T, got, want stratus.Step) {
	t.Helper()
	checkTime(t, "step "+want.TID+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "step "+want.TID+" EndedAt", got.EndedAt, want.EndedAt)
	if !bytes.Equal(got.Value, want.Value) {
		t.Errorf("step %s Value = %q, want %q", want.TID, got.Value, want.Value)
	}
	if !bytes.Equal(got.Input, want.Input) {
		t.Errorf("step %s Input = %q, want %q (what a resumed run enters its state with)", want.TID, got.Input, want.Input)
	}
	got.CreatedAt, got.EndedAt, got.Value, got.Input = want.CreatedAt, want.EndedAt, want.Value, want.Input
	if !reflect.DeepEqual(got, want) {
		t.Errorf("step:\n got %+v\nwant %+v", got, want)
	}
}

func checkAttempt(t *testing.T, got, want stratus.Attempt) {
	t.Helper()
	what := fmt.Sprintf("attempt %s/%d", want.TID, want.N)
	checkTime(t, what+" StartedAt", got.StartedAt, want.StartedAt)
	checkTime(t, what+" EngineStartedAt", got.EngineStartedAt, want.EngineStartedAt)
	checkTime(t, what+" EndedAt", got.EndedAt, want.EndedAt)
	checkTime(t, what+" RetryAt", got.RetryAt, want.RetryAt)
	if g, w := costString(got.CostUSD), costString(want.CostUSD); g != w {
		t.Errorf("%s CostUSD = %s, want %s", what, g, w)
	}
	got.StartedAt, got.EngineStartedAt, got.EndedAt, got.RetryAt = want.StartedAt, want.EngineStartedAt, want.EndedAt, want.RetryAt
	got.CostUSD, want.CostUSD = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func costString(c *float64) string {
	if c == nil {
		return "nil"
	}
	return fmt.Sprintf("%v", *c)
}

func checkEvent(t *testing.T, got, want stratus.OutputEvent) {
	t.Helper()
	what := fmt.Sprintf("output %s/%d#%d", want.TID, want.Attempt, want.Seq)
	checkTime(t, what+" At", got.At, want.At)
	checkBody(t, what, got.Body, want.Body)
	got.At, got.Body, want.Body = want.At, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// checkBody compares bodies byte for byte (nil and empty are both empty)
// and reports where they differ rather than printing a megabyte.
func checkBody(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Errorf("%s Body differs at byte %d: got %d bytes, want %d", what, i, len(got), len(want))
}

func checkHandle(t *testing.T, got, want stratus.Handle) {
	t.Helper()
	checkTime(t, "handle "+want.Handle+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	got.ExpiresAt = want.ExpiresAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("handle:\n got %+v\nwant %+v", got, want)
	}
}

// concurrently runs fn(i) for i in 0..n-1 on n goroutines released at
// once, to make conditional writes race.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// oneWins checks that exactly one of errs is nil and every other one is
// ECONFLICT.
func oneWins(t *testing.T, what string, errs []error) {
	t.Helper()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		wantCode(t, fmt.Sprintf("%s, writer %d", what, i), err, stratus.ECONFLICT)
	}
	if ok != 1 {
		t.Errorf("%s: %d of %d concurrent writers succeeded, want exactly 1", what, ok, len(errs))
	}
}
