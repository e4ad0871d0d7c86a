// Package executortest is the conformance suite every executor.Executor
// must pass: the embedded interpreter in-process, and the Step Functions
// implementation against moto (docs/architecture.md § Testing
// stand-ins). It checks behaviour a caller can observe through the port —
// statuses, outputs, errors and their codes, task tokens — with the kind
// of state machine the compiler emits, and nothing implementation-specific
// (no history, no timers).
package executortest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
)

// MissingQueueSuffix makes, appended to Harness.QueueURL, the URL of a
// queue that does not exist: an sqs:sendMessage to it fails with
// SQS.SdkClientException (or SQS.AmazonSQSException), every time.
const MissingQueueSuffix = "-missing"

// Harness is what the suite needs from an implementation.
type Harness struct {
	Executor executor.Executor
	// StateMachine is what executions start under: an ARN on AWS.
	StateMachine string
	// QueueURL is the queue the suite's .waitForTaskToken states send to.
	QueueURL string
	// NextMessage returns the MessageBody of the next message sent to
	// QueueURL, waiting for it until ctx ends.
	NextMessage func(ctx context.Context) (json.RawMessage, error)
	// Quirks are the documented ways the implementation's backend differs
	// from AWS; the zero value is AWS's behaviour (and the embedded
	// executor's).
	Quirks Quirks
}

// Quirks a stand-in for AWS Step Functions may have. Each relaxes one
// assertion of the suite, exactly where the stand-in differs, and says so.
type Quirks struct {
	// SpentTokenInvalid: a token whose task already completed is answered
	// with InvalidToken (EINVALID) where AWS answers TaskTimedOut
	// (ECONFLICT). Both are final. (moto 5.2.1)
	SpentTokenInvalid bool
	// StopAwaitsCallback: StopExecution of an execution waiting on a task
	// token does not take effect until that token is completed (which then
	// succeeds, where AWS answers TaskTimedOut); the execution then ends
	// ABORTED. (moto 5.2.1)
	StopAwaitsCallback bool
	// RuntimeCausePrefixed: a States.Runtime failure's cause starts with
	// "An error occurred while executing the state 'NAME' (entered at
	// the event id #N). " (moto 5.2.1, as AWS words it; the embedded
	// executor gives the rest only).
	RuntimeCausePrefixed bool
}

// Run runs the suite; newHarness is called once per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"PassSucceeds", testPassSucceeds},
		{"FailState", testFailState},
		{"NamesAreUnique", testNamesAreUnique},
		{"UnknownExecution", testUnknownExecution},
		{"CallbackSuccess", testCallbackSuccess},
		{"CallbackFailureCaught", testCallbackFailureCaught},
		{"TokenErrors", testTokenErrors},
		{"StopExecution", testStopExecution},
		{"CatchSendsBeforeRouting", testCatchSendsBeforeRouting},
		{"HistoryReadsTheRun", testHistoryReadsTheRun},
		{"RetryPerRetrierThenCatch", testRetryPerRetrierThenCatch},
		{"RetryFirstMatchingRetrierOnly", testRetryFirstMatchingRetrierOnly},
		{"ParkLoopWaitsAndEntersAfresh", testParkLoopWaitsAndEntersAfresh},
		{"WaitBadSecondsPath", testWaitBadSecondsPath},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t))
		})
	}
}

var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), seq.Add(1))
}

func start(t *testing.T, h Harness, def, input string) executor.Execution {
	t.Helper()
	x, err := h.Executor.StartExecution(context.Background(), executor.StartInput{
		StateMachine: h.StateMachine, Definition: []byte(def), Name: uniqueName("conf"), Input: json.RawMessage(input),
	})
	if err != nil {
		t.Fatalf("StartExecution: %v", err)
	}
	t.Cleanup(func() { _ = h.Executor.StopExecution(context.Background(), x.ARN, "conformance.Cleanup", "") })
	return x
}

func wait(t *testing.T, h Harness, arn string) executor.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x, err := h.Executor.WaitExecution(ctx, arn)
	if err != nil {
		t.Fatalf("WaitExecution: %v (status %s)", err, x.Status)
	}
	return x
}

// sameJSON compares JSON texts by value (key order and spacing aside).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func testPassSucceeds(t *testing.T, h Harness) {
	def := `{"StartAt":"init","States":{
		"init":{"Type":"Pass","Result":{"review_fix":0},"ResultPath":"$.loops","Next":"count"},
		"count":{"Type":"Pass","Parameters":{"review_fix.$":"States.MathAdd($.loops.review_fix, 1)"},"ResultPath":"$.loops","Next":"done"},
		"done":{"Type":"Succeed"}}}`
	x := start(t, h, def, `{"run_id":"r"}`)
	got := wait(t, h, x.ARN)
	if got.Status != executor.StatusSucceeded || !sameJSON(got.Output, []byte(`{"run_id":"r","loops":{"review_fix":1}}`)) {
		t.Fatalf("%s %s", got.Status, got.Output)
	}
	d, err := h.Executor.DescribeExecution(context.Background(), x.ARN)
	if err != nil || d.Status != executor.StatusSucceeded || d.ARN != x.ARN || d.Name != x.Name || d.StopDate.IsZero() {
		t.Errorf("DescribeExecution: %+v %v", d, err)
	}
}

func testFailState(t *testing.T, h Harness) {
	x := start(t, h, `{"StartAt":"f","States":{"f":{"Type":"Fail","Error":"stratus.Failed","Cause":"a step failed"}}}`, `{}`)
	got := wait(t, h, x.ARN)
	if got.Status != executor.StatusFailed || got.Error != "stratus.Failed" || got.Cause != "a step failed" {
		t.Fatalf("%+v", got)
	}
}

func testNamesAreUnique(t *testing.T, h Harness) {
	ctx := context.Background()
	in := executor.StartInput{StateMachine: h.StateMachine, Definition: []byte(`{"StartAt":"p","States":{"p":{"Type":"Pass","End":true}}}`), Name: uniqueName("dup"), Input: json.RawMessage(`{}`)}
	x, err := h.Executor.StartExecution(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, h, x.ARN)
	_, err = h.Executor.StartExecution(ctx, in)
	if stratus.ErrorCode(err) != stratus.ECONFLICT || executor.APIErrorName(err) != executor.ErrExecutionAlreadyExists {
		t.Errorf("second start under the same name: %v", err)
	}
}

func testUnknownExecution(t *testing.T, h Harness) {
	arn := strings.Replace(h.StateMachine, ":stateMachine:", ":execution:", 1) + ":" + uniqueName("nope")
	if !strings.HasPrefix(h.StateMachine, "arn:") {
		arn = "arn:aws:states:local:000000000000:execution:" + h.StateMachine + ":" + uniqueName("nope")
	}
	if _, err := h.Executor.DescribeExecution(context.Background(), arn); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("DescribeExecution of an unknown execution: %v", err)
	}
}

// callbackDef sends MessageBody {"run_id": $.run_id, "task_token":
// $$.Task.Token}; with a catch (which goes to "failed"), it adds "failed".
func callbackDef(h Harness, catch string) string {
	failed := ""
	if catch != "" {
		failed = `,"failed":{"Type":"Fail","Error":"stratus.Failed","Cause":"a step failed"}`
	}
	return `{"StartAt":"review","States":{
		"review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
			"Parameters":{"QueueUrl":"` + h.QueueURL + `","MessageBody":{"run_id.$":"$.run_id","task_token.$":"$$.Task.Token"}},
			"ResultPath":"$.last","TimeoutSeconds":900,"HeartbeatSeconds":300` + catch + `,"Next":"done"},
		"done":{"Type":"Succeed"}` + failed + `}}`
}

func nextToken(t *testing.T, h Harness, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		body, err := h.NextMessage(ctx)
		if err != nil {
			t.Fatalf("NextMessage: %v", err)
		}
		var m struct {
			RunID     string `json:"run_id"`
			TaskToken string `json:"task_token"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			// Some transports deliver the body as a JSON string.
			var s string
			if json.Unmarshal(body, &s) != nil || json.Unmarshal([]byte(s), &m) != nil {
				t.Fatalf("message body %s: %v", body, err)
			}
		}
		if m.RunID == runID {
			if m.TaskToken == "" {
				t.Fatalf("message %s has no task token", body)
			}
			return m.TaskToken
		}
	}
}

func testCallbackSuccess(t *testing.T, h Harness) {
	ctx := context.Background()
	runID := uniqueName("run")
	x := start(t, h, callbackDef(h, ""), `{"run_id":"`+runID+`"}`)
	token := nextToken(t, h, runID)
	if err := h.Executor.SendTaskHeartbeat(ctx, token); err != nil {
		t.Fatalf("SendTaskHeartbeat: %v", err)
	}
	if err := h.Executor.SendTaskSuccess(ctx, token, json.RawMessage(`{"outcome":"accept"}`)); err != nil {
		t.Fatalf("SendTaskSuccess: %v", err)
	}
	got := wait(t, h, x.ARN)
	if got.Status != executor.StatusSucceeded || !sameJSON(got.Output, []byte(`{"run_id":"`+runID+`","last":{"outcome":"accept"}}`)) {
		t.Fatalf("%s %s", got.Status, got.Output)
	}
	err := h.Executor.SendTaskSuccess(ctx, token, json.RawMessage(`{}`))
	if h.Quirks.SpentTokenInvalid {
		// moto 5.2.1 forgets a completed token: InvalidToken, not TaskTimedOut.
		if stratus.ErrorCode(err) != stratus.EINVALID || executor.APIErrorName(err) != executor.ErrInvalidToken {
			t.Errorf("second SendTaskSuccess: %v, want InvalidToken (EINVALID) on this stand-in", err)
		}
		return
	}
	if stratus.ErrorCode(err) != stratus.ECONFLICT || executor.APIErrorName(err) != executor.ErrTaskTimedOut {
		t.Errorf("second SendTaskSuccess: %v, want TaskTimedOut (ECONFLICT)", err)
	}
}

func testCallbackFailureCaught(t *testing.T, h Harness) {
	runID := uniqueName("run")
	x := start(t, h, callbackDef(h, `,"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"failed"}]`), `{"run_id":"`+runID+`"}`)
	token := nextToken(t, h, runID)
	if err := h.Executor.SendTaskFailure(context.Background(), token, "worker.Crashed", "exit 3"); err != nil {
		t.Fatalf("SendTaskFailure: %v", err)
	}
	got := wait(t, h, x.ARN)
	if got.Status != executor.StatusFailed || got.Error != "stratus.Failed" {
		t.Fatalf("%+v", got)
	}
}

func testTokenErrors(t *testing.T, h Harness) {
	ctx := context.Background()
	err := h.Executor.SendTaskSuccess(ctx, "not-a-token", json.RawMessage(`{}`))
	if code := stratus.ErrorCode(err); code != stratus.EINVALID && code != stratus.ENOTFOUND {
		t.Errorf("SendTaskSuccess with garbage: %v, want EINVALID or ENOTFOUND", err)
	}
	if err := h.Executor.SendTaskHeartbeat(ctx, "not-a-token"); err == nil {
		t.Error("SendTaskHeartbeat with garbage succeeded")
	}
}

func testStopExecution(t *testing.T, h Harness) {
	ctx := context.Background()
	runID := uniqueName("run")
	x := start(t, h, callbackDef(h, ""), `{"run_id":"`+runID+`"}`)
	token := nextToken(t, h, runID)
	if err := h.Executor.StopExecution(ctx, x.ARN, "user.Cancelled", "operator"); err != nil {
		t.Fatal(err)
	}
	if h.Quirks.StopAwaitsCallback {
		// moto 5.2.1 aborts a waiting execution only when its task wakes.
		if err := h.Executor.SendTaskSuccess(ctx, token, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("SendTaskSuccess to wake the stopped execution: %v", err)
		}
	}
	got := wait(t, h, x.ARN)
	if got.Status != executor.StatusAborted {
		t.Fatalf("%+v", got)
	}
	if err := h.Executor.SendTaskSuccess(ctx, token, json.RawMessage(`{}`)); err == nil {
		t.Error("SendTaskSuccess on a stopped execution's token succeeded")
	}
	if err := h.Executor.StopExecution(ctx, x.ARN, "user.Cancelled", "again"); err != nil {
		t.Errorf("StopExecution of a closed execution: %v, want nothing done", err)
	}
}

// nextBody returns the next message body whose run_id is runID, decoded.
func nextBody(t *testing.T, h Harness, runID string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		body, err := h.NextMessage(ctx)
		if err != nil {
			t.Fatalf("NextMessage: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			var s string
			if json.Unmarshal(body, &s) != nil || json.Unmarshal([]byte(s), &m) != nil {
				t.Fatalf("message body %s: %v", body, err)
			}
		}
		if m["run_id"] == runID {
			return m
		}
	}
}

// The compiled "<node>.stop" shape (docs/architecture.md § The path of one
// step, 10): a callback state's Catch goes to a request-response
// sqs:sendMessage (no task token) that sends the caught error, keeps the
// state's data (ResultPath null) and routes on.
func testCatchSendsBeforeRouting(t *testing.T, h Harness) {
	runID := uniqueName("run")
	def := `{"StartAt":"review","States":{
		"review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
			"Parameters":{"QueueUrl":"` + h.QueueURL + `","MessageBody":{"run_id.$":"$.run_id","task_token.$":"$$.Task.Token"}},
			"ResultPath":"$.last","TimeoutSeconds":900,"HeartbeatSeconds":300,
			"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"review.stop"}],"Next":"done"},
		"review.stop":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage",
			"Parameters":{"QueueUrl":"` + h.QueueURL + `","MessageBody":{"run_id.$":"$.run_id","node":"review","kind":"stop","error.$":"$.error"}},
			"ResultPath":null,"TimeoutSeconds":60,
			"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":null,"Next":"routed"}],"Next":"routed"},
		"routed":{"Type":"Pass","End":true},
		"done":{"Type":"Succeed"}}}`
	x := start(t, h, def, `{"run_id":"`+runID+`"}`)
	token := nextToken(t, h, runID)
	if err := h.Executor.SendTaskFailure(context.Background(), token, "worker.Crashed", "exit 3"); err != nil {
		t.Fatalf("SendTaskFailure: %v", err)
	}
	stop := nextBody(t, h, runID)
	caught, _ := stop["error"].(map[string]any)
	if stop["kind"] != "stop" || stop["node"] != "review" || stop["task_token"] != nil || caught == nil || caught["Error"] != "worker.Crashed" {
		t.Errorf("stop message %v, want kind stop, node review, no task token, error worker.Crashed", stop)
	}
	got := wait(t, h, x.ARN)
	var out struct {
		RunID string `json:"run_id"`
		Error struct {
			Error string `json:"Error"`
		} `json:"error"`
		Last any `json:"last"`
	}
	if got.Status != executor.StatusSucceeded || json.Unmarshal(got.Output, &out) != nil || out.RunID != runID || out.Error.Error != "worker.Crashed" || out.Last != nil {
		t.Fatalf("%s %s: want SUCCEEDED through the stop state with $.error kept and nothing else added", got.Status, got.Output)
	}
}

// GetExecutionHistory gives, on both runtimes, what a run's end is read
// from (internal/lifecycle.ReadStop, SpentBudgets): the execution's start
// and end, and each state entered with its input and exited with its
// output, the Fail state last entered; an unknown execution is ENOTFOUND.
func testHistoryReadsTheRun(t *testing.T, h Harness) {
	def := `{"StartAt":"init","States":{
		"init":{"Type":"Pass","Result":{"fix":0},"ResultPath":"$.loops","Next":"count"},
		"count":{"Type":"Pass","Parameters":{"fix.$":"States.MathAdd($.loops.fix, 1)"},"ResultPath":"$.loops","Next":"budget"},
		"budget":{"Type":"Choice","Choices":[{"Variable":"$.loops.fix","NumericGreaterThanEquals":1,"Next":"manual"}],"Default":"count"},
		"manual":{"Type":"Fail","Error":"stratus.ManualActionRequired","Cause":"spent"}}}`
	x := start(t, h, def, `{"run_id":"r"}`)
	wait(t, h, x.ARN)
	hist, err := h.Executor.GetExecutionHistory(context.Background(), x.ARN)
	if err != nil {
		t.Fatal(err)
	}
	var entered []string
	var countOut json.RawMessage
	for _, e := range hist {
		if e.IsStateEntered() {
			entered = append(entered, e.State)
		}
		if e.IsStateExited() && e.State == "count" {
			countOut = e.Output
		}
	}
	if len(hist) == 0 || hist[0].Type != executor.EventExecutionStarted || hist[len(hist)-1].Type != executor.EventExecutionFailed ||
		strings.Join(entered, " ") != "init count budget manual" || !sameJSON(countOut, []byte(`{"run_id":"r","loops":{"fix":1}}`)) {
		types := make([]string, len(hist))
		for i, e := range hist {
			types[i] = e.Type + "(" + e.State + ")"
		}
		t.Errorf("history %v; entered %v; count's output %s", types, entered, countOut)
	}
	if last := hist[len(hist)-1]; last.Error != "stratus.ManualActionRequired" {
		t.Errorf("last event %+v; want the execution failed with the Fail state's error", last)
	}
	arn := strings.Replace(x.ARN, x.Name, uniqueName("nope"), 1)
	if _, err := h.Executor.GetExecutionHistory(context.Background(), arn); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("GetExecutionHistory of an unknown execution: %v", err)
	}
}

// retryBody is a callback Task's MessageBody carrying $$.State.RetryCount.
func retryBody(h Harness) string {
	return `"Parameters":{"QueueUrl":"` + h.QueueURL + `","MessageBody":{"run_id.$":"$.run_id","task_token.$":"$$.Task.Token","retry_count.$":"$$.State.RetryCount"}}`
}

// spentTokens are the tokens failNext has failed (string → true): no two
// tries share one.
var spentTokens sync.Map

// failNext fails the next callback of runID with errName and returns the
// message's retry_count.

func failNext(t *testing.T, h Harness, runID, errName, cause string) float64 {
	t.Helper()
	m := nextBody(t, h, runID)
	token, _ := m["task_token"].(string)
	// Every try of a callback state, a retry too, has its own task token
	// (developer guide § Wait for a callback with task token).
	if _, spent := spentTokens.LoadOrStore(token, true); spent {
		t.Fatalf("a retried callback state was given the token of an earlier try (%s)", token)
	}
	if err := h.Executor.SendTaskFailure(context.Background(), token, errName, cause); err != nil {
		t.Fatalf("SendTaskFailure %s: %v", errName, err)
	}
	rc, _ := m["retry_count"].(float64)
	return rc
}

// The developer guide's example (§ Handling errors in Step Functions
// workflows, Retry field examples): two retriers, the first for ErrorA
// and ErrorB (MaxAttempts 2), the second for ErrorC; a task failing
// ErrorA, ErrorB, ErrorC, ErrorB is retried three times — each retrier
// counting its own retries, $$.State.RetryCount counting them all — and
// the fourth error, whose retrier is spent, goes to the Catch (the later
// retriers are not consulted), which puts the error output at its
// ResultPath. Intervals are 1 s here to keep the test short.
func testRetryPerRetrierThenCatch(t *testing.T, h Harness) {
	runID := uniqueName("run")
	def := `{"StartAt":"work","States":{
		"work":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",` + retryBody(h) + `,
			"ResultPath":"$.last","TimeoutSeconds":900,
			"Retry":[{"ErrorEquals":["ErrorA","ErrorB"],"IntervalSeconds":1,"BackoffRate":1.0,"MaxAttempts":2},
				{"ErrorEquals":["ErrorC"],"IntervalSeconds":1,"MaxAttempts":1},
				{"ErrorEquals":["States.ALL"],"IntervalSeconds":1,"MaxAttempts":5}],
			"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"Z"}],"Next":"done"},
		"Z":{"Type":"Pass","End":true},
		"done":{"Type":"Succeed"}}}`
	x := start(t, h, def, `{"run_id":"`+runID+`"}`)
	var counts []float64
	for i, e := range []string{"ErrorA", "ErrorB", "ErrorC", "ErrorB"} {
		counts = append(counts, failNext(t, h, runID, e, fmt.Sprintf("failure %d", i+1)))
	}
	got := wait(t, h, x.ARN)
	if fmt.Sprint(counts) != "[0 1 2 3]" {
		t.Errorf("$$.State.RetryCount per attempt %v, want [0 1 2 3]", counts)
	}
	if got.Status != executor.StatusSucceeded || !sameJSON(got.Output, []byte(`{"run_id":"`+runID+`","error":{"Error":"ErrorB","Cause":"failure 4"}}`)) {
		t.Fatalf("%s %s: want the fourth error caught into $.error and the run through Z", got.Status, got.Output)
	}
}

// The compiled park loop (internal/compiler, Compile): a callback state's
// Catch of stratus.Blocked goes to a Pass that parses the cause
// (States.StringToJson) and a Wait on its wait_s (SecondsPath), then
// enters the state again — afresh: $$.State.RetryCount and each
// retrier's count start at 0 again (developer guide § Context object:
// RetryCount is the current state's).
func testParkLoopWaitsAndEntersAfresh(t *testing.T, h Harness) {
	runID := uniqueName("run")
	def := `{"StartAt":"work","States":{
		"work":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",` + retryBody(h) + `,
			"ResultPath":"$.last","TimeoutSeconds":900,
			"Retry":[{"ErrorEquals":["stratus.ProviderUnavailable"],"IntervalSeconds":1,"BackoffRate":2.0,"MaxAttempts":1,"MaxDelaySeconds":1}],
			"Catch":[{"ErrorEquals":["stratus.Blocked"],"ResultPath":"$.last","Next":"work.park"},
				{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"failed"}],"Next":"done"},
		"work.park":{"Type":"Pass","Parameters":{"parked":"work","wait.$":"States.StringToJson($.last.Cause)"},"ResultPath":"$.last","Next":"work.wait"},
		"work.wait":{"Type":"Wait","SecondsPath":"$.last.wait.wait_s","Next":"work"},
		"failed":{"Type":"Fail","Error":"stratus.Failed","Cause":"a step failed"},
		"done":{"Type":"Succeed"}}}`
	x := start(t, h, def, `{"run_id":"`+runID+`"}`)
	cause := `{"wait_s":1,"retry_at":"2026-03-01T09:00:01Z","reason":"every provider unavailable"}`
	const want = "[0 1 0 1]"
	counts := []float64{
		failNext(t, h, runID, "stratus.ProviderUnavailable", "503"),
		failNext(t, h, runID, "stratus.Blocked", cause),
		failNext(t, h, runID, "stratus.ProviderUnavailable", "503"), // entered again: the retrier has its attempt back
	}
	m := nextBody(t, h, runID)
	counts = append(counts, m["retry_count"].(float64))
	token, _ := m["task_token"].(string)
	if err := h.Executor.SendTaskSuccess(context.Background(), token, json.RawMessage(`{"outcome":"done"}`)); err != nil {
		t.Fatal(err)
	}
	got := wait(t, h, x.ARN)
	if fmt.Sprint(counts) != want {
		t.Errorf("$$.State.RetryCount per attempt %v, want %s: a state entered again starts its retries afresh", counts, want)
	}
	if got.Status != executor.StatusSucceeded || !sameJSON(got.Output, []byte(`{"run_id":"`+runID+`","last":{"outcome":"done"}}`)) {
		t.Fatalf("%s %s %s", got.Status, got.Error, got.Output)
	}
	hist, err := h.Executor.GetExecutionHistory(context.Background(), x.ARN)
	if err != nil {
		t.Fatal(err)
	}
	var waited json.RawMessage
	for _, e := range hist {
		if e.Type == "WaitStateEntered" && e.State == "work.wait" {
			waited = e.Input
		}
	}
	if !sameJSON(waited, []byte(`{"run_id":"`+runID+`","last":{"parked":"work","wait":{"wait_s":1,"retry_at":"2026-03-01T09:00:01Z","reason":"every provider unavailable"}}}`)) {
		t.Errorf("work.wait entered with %s", waited)
	}
}

// developer guide § Wait workflow state: a SecondsPath whose value is not
// a non-negative integer fails the execution with States.Runtime.
func testWaitBadSecondsPath(t *testing.T, h Harness) {
	def := `{"StartAt":"w","States":{"w":{"Type":"Wait","SecondsPath":"$.w","Next":"done"},"done":{"Type":"Succeed"}}}`
	for _, tc := range []struct{ input, cause string }{
		{`{"w":"ten"}`, "The SecondsPath parameter cannot be parsed as a long value: $.w == ten"},
		{`{"w":-1}`, "The SecondsPath parameter references a negative value: $.w == -1"},
	} {
		x := start(t, h, def, tc.input)
		got := wait(t, h, x.ARN)
		cause := got.Cause
		if h.Quirks.RuntimeCausePrefixed {
			_, cause, _ = strings.Cut(cause, "). ")
		}
		if got.Status != executor.StatusFailed || got.Error != "States.Runtime" || cause != tc.cause {
			t.Errorf("input %s: %s %q %q, want FAILED States.Runtime %q", tc.input, got.Status, got.Error, got.Cause, tc.cause)
		}
	}
}

// The developer guide's rules on a request-response state that fails the
// same way every time (an sqs:sendMessage to a queue that does not exist,
// which Step Functions names SQS.SdkClientException or
// SQS.AmazonSQSException — the names the compiled infrastructure Retrier
// lists): only the first retrier whose ErrorEquals matches applies, and
// once its MaxAttempts are spent the error goes to the Catch, though a
// later States.ALL retrier has attempts left; $$.State.RetryCount is 0,
// 1, 2 in the attempts' Parameters.
func testRetryFirstMatchingRetrierOnly(t *testing.T, h Harness) {
	def := `{"StartAt":"t","States":{
		"t":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage",
			"Parameters":{"QueueUrl":"` + h.QueueURL + MissingQueueSuffix + `","MessageBody":{"rc.$":"$$.State.RetryCount"}},
			"Retry":[{"ErrorEquals":["SQS.SdkClientException","SQS.AmazonSQSException"],"IntervalSeconds":1,"BackoffRate":1.0,"MaxAttempts":2},
				{"ErrorEquals":["States.ALL"],"IntervalSeconds":1,"MaxAttempts":5}],
			"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"z"}],"End":true},
		"z":{"Type":"Pass","End":true}}}`
	x := start(t, h, def, `{"run_id":"r"}`)
	got := wait(t, h, x.ARN)
	var out struct {
		RunID string `json:"run_id"`
		Error struct{ Error, Cause string }
	}
	if got.Status != executor.StatusSucceeded || json.Unmarshal(got.Output, &out) != nil || out.RunID != "r" ||
		(out.Error.Error != "SQS.SdkClientException" && out.Error.Error != "SQS.AmazonSQSException") {
		t.Fatalf("%s %s: want the SQS error caught into $.error", got.Status, got.Output)
	}
	hist, err := h.Executor.GetExecutionHistory(context.Background(), x.ARN)
	if err != nil {
		t.Fatal(err)
	}
	var counts []string
	for _, e := range hist {
		if e.Type != executor.EventTaskScheduled {
			continue
		}
		var p struct{ MessageBody struct{ RC json.Number } }
		if json.Unmarshal(e.Input, &p) != nil {
			t.Fatalf("TaskScheduled input %s", e.Input)
		}
		counts = append(counts, p.MessageBody.RC.String())
	}
	if strings.Join(counts, " ") != "0 1 2" {
		t.Errorf("attempts with $$.State.RetryCount %v, want 0 1 2", counts)
	}
}
