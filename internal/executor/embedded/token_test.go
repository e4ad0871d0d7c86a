package embedded

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// callback is one .waitForTaskToken state; extra is spliced into it. A
// Catch in extra may go to "caught".
func callback(extra string) string {
	caught := ""
	if strings.Contains(extra, `"caught"`) {
		caught = `,"caught":{"Type":"Pass","End":true}`
	}
	return `{"StartAt":"wait","States":{
		"wait":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
			"Parameters":{"QueueUrl":"q","MessageBody":{"token.$":"$$.Task.Token"}},
			"ResultPath":"$.result"` + extra + `,"Next":"done"},
		"done":{"Type":"Succeed"}` + caught + `}}`
}

// AWS developer guide § Wait for a Callback with Task Token: the state
// waits for SendTaskSuccess (result: its output) or SendTaskFailure (an
// error with the given name, for Retry and Catch).
func TestTaskToken_SuccessAndFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("success", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		x := b.start(t, callback(""), `{"in":1}`)
		c := b.call(t)
		if err := b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`{"v":[1,2.50]}`)); err != nil {
			t.Fatal(err)
		}
		got := b.wait(t, x.ARN)
		if got.Status != executor.StatusSucceeded || string(got.Output) != `{"in":1,"result":{"v":[1,2.50]}}` {
			t.Fatalf("%s %s", got.Status, got.Output)
		}
	})
	t.Run("failure caught by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		def := strings.Replace(callback(`,"Catch":[{"ErrorEquals":["other"],"Next":"done"},{"ErrorEquals":["worker.Rejected"],"ResultPath":"$.err","Next":"caught"}]`), `"Parameters"`, `"Comment":"x","Parameters"`, 1)
		x := b.start(t, def, `{"in":1}`)
		c := b.call(t)
		if err := b.exec.SendTaskFailure(ctx, c.Token, "worker.Rejected", "no"); err != nil {
			t.Fatal(err)
		}
		got := b.wait(t, x.ARN)
		if got.Status != executor.StatusSucceeded || string(got.Output) != `{"in":1,"err":{"Error":"worker.Rejected","Cause":"no"}}` {
			t.Fatalf("%s %s", got.Status, got.Output)
		}
		if s := entered(b.exec.History(x.ARN)); s[len(s)-1] != "caught" {
			t.Errorf("states %v", s)
		}
	})
	t.Run("failure uncaught", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		x := b.start(t, callback(""), `{}`)
		c := b.call(t)
		if err := b.exec.SendTaskFailure(ctx, c.Token, "worker.Rejected", "no"); err != nil {
			t.Fatal(err)
		}
		got := b.wait(t, x.ARN)
		if got.Status != executor.StatusFailed || got.Error != "worker.Rejected" || got.Cause != "no" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("completion before the handler returns", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		var b *bundle
		b = setup(t, map[string]TaskHandler{"arn:aws:states:::sqs:sendMessage": func(_ context.Context, c TaskCall) (json.RawMessage, error) {
			if err := b.exec.SendTaskSuccess(context.Background(), c.Token, json.RawMessage(`"early"`)); err != nil {
				return nil, err
			}
			<-release
			return json.RawMessage(`{}`), nil
		}})
		x := b.start(t, callback(""), `{}`)
		close(release)
		if got := b.wait(t, x.ARN); got.Status != executor.StatusSucceeded || string(got.Output) != `{"result":"early"}` {
			t.Fatalf("%s %s", got.Status, got.Output)
		}
		if ty := types(b.exec.History(x.ARN)); !strings.Contains(strings.Join(ty, " "), "TaskSubmitted(wait) TaskSucceeded(wait)") {
			t.Errorf("history %v", ty)
		}
	})
	t.Run("handler error fails the state", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]TaskHandler{"arn:aws:states:::sqs:sendMessage": func(context.Context, TaskCall) (json.RawMessage, error) {
			return nil, TaskError{Name: "SQS.QueueDoesNotExist", Cause: "gone"}
		}})
		x := b.start(t, callback(""), `{}`)
		if got := b.wait(t, x.ARN); got.Error != "SQS.QueueDoesNotExist" || got.Cause != "gone" {
			t.Fatalf("%+v", got)
		}
	})
}

// A token is single-use, dies with its state, and belongs to this
// executor: the errors are AWS's names, as *stratus.Error.
func TestTaskToken_Errors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	x := b.start(t, callback(`,"TimeoutSeconds":60`), `{}`)
	c := b.call(t)

	check := func(what string, err error, name, code string) {
		t.Helper()
		if executor.APIErrorName(err) != name || stratus.ErrorCode(err) != code {
			t.Errorf("%s: %v (name %q, code %q), want %s / %s", what, err, executor.APIErrorName(err), stratus.ErrorCode(err), name, code)
		}
	}
	check("invalid output", b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`{nope`)), executor.ErrInvalidOutput, stratus.EINVALID)
	check("malformed token", b.exec.SendTaskSuccess(ctx, "garbage", json.RawMessage(`{}`)), executor.ErrInvalidToken, stratus.EINVALID)
	check("unknown token", b.exec.SendTaskHeartbeat(ctx, tokenPrefix+strings.Repeat("A", 32)), executor.ErrTaskDoesNotExist, stratus.ENOTFOUND)
	if err := b.exec.SendTaskHeartbeat(ctx, c.Token); err != nil {
		t.Fatalf("heartbeat on an open token: %v", err)
	}
	if err := b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	check("second success", b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`2`)), executor.ErrTaskTimedOut, stratus.ECONFLICT)
	check("failure after success", b.exec.SendTaskFailure(ctx, c.Token, "e", "c"), executor.ErrTaskTimedOut, stratus.ECONFLICT)
	check("heartbeat after success", b.exec.SendTaskHeartbeat(ctx, c.Token), executor.ErrTaskTimedOut, stratus.ECONFLICT)
	if got := b.wait(t, x.ARN); string(got.Output) != `{"result":1}` {
		t.Fatalf("output %s", got.Output)
	}

	// A timed-out task's token.
	x = b.start(t, callback(`,"TimeoutSeconds":60`), `{}`)
	c = b.call(t)
	b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 && p[0] == 60*time.Second })
	b.clock.Advance(60 * time.Second)
	if got := b.wait(t, x.ARN); got.Error != asl.ErrTimeout {
		t.Fatalf("%+v", got)
	}
	check("token after timeout", b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`{}`)), executor.ErrTaskTimedOut, stratus.ECONFLICT)

	// A stopped execution's token.
	x = b.start(t, callback(""), `{}`)
	c = b.call(t)
	if err := b.exec.StopExecution(ctx, x.ARN, "user.Stop", "enough"); err != nil {
		t.Fatal(err)
	}
	check("token after stop", b.exec.SendTaskSuccess(ctx, c.Token, json.RawMessage(`{}`)), executor.ErrTaskTimedOut, stratus.ECONFLICT)
}

// HeartbeatSeconds: each SendTaskHeartbeat restarts the clock; a lapse is
// States.HeartbeatTimeout. TimeoutSeconds: States.Timeout regardless of
// heartbeats. Both are TaskTimedOut events.
func TestTaskToken_Timeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name      string
		beats     []time.Duration // advance, then heartbeat, for each
		finally   time.Duration
		wantError string
	}{
		{"heartbeat lapse", nil, 30 * time.Second, asl.ErrHeartbeatTimeout},
		{"heartbeats postpone the lapse", []time.Duration{29 * time.Second, 29 * time.Second}, 30 * time.Second, asl.ErrHeartbeatTimeout},
		{"timeout despite heartbeats", []time.Duration{25 * time.Second, 25 * time.Second, 25 * time.Second}, 25 * time.Second, asl.ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, callback(`,"TimeoutSeconds":100,"HeartbeatSeconds":30`), `{}`)
			c := b.call(t)
			b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 2 })
			var elapsed time.Duration
			for i, d := range tc.beats {
				b.clock.Advance(d)
				elapsed += d
				if err := b.exec.SendTaskHeartbeat(ctx, c.Token); err != nil {
					t.Fatalf("heartbeat %d at %v: %v", i, elapsed, err)
				}
			}
			// Let the interpreter re-arm its heartbeat timer before moving on.
			b.clock.waitPending(t, func(p []time.Duration) bool {
				return len(p) == 2 && p[0] > 0 && p[0] <= 30*time.Second
			})
			b.clock.Advance(tc.finally)
			got := b.wait(t, x.ARN)
			if got.Status != executor.StatusFailed || got.Error != tc.wantError {
				t.Fatalf("%s %s %s", got.Status, got.Error, got.Cause)
			}
			ev := b.waitEvent(t, x.ARN, executor.EventTaskTimedOut)
			if ev.Error != tc.wantError || ev.State != "wait" {
				t.Errorf("TaskTimedOut %+v", ev)
			}
		})
	}
}

// A retried callback state gets a new token for each attempt; the old
// one is dead (moto reuses tokens here; AWS does not).
func TestTaskToken_RetryGetsNewToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	x := b.start(t, callback(`,"Retry":[{"ErrorEquals":["worker.Flaky"],"IntervalSeconds":2}]`), `{}`)
	first := b.call(t)
	if err := b.exec.SendTaskFailure(ctx, first.Token, "worker.Flaky", ""); err != nil {
		t.Fatal(err)
	}
	b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 && p[0] == 2*time.Second })
	b.clock.Advance(2 * time.Second)
	second := b.call(t)
	if second.Token == first.Token || second.RetryCount != 1 || first.RetryCount != 0 {
		t.Fatalf("tokens %q then %q, retry counts %d then %d", first.Token, second.Token, first.RetryCount, second.RetryCount)
	}
	if !strings.Contains(string(second.Parameters), second.Token) {
		t.Errorf("parameters %s do not carry the new token", second.Parameters)
	}
	if err := b.exec.SendTaskSuccess(ctx, first.Token, json.RawMessage(`{}`)); executor.APIErrorName(err) != executor.ErrTaskTimedOut {
		t.Errorf("old token: %v", err)
	}
	if err := b.exec.SendTaskSuccess(ctx, second.Token, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if got := b.wait(t, x.ARN); string(got.Output) != `{"result":"ok"}` {
		t.Fatalf("%+v", got)
	}
}
