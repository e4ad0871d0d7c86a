package lambdas_test

import (
	"bytes"
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

// The "Object Created" event has the shape S3 sends EventBridge (Amazon S3
// User Guide, "EventBridge event message structure"; the sample there): the
// envelope of a CloudWatch event with the bucket's ARN as its resource, and
// a detail naming the bucket, the object's key, size and ETag (unquoted).
func TestObjectCreated_IsS3sEventBridgeEvent(t *testing.T) {
	b, err := lambdas.ObjectCreated("data-bucket", "stratus/tasks/pending/fix.md", `"4e68adba0abe2dc8653dc3354e14c01d"`, 184662, "eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Version != "0" || ev.Source != "aws.s3" || ev.DetailType != "Object Created" || ev.Region != "eu-west-1" || ev.AccountID == "" || ev.ID == "" || ev.Time.IsZero() ||
		!reflect.DeepEqual(ev.Resources, []string{"arn:aws:s3:::data-bucket"}) {
		t.Errorf("envelope %+v", ev)
	}
	// The detail's fields, as the documented sample spells them.
	var d struct {
		Version string `json:"version"`
		Bucket  struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key  string `json:"key"`
			Size int64  `json:"size"`
			ETag string `json:"etag"`
		} `json:"object"`
		RequestID string `json:"request-id"`
		Requester string `json:"requester"`
		Reason    string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(ev.Detail))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("detail %s: %v", ev.Detail, err)
	}
	if d.Version != "0" || d.Bucket.Name != "data-bucket" || d.Object.Key != "stratus/tasks/pending/fix.md" || d.Object.Size != 184662 ||
		d.Object.ETag != "4e68adba0abe2dc8653dc3354e14c01d" || d.RequestID == "" || d.Requester != ev.AccountID || d.Reason != "PutObject" {
		t.Errorf("detail %+v", d)
	}
}

// A schedule's tick is EventBridge's "Scheduled Event": source aws.events,
// the rule as its resource, an empty detail.
func TestScheduledEvent_IsEventBridgesScheduledEvent(t *testing.T) {
	arn := "arn:aws:events:us-east-1:123456789012:rule/stratus-ClaimFunctionBackstop"
	b, err := lambdas.ScheduledEvent(arn, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" || ev.Region != "us-east-1" || !reflect.DeepEqual(ev.Resources, []string{arn}) || string(ev.Detail) != "{}" {
		t.Errorf("event %+v (detail %s)", ev, ev.Detail)
	}
}

// The ClaimFunction's rule is read from the template: the data bucket's
// objects under the pending tasks' prefix; and its schedule.
func TestObjectCreatedRuleFromTemplate_ClaimFunction(t *testing.T) {
	tmpl := readTemplate(t)
	r, err := lambdas.ObjectCreatedRuleFromTemplate(tmpl, "ClaimFunction")
	if err != nil {
		t.Fatal(err)
	}
	if r.Bucket != "DataBucket" || r.KeyPrefix != "stratus/tasks/pending/" || r.Event == "" {
		t.Errorf("rule %+v; want DataBucket under stratus/tasks/pending/", r)
	}
	if _, err := lambdas.ObjectCreatedRuleFromTemplate(tmpl, "EventsFunction"); err == nil {
		t.Errorf("EventsFunction has an Object Created rule?")
	}
	if _, expr, err := lambdas.ScheduleFromTemplate(tmpl, "ClaimFunction"); err != nil || expr != "rate(5 minutes)" {
		t.Errorf("ScheduleFromTemplate = %q, %v; want rate(5 minutes)", expr, err)
	}
}
