package embedded

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// reviewLoop is shaped like what the compiler emits for an evaluator node
// with a bounded rework loop: dispatch through SQS with a task token,
// route on the outcome, count rework visits against a budget.
const reviewLoop = `{"StartAt":"init","States":{
 "init":{"Type":"Pass","Result":{"review_fix":0},"ResultPath":"$.loops","Next":"review"},
 "review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken","Parameters":{"QueueUrl":"${DispatchQueueUrl}","MessageBody":{"run_id.$":"$.run_id","node":"review","kind":"evaluator","task_token.$":"$$.Task.Token"}},"ResultPath":"$.last","TimeoutSeconds":900,"HeartbeatSeconds":300,"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"failed"}],"Next":"review.route"},
 "review.route":{"Type":"Choice","Choices":[{"Variable":"$.last.outcome","StringEquals":"accept","Next":"done"},{"Variable":"$.last.outcome","StringEquals":"rework","Next":"review_fix.budget"}],"Default":"manual_action_required"},
 "review_fix.budget":{"Type":"Choice","Choices":[{"Variable":"$.loops.review_fix","NumericGreaterThanEquals":2,"Next":"manual_action_required"}],"Default":"review_fix.count"},
 "review_fix.count":{"Type":"Pass","Parameters":{"review_fix.$":"States.MathAdd($.loops.review_fix, 1)"},"ResultPath":"$.loops","Next":"review"},
 "done":{"Type":"Succeed"},
 "failed":{"Type":"Fail","Error":"stratus.Failed","Cause":"a step failed"},
 "manual_action_required":{"Type":"Fail","Error":"stratus.ManualActionRequired","Cause":"a budget ran out or a gate could not decide"}}}`

// dispatched is the SQS message the review state sends.
type dispatched struct {
	QueueURL    string `json:"QueueUrl"`
	MessageBody struct {
		RunID     string `json:"run_id"`
		Node      string `json:"node"`
		Kind      string `json:"kind"`
		TaskToken string `json:"task_token"`
	}
}

func (b *bundle) dispatch(t *testing.T) dispatched {
	t.Helper()
	c := b.call(t)
	var d dispatched
	if err := json.Unmarshal(c.Parameters, &d); err != nil {
		t.Fatalf("parameters %s: %v", c.Parameters, err)
	}
	if d.MessageBody.TaskToken == "" || d.MessageBody.TaskToken != c.Token {
		t.Fatalf("task_token %q, call token %q", d.MessageBody.TaskToken, c.Token)
	}
	if c.Resource != "arn:aws:states:::sqs:sendMessage.waitForTaskToken" || c.State != "review" {
		t.Fatalf("call %+v", c)
	}
	return d
}

// The compiler's review loop, end to end, one row per way through it.
func TestEndToEnd_ReviewLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name     string
		outcomes []string // what the evaluator answers, visit by visit
		status   string
		errName  string
		output   string // when SUCCEEDED
		states   []string
	}{
		{
			name: "accept first time", outcomes: []string{"accept"}, status: executor.StatusSucceeded,
			output: `{"run_id":"r-1","loops":{"review_fix":0},"last":{"outcome":"accept"}}`,
			states: []string{"init", "review", "review.route", "done"},
		},
		{
			name: "one rework then accept", outcomes: []string{"rework", "accept"}, status: executor.StatusSucceeded,
			output: `{"run_id":"r-1","loops":{"review_fix":1},"last":{"outcome":"accept"}}`,
			states: []string{"init", "review", "review.route", "review_fix.budget", "review_fix.count", "review", "review.route", "done"},
		},
		{
			name: "budget runs out", outcomes: []string{"rework", "rework", "rework"}, status: executor.StatusFailed, errName: "stratus.ManualActionRequired",
			states: []string{"init", "review", "review.route", "review_fix.budget", "review_fix.count", "review", "review.route", "review_fix.budget", "review_fix.count", "review", "review.route", "review_fix.budget", "manual_action_required"},
		},
		{
			name: "unknown outcome goes to Default", outcomes: []string{"maybe"}, status: executor.StatusFailed, errName: "stratus.ManualActionRequired",
			states: []string{"init", "review", "review.route", "manual_action_required"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, reviewLoop, `{"run_id":"r-1"}`)
			tokens := map[string]bool{}
			for _, o := range tc.outcomes {
				d := b.dispatch(t)
				if d.QueueURL != "https://sqs.local/000000000000/dispatch" || d.MessageBody.RunID != "r-1" || d.MessageBody.Node != "review" || d.MessageBody.Kind != "evaluator" {
					t.Fatalf("dispatched %+v", d)
				}
				if tokens[d.MessageBody.TaskToken] {
					t.Fatal("a task token was reused across visits")
				}
				tokens[d.MessageBody.TaskToken] = true
				if err := b.exec.SendTaskSuccess(ctx, d.MessageBody.TaskToken, json.RawMessage(`{"outcome":"`+o+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			got := b.wait(t, x.ARN)
			if got.Status != tc.status || got.Error != tc.errName {
				t.Fatalf("status %s error %q cause %q, want %s %q", got.Status, got.Error, got.Cause, tc.status, tc.errName)
			}
			if tc.output != "" && !asl.Equal(asl.MustDecode(string(got.Output)), asl.MustDecode(tc.output)) {
				t.Errorf("output %s, want %s", got.Output, tc.output)
			}
			if states := entered(b.exec.History(x.ARN)); !reflect.DeepEqual(states, tc.states) {
				t.Errorf("states %v\nwant   %v", states, tc.states)
			}
		})
	}
}

// entered lists the states an execution entered, in order.
func entered(h []executor.HistoryEvent) []string {
	var out []string
	for _, ev := range h {
		if ev.IsStateEntered() {
			out = append(out, ev.State)
		}
	}
	return out
}

// A worker's SendTaskFailure, a heartbeat lapse and a timeout are caught
// by the review state's Catch: the error lands in $.error and the run
// ends in "failed".
func TestEndToEnd_ReviewLoopCatches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		act     func(t *testing.T, b *bundle, token string)
		errName string
	}{
		{"worker failure", func(t *testing.T, b *bundle, token string) {
			if err := b.exec.SendTaskFailure(context.Background(), token, "worker.Crashed", "exit 3"); err != nil {
				t.Fatal(err)
			}
		}, "worker.Crashed"},
		{"heartbeat lapse", func(t *testing.T, b *bundle, token string) {
			b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 2 })
			b.clock.Advance(300 * time.Second)
		}, asl.ErrHeartbeatTimeout},
		{"timeout despite heartbeats", func(t *testing.T, b *bundle, token string) {
			b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 2 })
			for i := 0; i < 3; i++ { // heartbeats every 250 s keep it alive...
				b.clock.Advance(250 * time.Second)
				if err := b.exec.SendTaskHeartbeat(context.Background(), token); err != nil {
					t.Fatalf("heartbeat %d: %v", i, err)
				}
			}
			b.clock.Advance(150 * time.Second) // ...until TimeoutSeconds (900 s)
		}, asl.ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, reviewLoop, `{"run_id":"r-2"}`)
			d := b.dispatch(t)
			tc.act(t, b, d.MessageBody.TaskToken)
			got := b.wait(t, x.ARN)
			if got.Status != executor.StatusFailed || got.Error != "stratus.Failed" || got.Cause != "a step failed" {
				t.Fatalf("got %s %q %q", got.Status, got.Error, got.Cause)
			}
			h := b.exec.History(x.ARN)
			var failIn asl.Value
			for _, ev := range h {
				if ev.Type == executor.EventFailStateEntered {
					failIn = asl.MustDecode(string(ev.Input))
				}
			}
			errObj, ok := mustGet(t, failIn, "$.error").(*asl.Object)
			if !ok {
				t.Fatalf("failed state input %s has no $.error object", asl.EncodeString(failIn))
			}
			if name, _ := errObj.Get("Error"); name != tc.errName {
				t.Errorf("$.error.Error = %v, want %s", name, tc.errName)
			}
			if cause, _ := errObj.Get("Cause"); tc.errName != "worker.Crashed" && cause != "" {
				t.Errorf("$.error.Cause = %q; AWS's timeouts have no cause", cause)
			}
			if runID := mustGet(t, failIn, "$.run_id"); runID != "r-2" {
				t.Errorf("$.run_id = %v; the catcher's ResultPath must keep the input", runID)
			}
			if entered(h)[2] != "failed" {
				t.Errorf("states %v", entered(h))
			}
			if err := b.exec.SendTaskSuccess(context.Background(), d.MessageBody.TaskToken, json.RawMessage(`{}`)); executor.APIErrorName(err) != executor.ErrTaskTimedOut {
				t.Errorf("token after the state failed: %v, want TaskTimedOut", err)
			}
		})
	}
}

func mustGet(t *testing.T, v asl.Value, path string) asl.Value {
	t.Helper()
	p, err := asl.ParsePath(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p.Get(v, nil)
	return got
}

// The history reads like the flow and has AWS's event types and order.
func TestEndToEnd_History(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	x := b.start(t, reviewLoop, `{"run_id":"r-3"}`)
	d := b.dispatch(t)
	b.waitEvent(t, x.ARN, executor.EventTaskSubmitted)
	if err := b.exec.SendTaskSuccess(context.Background(), d.MessageBody.TaskToken, json.RawMessage(`{"outcome":"accept"}`)); err != nil {
		t.Fatal(err)
	}
	b.wait(t, x.ARN)
	h := b.exec.History(x.ARN)
	want := []string{
		"ExecutionStarted",
		"PassStateEntered(init)", "PassStateExited(init)",
		"TaskStateEntered(review)", "TaskScheduled(review)", "TaskStarted(review)", "TaskSubmitted(review)", "TaskSucceeded(review)", "TaskStateExited(review)",
		"ChoiceStateEntered(review.route)", "ChoiceStateExited(review.route)",
		"SucceedStateEntered(done)", "SucceedStateExited(done)",
		"ExecutionSucceeded",
	}
	if got := types(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("history\n%v\nwant\n%v", got, want)
	}
	for i, ev := range h {
		if ev.ID != int64(i+1) || ev.Timestamp.IsZero() {
			t.Errorf("event %d: id %d, time %v", i, ev.ID, ev.Timestamp)
		}
	}
	if got := string(h[0].Input); got != `{"run_id":"r-3"}` {
		t.Errorf("ExecutionStarted input %s", got)
	}
	if got := string(h[2].Output); got != `{"run_id":"r-3","loops":{"review_fix":0}}` {
		t.Errorf("init output %s", got)
	}
	sched := h[4]
	if sched.Resource != "arn:aws:states:::sqs:sendMessage.waitForTaskToken" || !strings.Contains(string(sched.Input), `"QueueUrl":"https://sqs.local/000000000000/dispatch"`) {
		t.Errorf("TaskScheduled %+v", sched)
	}
	if got := string(h[7].Output); got != `{"outcome":"accept"}` {
		t.Errorf("TaskSucceeded output %s", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !reflect.DeepEqual(types(b.events), want) {
		t.Errorf("OnEvent saw %v", types(b.events))
	}
}
