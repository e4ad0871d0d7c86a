package handler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
)

// EventBridge detail types the events function serves (template.yaml:
// EventsFunction's EventBridgeRule and Schedule events).
const (
	DetailExecutionStatusChange = "Step Functions Execution Status Change"
	DetailScheduled             = "Scheduled Event"
	// DetailObjectCreated is S3's EventBridge event of an object written
	// (the claim function's: a task file under tasks/pending/).
	DetailObjectCreated = "Object Created"
)

// ExecutionFunc handles the end of a Step Functions execution
// (awsapp.App.ExecutionEnded). An error asks for the event again: Lambda
// retries a failed asynchronous invocation.
type ExecutionFunc func(ctx context.Context, x executor.Execution) error

// SweepFunc handles one tick of the schedule (awsapp.App.Sweep).
type SweepFunc func(ctx context.Context, now time.Time) error

// EventFunc is the Lambda handler of EventBridge events.
type EventFunc func(ctx context.Context, ev events.CloudWatchEvent) error

// executionDetail is the detail of a "Step Functions Execution Status
// Change" event: dates are Unix milliseconds, input and output JSON text
// (null when absent), error and cause null unless the execution failed.
type executionDetail struct {
	ExecutionArn    string  `json:"executionArn"`
	StateMachineArn string  `json:"stateMachineArn"`
	Name            string  `json:"name"`
	Status          string  `json:"status"`
	StartDate       int64   `json:"startDate"`
	StopDate        int64   `json:"stopDate"`
	Input           *string `json:"input"`
	Output          *string `json:"output"`
	Error           *string `json:"error"`
	Cause           *string `json:"cause"`
}

// Events returns the Lambda handler that maps an execution status change
// onto ended (as the executor.Execution the Step Functions API would
// describe) and a scheduled event onto sweep, at the event's time (now
// when it has none). Errors: EINVALID for another detail type or a detail
// that does not decode, naming the field; ended's and sweep's errors.
func Events(ended ExecutionFunc, sweep SweepFunc) EventFunc {
	return func(ctx context.Context, ev events.CloudWatchEvent) error {
		switch ev.DetailType {
		case DetailExecutionStatusChange:
			var d executionDetail
			if err := json.Unmarshal(ev.Detail, &d); err != nil {
				return stratus.FieldErrorf(stratus.EINVALID, "detail", "a %q event whose detail is not an execution: %v", ev.DetailType, err)
			}
			if d.Name == "" || d.Status == "" {
				return stratus.FieldErrorf(stratus.EINVALID, "detail", "a %q event without the execution's name and status: %s", ev.DetailType, ev.Detail)
			}
			return ended(ctx, d.execution())
		case DetailScheduled:
			now := ev.Time
			if now.IsZero() {
				now = time.Now()
			}
			return sweep(ctx, now.UTC())
		}
		return stratus.FieldErrorf(stratus.EINVALID, "detail-type", "%q (source %q); valid: %q, %q", ev.DetailType, ev.Source, DetailExecutionStatusChange, DetailScheduled)
	}
}

func (d executionDetail) execution() executor.Execution {
	x := executor.Execution{ARN: d.ExecutionArn, StateMachine: d.StateMachineArn, Name: d.Name, Status: d.Status,
		Error: deref(d.Error), Cause: deref(d.Cause), StartDate: millis(d.StartDate), StopDate: millis(d.StopDate)}
	if d.Input != nil {
		x.Input = json.RawMessage(*d.Input)
	}
	if d.Output != nil {
		x.Output = json.RawMessage(*d.Output)
	}
	return x
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
