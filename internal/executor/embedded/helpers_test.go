package embedded

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/executor"
)

// fakeClock is a Clock that moves only when a test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is added
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	if d <= 0 {
		t.fired = true
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	return true
}

// Advance moves the clock and runs the timers that fall due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped || t.fired:
		case !t.at.After(c.now):
			t.fired = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// pending returns the time left on each live timer, soonest first.
func (c *fakeClock) pending() ([]time.Duration, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			out = append(out, t.at.Sub(c.now))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, c.changed
}

// waitPending blocks until ok accepts the pending timers, or fails the
// test after a deadline.
func (c *fakeClock) waitPending(t *testing.T, ok func([]time.Duration) bool) []time.Duration {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		p, changed := c.pending()
		if ok(p) {
			return p
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for timers; pending %v", p)
		case <-time.After(5 * time.Millisecond): // a timer stopped: re-check
		}
	}
}

// bundle is what most tests need: an executor with a fake clock and
// handlers that report their calls.
type bundle struct {
	exec  *Executor
	clock *fakeClock
	calls chan TaskCall // every handler call, in order

	mu     sync.Mutex
	events []executor.HistoryEvent // from OnEvent
}

// setup builds a bundle. Handlers registered by default:
//   - "arn:aws:states:::sqs:sendMessage": records the call, returns a
//     SendMessage-like response (for .waitForTaskToken states);
//   - "arn:aws:lambda:local:0:function:echo": returns its Parameters;
//   - "arn:aws:lambda:local:0:function:block": waits for ctx to end.
//
// extra handlers are added or replace those.
func setup(t *testing.T, extra map[string]TaskHandler) *bundle {
	t.Helper()
	b := &bundle{clock: newFakeClock(), calls: make(chan TaskCall, 100)}
	resources := map[string]TaskHandler{
		"arn:aws:states:::sqs:sendMessage": func(_ context.Context, c TaskCall) (json.RawMessage, error) {
			b.calls <- c
			return json.RawMessage(`{"MessageId":"m-1"}`), nil
		},
		"arn:aws:lambda:local:0:function:echo": func(_ context.Context, c TaskCall) (json.RawMessage, error) {
			b.calls <- c
			return c.Parameters, nil
		},
		"arn:aws:lambda:local:0:function:block": func(ctx context.Context, c TaskCall) (json.RawMessage, error) {
			b.calls <- c
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	for k, h := range extra {
		resources[k] = h
	}
	b.exec = New(Options{
		Resources:     resources,
		Substitutions: map[string]string{"DispatchQueueUrl": "https://sqs.local/000000000000/dispatch"},
		Clock:         b.clock,
		OnEvent: func(ev executor.HistoryEvent) {
			b.mu.Lock()
			b.events = append(b.events, ev)
			b.mu.Unlock()
		},
	})
	return b
}

var startSeq struct {
	sync.Mutex
	n int
}

// start starts an execution of def with input and a fresh name, and stops
// it when the test ends if it is still running.
func (b *bundle) start(t *testing.T, def, input string) executor.Execution {
	t.Helper()
	startSeq.Lock()
	startSeq.n++
	name := t.Name()
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	name = sanitize(name) + "-" + strconv.Itoa(startSeq.n)
	startSeq.Unlock()
	x, err := b.exec.StartExecution(context.Background(), executor.StartInput{StateMachine: "sm", Definition: []byte(def), Name: name, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("StartExecution: %v", err)
	}
	t.Cleanup(func() { _ = b.exec.StopExecution(context.Background(), x.ARN, "test.Cleanup", "") })
	return x
}

// sanitize makes a test name a valid execution name.
func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if checkName("", string(r)) != nil {
			r = '_'
		}
		out = append(out, r)
	}
	return string(out)
}

// wait waits for the execution to close, failing the test after a deadline.
func (b *bundle) wait(t *testing.T, arn string) executor.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	x, err := b.exec.WaitExecution(ctx, arn)
	if err != nil {
		t.Fatalf("WaitExecution: %v (status %s, history %v)", err, x.Status, types(b.exec.History(arn)))
	}
	return x
}

// call returns the next handler call, failing the test after a deadline.
func (b *bundle) call(t *testing.T) TaskCall {
	t.Helper()
	select {
	case c := <-b.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a handler call")
	}
	return TaskCall{}
}

// types lists the event types of a history, "Type(State)" for state events.
func types(h []executor.HistoryEvent) []string {
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.Type
		if ev.State != "" {
			out[i] += "(" + ev.State + ")"
		}
	}
	return out
}

// waitEvent waits until the execution's history has an event of typ.
func (b *bundle) waitEvent(t *testing.T, arn, typ string) executor.HistoryEvent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range b.exec.History(arn) {
			if ev.Type == typ {
				return ev
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no %s event; history %v", typ, types(b.exec.History(arn)))
	return executor.HistoryEvent{}
}
