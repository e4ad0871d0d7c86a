package lambdas_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/executor"
)

// The status change event of an ended execution reaches the events
// function's handler as the execution the Step Functions API describes,
// and matches the EventsFunction rule's pattern (source, detail-type,
// an ended status).
func TestExecutionStatusChange_IsWhatTheEventsHandlerReads(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_123).UTC()
	for _, x := range []executor.Execution{
		{ARN: "arn:aws:states:us-east-1:123456789012:execution:stratus-impl:run-1", StateMachine: "arn:aws:states:us-east-1:123456789012:stateMachine:stratus-impl",
			Name: "run-1", Status: "SUCCEEDED", Input: json.RawMessage(`{"run_id":"run-1"}`), Output: json.RawMessage(`{"ok":true}`),
			StartDate: start, StopDate: start.Add(90 * time.Second)},
		{ARN: "arn:aws:states:us-east-1:123456789012:execution:stratus-impl:run-2", StateMachine: "arn:aws:states:us-east-1:123456789012:stateMachine:stratus-impl",
			Name: "run-2", Status: "FAILED", Input: json.RawMessage(`{}`), Error: "States.TaskFailed", Cause: "worker failed",
			StartDate: start, StopDate: start.Add(time.Second)},
	} {
		b, err := lambdas.ExecutionStatusChange(x, "", "")
		if err != nil {
			t.Fatal(err)
		}
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Source != "aws.states" || ev.DetailType != "Step Functions Execution Status Change" || ev.Region != "us-east-1" || ev.AccountID != "123456789012" {
			t.Errorf("envelope %+v", ev)
		}
		var got executor.Execution
		h := handler.Events(func(_ context.Context, e executor.Execution) error { got = e; return nil }, nil)
		if err := h(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, x) {
			t.Errorf("the handler read\n%+v\nwant\n%+v", got, x)
		}
	}
}

// The EventsFunction's rule lets through the ended executions of the
// stack's own state machines, and nothing else.
func TestExecutionRuleFromTemplate_MatchesEndedExecutionsOfTheStack(t *testing.T) {
	r, err := lambdas.ExecutionRuleFromTemplate(readTemplate(t), "EventsFunction")
	if err != nil {
		t.Fatal(err)
	}
	ours := "arn:aws:states:us-east-1:123456789012:stateMachine:stratus-impl-abc"
	for _, c := range []struct {
		machine, status string
		want            bool
	}{
		{ours, "SUCCEEDED", true},
		{ours, "FAILED", true},
		{ours, "TIMED_OUT", true},
		{ours, "ABORTED", true},
		{ours, "RUNNING", false},
		{"arn:aws:states:us-east-1:123456789012:stateMachine:other-impl", "FAILED", false},
	} {
		if got := r.Matches(executor.Execution{StateMachine: c.machine, Status: c.status}, "stratus"); got != c.want {
			t.Errorf("%s %s: %v; want %v (rule %+v)", c.machine, c.status, got, c.want, r)
		}
	}
}
