package embedded

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// failing returns a handler that fails with the given error names in
// turn (the last repeats) and counts its calls; "" succeeds with {"ok":n}.
func failing(names ...string) (TaskHandler, func() int) {
	var mu sync.Mutex
	n := 0
	h := func(context.Context, TaskCall) (json.RawMessage, error) {
		mu.Lock()
		defer mu.Unlock()
		name := names[min(n, len(names)-1)]
		n++
		if name == "" {
			return json.RawMessage(`{"ok":` + jsonNumber(n) + `}`), nil
		}
		return nil, TaskError{Name: name, Cause: "attempt " + jsonNumber(n)}
	}
	return h, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

const flaky = "arn:aws:lambda:local:0:function:flaky"

// retryDef is one request-response Task with the given Retry and Catch.
func retryDef(retry, catch string) string {
	extra := ""
	if strings.Contains(catch, `"recover"`) {
		extra = `,"recover":{"Type":"Pass","End":true}`
	}
	return `{"StartAt":"work","States":{
		"work":{"Type":"Task","Resource":"` + flaky + `","ResultPath":"$.r","Retry":` + retry + `,"Catch":` + catch + `,"Next":"done"},
		"done":{"Type":"Succeed"}` + extra + `}}`
}

// ASL spec § Retrying after error: the first Retrier whose ErrorEquals
// matches applies; it waits IntervalSeconds × BackoffRate^n (capped by
// MaxDelaySeconds) before each of at most MaxAttempts retries; then the
// error goes to Catch.
func TestRetry_BackoffCounting(t *testing.T) {
	t.Parallel()
	catchAll := `[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"recover"}]`
	cases := []struct {
		name    string
		retry   string
		errors  []string        // what the handler fails with, call by call
		delays  []time.Duration // the waits the executor asks for
		calls   int
		caught  string // the error the catcher sees; "" when it succeeds
		success bool
	}{
		{"defaults: 1s ×2, 3 attempts", `[{"ErrorEquals":["E"]}]`, []string{"E"},
			[]time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second}, 4, "E", false},
		{"interval and rate", `[{"ErrorEquals":["E"],"IntervalSeconds":3,"BackoffRate":1.5,"MaxAttempts":2}]`, []string{"E"},
			[]time.Duration{3 * time.Second, 4500 * time.Millisecond}, 3, "E", false},
		{"MaxDelaySeconds caps", `[{"ErrorEquals":["E"],"IntervalSeconds":2,"MaxAttempts":4,"MaxDelaySeconds":5}]`, []string{"E"},
			[]time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, 5, "E", false},
		{"MaxAttempts 0 never retries", `[{"ErrorEquals":["E"],"MaxAttempts":0},{"ErrorEquals":["States.ALL"]}]`, []string{"E"},
			nil, 1, "E", false},
		{"succeeds on a retry", `[{"ErrorEquals":["E"]}]`, []string{"E", "E", ""},
			[]time.Duration{1 * time.Second, 2 * time.Second}, 3, "", true},
		{"unmatched error is not retried", `[{"ErrorEquals":["Other"]}]`, []string{"E"},
			nil, 1, "E", false},
		{"each retrier counts its own attempts", `[{"ErrorEquals":["A"],"MaxAttempts":1},{"ErrorEquals":["B"],"MaxAttempts":1,"IntervalSeconds":7}]`, []string{"A", "B", "A"},
			[]time.Duration{1 * time.Second, 7 * time.Second}, 3, "A", false},
		{"States.TaskFailed matches task errors", `[{"ErrorEquals":["States.TaskFailed"],"MaxAttempts":1}]`, []string{"E"},
			[]time.Duration{1 * time.Second}, 2, "E", false},
		{"States.ALL retries anything", `[{"ErrorEquals":["X"]},{"ErrorEquals":["States.ALL"],"MaxAttempts":2,"BackoffRate":1}]`, []string{"E"},
			[]time.Duration{1 * time.Second, 1 * time.Second}, 3, "E", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, calls := failing(tc.errors...)
			b := setup(t, map[string]TaskHandler{flaky: h})
			x := b.start(t, retryDef(tc.retry, catchAll), `{"in":true}`)
			var delays []time.Duration
			for len(delays) < len(tc.delays) {
				p := b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
				delays = append(delays, p[0])
				b.clock.Advance(p[0])
			}
			got := b.wait(t, x.ARN)
			if !reflect.DeepEqual(delays, tc.delays) {
				t.Errorf("delays %v, want %v", delays, tc.delays)
			}
			if calls() != tc.calls {
				t.Errorf("%d calls, want %d", calls(), tc.calls)
			}
			out := asl.MustDecode(string(got.Output))
			if tc.success {
				if got.Status != executor.StatusSucceeded || mustGet(t, out, "$.r.ok") == nil {
					t.Fatalf("%s %s", got.Status, got.Output)
				}
				return
			}
			if e := mustGet(t, out, "$.error.Error"); e != tc.caught {
				t.Errorf("caught %v, want %s (output %s)", e, tc.caught, got.Output)
			}
			if in := mustGet(t, out, "$.in"); in != true {
				t.Errorf("catcher lost the input: %s", got.Output)
			}
		})
	}
}

// JitterStrategy FULL: each wait is random in [0, computed delay].
func TestRetry_FullJitter(t *testing.T) {
	t.Parallel()
	h, _ := failing("E")
	b := setup(t, map[string]TaskHandler{flaky: h})
	x := b.start(t, retryDef(`[{"ErrorEquals":["E"],"IntervalSeconds":10,"MaxAttempts":3,"JitterStrategy":"FULL"}]`, `[]`), `{}`)
	bounds := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}
	for i, bound := range bounds {
		var d time.Duration
		b.clock.waitPending(t, func(p []time.Duration) bool {
			if len(p) == 1 {
				d = p[0]
			}
			return len(p) == 1
		})
		if d < 0 || d > bound {
			t.Errorf("retry %d waits %v, want within [0, %v]", i, d, bound)
		}
		b.clock.Advance(d)
	}
	if got := b.wait(t, x.ARN); got.Status != executor.StatusFailed || got.Error != "E" {
		t.Fatalf("%+v", got)
	}
}

// ASL spec § Fallback states: the first Catcher that matches wins; its
// ResultPath places the error output into the state's raw input; an
// error no Catcher matches fails the execution.
func TestCatch_Routing(t *testing.T) {
	t.Parallel()
	def := func(catch string) string {
		return `{"StartAt":"work","States":{
		"work":{"Type":"Task","Resource":"` + flaky + `","InputPath":"$.sub","Catch":` + catch + `,"Next":"done"},
		"done":{"Type":"Succeed"},
		"a":{"Type":"Pass","End":true},
		"b":{"Type":"Pass","End":true}}}`
	}
	cases := []struct {
		name, catch, err string
		status, state    string
		output           string
	}{
		{"first match wins", `[{"ErrorEquals":["E"],"Next":"a"},{"ErrorEquals":["States.ALL"],"Next":"b"}]`, "E",
			executor.StatusSucceeded, "a", `{"Error":"E","Cause":"attempt 1"}`},
		{"later catcher", `[{"ErrorEquals":["X"],"Next":"a"},{"ErrorEquals":["E","Y"],"ResultPath":"$.err","Next":"b"}]`, "E",
			executor.StatusSucceeded, "b", `{"sub":{"k":1},"top":2,"err":{"Error":"E","Cause":"attempt 1"}}`},
		{"ResultPath null keeps the input", `[{"ErrorEquals":["X"],"Next":"b"},{"ErrorEquals":["States.ALL"],"ResultPath":null,"Next":"a"}]`, "E",
			executor.StatusSucceeded, "a", `{"sub":{"k":1},"top":2}`},
		{"States.TaskFailed", `[{"ErrorEquals":["States.TaskFailed"],"ResultPath":"$.e","Next":"a"},{"ErrorEquals":["States.ALL"],"Next":"b"}]`, "E",
			executor.StatusSucceeded, "a", `{"sub":{"k":1},"top":2,"e":{"Error":"E","Cause":"attempt 1"}}`},
		{"no match fails the execution", `[{"ErrorEquals":["X"],"Next":"a"},{"ErrorEquals":["Y"],"Next":"b"}]`, "E",
			executor.StatusFailed, "", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, _ := failing(tc.err)
			b := setup(t, map[string]TaskHandler{flaky: h})
			x := b.start(t, def(tc.catch), `{"sub":{"k":1},"top":2}`)
			got := b.wait(t, x.ARN)
			if got.Status != tc.status {
				t.Fatalf("status %s (%s %s), want %s", got.Status, got.Error, got.Cause, tc.status)
			}
			if tc.status == executor.StatusFailed {
				if got.Error != tc.err || got.Cause != "attempt 1" {
					t.Errorf("error %q cause %q", got.Error, got.Cause)
				}
				return
			}
			if s := entered(b.exec.History(x.ARN)); s[len(s)-1] != tc.state {
				t.Errorf("states %v, want to end in %s", s, tc.state)
			}
			if string(got.Output) != tc.output {
				t.Errorf("output %s, want %s", got.Output, tc.output)
			}
		})
	}
}

// States.Runtime is never retried nor caught, not even by States.ALL: a
// Parameters path that selects nothing, a Choice on a missing variable,
// an unknown resource.
func TestRuntimeErrors_AreNotCaught(t *testing.T) {
	t.Parallel()
	retryCatch := `"Retry":[{"ErrorEquals":["States.ALL"]}],"Catch":[{"ErrorEquals":["States.ALL"],"Next":"done"}]`
	cases := []struct {
		name, def, cause string
	}{
		{"Parameters path", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"` + flaky + `","Parameters":{"x.$":"$.missing"},` + retryCatch + `,"Next":"done"},"done":{"Type":"Succeed"}}}`,
			`The JSONPath '$.missing' specified for the field 'x.$' could not be found in the input '{"a":1}'`},
		{"unknown resource", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:aws:states:::nope:doIt",` + retryCatch + `,"Next":"done"},"done":{"Type":"Succeed"}}}`,
			`the resource "arn:aws:states:::nope:doIt" of state "t" has no handler in the embedded executor (resources are keyed without .waitForTaskToken/.sync)`},
		{"Choice on a missing variable", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.missing","StringEquals":"x","Next":"done"}],"Default":"done"},"done":{"Type":"Succeed"}}}`,
			`Invalid path '$.missing': The choice state's condition path references an invalid value.`},
		{"OutputPath", `{"StartAt":"p","States":{"p":{"Type":"Pass","OutputPath":"$.missing","Next":"done"},"done":{"Type":"Succeed"}}}`,
			`Invalid path '$.missing' : No results for path: $['missing']`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, calls := failing("")
			b := setup(t, map[string]TaskHandler{flaky: h})
			x := b.start(t, tc.def, `{"a":1}`)
			got := b.wait(t, x.ARN)
			if got.Status != executor.StatusFailed || got.Error != asl.ErrRuntime || got.Cause != tc.cause {
				t.Fatalf("%s %q %q\nwant cause %q", got.Status, got.Error, got.Cause, tc.cause)
			}
			if calls() != 0 {
				t.Errorf("handler called %d times", calls())
			}
			if p, _ := b.clock.pending(); len(p) != 0 {
				t.Errorf("timers pending after the failure: %v", p)
			}
		})
	}
}

// The developer guide's examples (§ Handling errors in Step Functions
// workflows), with their own intervals, waits checked on the fake clock:
//   - two retriers; a task failing ErrorA, ErrorB, ErrorC, ErrorB waits
//     1 s and 2 s (the first retrier), 5 s (the second), and the fourth
//     error, whose retrier is spent, is caught — a later States.ALL
//     retrier is not consulted; $$.State.RetryCount is 0, 1, 2, 3;
//   - a States.Timeout retrier (IntervalSeconds 3, MaxAttempts 2,
//     BackoffRate 1.5) retries a timed-out task after 3 s and 4.5 s;
//   - JitterStrategy FULL draws each wait from [0, the capped delay].
func TestRetry_DeveloperGuideExamples(t *testing.T) {
	t.Parallel()
	t.Run("two retriers, then Catch", func(t *testing.T) {
		t.Parallel()
		h, calls := failing("ErrorA", "ErrorB", "ErrorC", "ErrorB")
		var counts []int
		var mu sync.Mutex
		b := setup(t, map[string]TaskHandler{flaky: func(ctx context.Context, c TaskCall) (json.RawMessage, error) {
			var p struct{ RC int }
			json.Unmarshal(c.Parameters, &p)
			mu.Lock()
			counts = append(counts, c.RetryCount, p.RC)
			mu.Unlock()
			return h(ctx, c)
		}})
		def := `{"StartAt":"X","States":{
			"X":{"Type":"Task","Resource":"` + flaky + `","Parameters":{"RC.$":"$$.State.RetryCount"},"Next":"Y",
				"Retry":[{"ErrorEquals":["ErrorA","ErrorB"],"IntervalSeconds":1,"BackoffRate":2.0,"MaxAttempts":2},
					{"ErrorEquals":["ErrorC"],"IntervalSeconds":5},
					{"ErrorEquals":["States.ALL"],"MaxAttempts":9}],
				"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Z"}]},
			"Y":{"Type":"Succeed"},
			"Z":{"Type":"Pass","End":true}}}`
		x := b.start(t, def, `{}`)
		var delays []time.Duration
		for range 3 {
			p := b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
			delays = append(delays, p[0])
			b.clock.Advance(p[0])
		}
		got := b.wait(t, x.ARN)
		if want := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}; !reflect.DeepEqual(delays, want) {
			t.Errorf("waits %v, want %v", delays, want)
		}
		if calls() != 4 || got.Status != executor.StatusSucceeded || string(got.Output) != `{"Error":"ErrorB","Cause":"attempt 4"}` {
			t.Errorf("%d calls, %s %s", calls(), got.Status, got.Output)
		}
		if s := entered(b.exec.History(x.ARN)); strings.Join(s, " ") != "X Z" {
			t.Errorf("states %v", s)
		}
		if want := []int{0, 0, 1, 1, 2, 2, 3, 3}; !reflect.DeepEqual(counts, want) {
			t.Errorf("TaskCall.RetryCount and $$.State.RetryCount per attempt %v, want %v", counts, want)
		}
	})
	t.Run("States.Timeout retrier", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		x := b.start(t, `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:aws:lambda:local:0:function:block","TimeoutSeconds":10,"End":true,
			"Retry":[{"ErrorEquals":["States.Timeout"],"IntervalSeconds":3,"MaxAttempts":2,"BackoffRate":1.5}]}}}`, `{}`)
		var timers []time.Duration
		for range 5 {
			p := b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
			timers = append(timers, p[0])
			b.clock.Advance(p[0])
		}
		if want := []time.Duration{10 * time.Second, 3 * time.Second, 10 * time.Second, 4500 * time.Millisecond, 10 * time.Second}; !reflect.DeepEqual(timers, want) {
			t.Errorf("timers %v, want %v (timeout, wait, timeout, wait, timeout)", timers, want)
		}
		if got := b.wait(t, x.ARN); got.Status != executor.StatusFailed || got.Error != asl.ErrTimeout {
			t.Errorf("%+v", got)
		}
	})
	t.Run("FULL jitter under MaxDelaySeconds", func(t *testing.T) {
		t.Parallel()
		h, _ := failing("E")
		b := setup(t, map[string]TaskHandler{flaky: h})
		x := b.start(t, retryDef(`[{"ErrorEquals":["E"],"IntervalSeconds":4,"MaxAttempts":4,"MaxDelaySeconds":10,"JitterStrategy":"FULL"}]`, `[]`), `{}`)
		for i, bound := range []time.Duration{4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
			var d time.Duration
			b.clock.waitPending(t, func(p []time.Duration) bool {
				if len(p) == 1 {
					d = p[0]
				}
				return len(p) == 1
			})
			if d < 0 || d > bound {
				t.Errorf("retry %d waits %v, want within [0, %v]", i, d, bound)
			}
			b.clock.Advance(d)
		}
		if got := b.wait(t, x.ARN); got.Status != executor.StatusFailed || got.Error != "E" {
			t.Fatalf("%+v", got)
		}
	})
}

// A state entered again (a Catch that loops back, as the compiled park
// loop does) starts afresh: $$.State.RetryCount and every retrier's count
// are 0 again.
func TestRetry_CountsStartAfreshOnReentry(t *testing.T) {
	t.Parallel()
	h, calls := failing("E", "E", "Blocked", "E", "E", "")
	var counts []int
	var mu sync.Mutex
	b := setup(t, map[string]TaskHandler{flaky: func(ctx context.Context, c TaskCall) (json.RawMessage, error) {
		mu.Lock()
		counts = append(counts, c.RetryCount)
		mu.Unlock()
		return h(ctx, c)
	}})
	def := `{"StartAt":"work","States":{
		"work":{"Type":"Task","Resource":"` + flaky + `","ResultPath":"$.r","Next":"done",
			"Retry":[{"ErrorEquals":["E"],"IntervalSeconds":1,"MaxAttempts":2}],
			"Catch":[{"ErrorEquals":["Blocked"],"ResultPath":"$.last","Next":"again"}]},
		"again":{"Type":"Pass","Next":"work"},
		"done":{"Type":"Succeed"}}}`
	x := b.start(t, def, `{}`)
	for range 4 {
		p := b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
		b.clock.Advance(p[0])
	}
	if got := b.wait(t, x.ARN); got.Status != executor.StatusSucceeded {
		t.Fatalf("%+v", got)
	}
	if calls() != 6 || !reflect.DeepEqual(counts, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("%d calls with RetryCount %v, want 6 with 0 1 2 0 1 2", calls(), counts)
	}
}
