package embedded

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// waitDef is one Wait state with the given fields, then a Succeed.
func waitDef(fields string) string {
	return `{"StartAt":"w","States":{"w":{"Type":"Wait",` + fields + `,"Next":"done"},"done":{"Type":"Succeed"}}}`
}

// developer guide § Wait workflow state: the state waits the time it
// names — Seconds, a Timestamp, or either read from its input after
// InputPath — then passes its input on through OutputPath; a time
// already past does not wait. The history names it as Step Functions
// does: WaitStateEntered, WaitStateExited.
func TestWait_WaitsTheTimeItNames(t *testing.T) {
	t.Parallel()
	// The fake clock starts at 2025-06-01T12:00:00Z.
	cases := []struct {
		name, fields, input string
		wait                time.Duration // 0: no timer
		output              string
	}{
		{"Seconds", `"Seconds":90`, `{"a":1}`, 90 * time.Second, `{"a":1}`},
		{"SecondsPath", `"SecondsPath":"$.wait.s"`, `{"wait":{"s":30},"a":1}`, 30 * time.Second, `{"wait":{"s":30},"a":1}`},
		{"SecondsPath after InputPath", `"InputPath":"$.wait","SecondsPath":"$.s"`, `{"wait":{"s":7},"a":1}`, 7 * time.Second, `{"s":7}`},
		{"OutputPath", `"Seconds":5,"OutputPath":"$.a"`, `{"a":{"b":2}}`, 5 * time.Second, `{"b":2}`},
		{"Timestamp", `"Timestamp":"2025-06-01T12:05:00Z"`, `{}`, 5 * time.Minute, `{}`},
		{"TimestampPath", `"TimestampPath":"$.at"`, `{"at":"2025-06-01T13:00:00.5Z"}`, time.Hour, `{"at":"2025-06-01T13:00:00.5Z"}`},
		{"Seconds 0", `"Seconds":0`, `{}`, 0, `{}`},
		{"a timestamp already past", `"Timestamp":"2025-06-01T11:00:00Z"`, `{}`, 0, `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, waitDef(tc.fields), tc.input)
			if tc.wait > 0 {
				p := b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
				if p[0] != tc.wait {
					t.Errorf("waits %v, want %v", p[0], tc.wait)
				}
				if got := types(b.exec.History(x.ARN)); got[len(got)-1] != "WaitStateEntered(w)" {
					t.Errorf("before the time: history %v", got)
				}
				b.clock.Advance(tc.wait - time.Second)
				if d, _ := b.exec.DescribeExecution(context.Background(), x.ARN); d.Status != executor.StatusRunning {
					t.Fatalf("ended a second early: %s", d.Status)
				}
				b.clock.Advance(time.Second)
			}
			got := b.wait(t, x.ARN)
			if got.Status != executor.StatusSucceeded || string(got.Output) != tc.output {
				t.Fatalf("%s %s %s, want output %s", got.Status, got.Error, got.Output, tc.output)
			}
			want := []string{"ExecutionStarted", "WaitStateEntered(w)", "WaitStateExited(w)", "SucceedStateEntered(done)", "SucceedStateExited(done)", "ExecutionSucceeded"}
			if h := types(b.exec.History(x.ARN)); !slices.Equal(h, want) {
				t.Errorf("history %v\nwant    %v", h, want)
			}
			if p, _ := b.clock.pending(); len(p) != 0 {
				t.Errorf("timers left: %v", p)
			}
		})
	}
}

// A stopped execution, or one whose TimeoutSeconds ends, stops waiting at
// once: nothing runs after the Wait, and its timer is gone.
func TestWait_ClosingTheExecutionEndsTheWaitAtOnce(t *testing.T) {
	t.Parallel()
	def := `{"StartAt":"w","TimeoutSeconds":3600,"States":{"w":{"Type":"Wait","Seconds":99999999,"Next":"t"},"t":{"Type":"Task","Resource":"arn:aws:lambda:local:0:function:echo","End":true}}}`
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		x := b.start(t, def, `{}`)
		b.clock.waitPending(t, func(p []time.Duration) bool { return slices.Contains(p, 99999999*time.Second) })
		if err := b.exec.StopExecution(context.Background(), x.ARN, "stratus.Cancelled", "the operator cancelled"); err != nil {
			t.Fatal(err)
		}
		got := b.wait(t, x.ARN)
		if got.Status != executor.StatusAborted || got.Error != "stratus.Cancelled" {
			t.Fatalf("%+v", got)
		}
		b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 0 })
		for _, ev := range b.exec.History(x.ARN) {
			if ev.Type == executor.EventWaitStateExited || ev.State == "t" {
				t.Errorf("ran past the wait: %v", types(b.exec.History(x.ARN)))
			}
		}
	})
	t.Run("execution timeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		x := b.start(t, def, `{}`)
		b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 2 })
		b.clock.Advance(time.Hour)
		if got := b.wait(t, x.ARN); got.Status != executor.StatusTimedOut {
			t.Fatalf("%+v", got)
		}
		b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 0 })
		select {
		case c := <-b.calls:
			t.Errorf("the task after the wait ran: %+v", c)
		default:
		}
	})
}

// A Wait whose SecondsPath or TimestampPath reads a bad value fails the
// execution with States.Runtime, which no Retry or Catch sees (developer
// guide § Error names).
func TestWait_BadPathValueIsStatesRuntime(t *testing.T) {
	t.Parallel()
	cases := []struct{ fields, input, cause string }{
		{`"SecondsPath":"$.s"`, `{"s":-5}`, "The SecondsPath parameter references a negative value: $.s == -5"},
		{`"SecondsPath":"$.s"`, `{"s":"ten"}`, "The SecondsPath parameter cannot be parsed as a long value: $.s == ten"},
		{`"SecondsPath":"$.s"`, `{}`, "The SecondsPath parameter does not reference an input value: $.s"},
		{`"TimestampPath":"$.at"`, `{"at":"noon"}`, "The TimestampPath parameter does not reference a valid ISO-8601 extended offset date-time format string: $.at == noon"},
	}
	for _, tc := range cases {
		t.Run(tc.cause, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, waitDef(tc.fields), tc.input)
			got := b.wait(t, x.ARN)
			if got.Status != executor.StatusFailed || got.Error != asl.ErrRuntime || got.Cause != tc.cause {
				t.Fatalf("%s %q %q\nwant States.Runtime %q", got.Status, got.Error, got.Cause, tc.cause)
			}
		})
	}
}
