package executor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stratusflow/stratus"
)

// Task-token errors carry AWS's name in the message and the stratus code
// callers branch on (brief: TaskDoesNotExist / TaskTimedOut /
// InvalidToken as ENOTFOUND / ECONFLICT / EINVALID).
func TestAPIError_NamesAndCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, code string
	}{
		{ErrTaskDoesNotExist, stratus.ENOTFOUND},
		{ErrTaskTimedOut, stratus.ECONFLICT},
		{ErrInvalidToken, stratus.EINVALID},
		{ErrInvalidOutput, stratus.EINVALID},
		{ErrExecutionAlreadyExists, stratus.ECONFLICT},
		{ErrExecutionDoesNotExist, stratus.ENOTFOUND},
		{ErrInvalidDefinition, stratus.EINVALID},
		{ErrInvalidName, stratus.EINVALID},
		{ErrInvalidArn, stratus.EINVALID},
		{ErrInvalidExecutionInput, stratus.EINVALID},
		{"SomethingElse", stratus.EINTERNAL},
	}
	for _, tc := range cases {
		err := APIError(tc.name, "token", "detail %d", 1)
		if err.Code != tc.code || err.Field != "token" || err.Message != tc.name+": detail 1" {
			t.Errorf("APIError(%s) = %+v", tc.name, err)
		}
		wrapped := fmt.Errorf("context: %w", err)
		want := tc.name
		if tc.code == stratus.EINTERNAL {
			want = ""
		}
		if got := APIErrorName(wrapped); got != want {
			t.Errorf("APIErrorName(%v) = %q, want %q", wrapped, got, want)
		}
	}
	if APIErrorName(errors.New("TaskTimedOut: plain")) != "" || APIErrorName(nil) != "" {
		t.Error("APIErrorName named a non-*stratus.Error")
	}
}

// History event types are AWS's (GetExecutionHistory HistoryEventType).
func TestHistoryEvent_StateEvents(t *testing.T) {
	t.Parallel()
	if StateEntered("Task") != EventTaskStateEntered || StateExited("Choice") != EventChoiceStateExited {
		t.Error("state event names")
	}
	if !(HistoryEvent{Type: EventPassStateEntered}).IsStateEntered() || (HistoryEvent{Type: EventTaskScheduled}).IsStateEntered() ||
		!(HistoryEvent{Type: EventSucceedStateExited}).IsStateExited() {
		t.Error("IsStateEntered/IsStateExited")
	}
	if (Execution{Status: StatusRunning}).Done() || !(Execution{Status: StatusAborted}).Done() {
		t.Error("Done")
	}
}

// An execution's ARN is its state machine's with "execution" for
// "stateMachine" and the execution's name appended (Step Functions API
// reference, DescribeExecution's executionArn): known before it starts.
func TestExecutionARN_FromTheStateMachineAndName(t *testing.T) {
	for _, tc := range []struct{ sm, name, want string }{
		{"arn:aws:states:us-east-1:123456789012:stateMachine:stack-implementation-0a1b2c3d4e5f", "r-20250101T000000-abcdef.resume-1",
			"arn:aws:states:us-east-1:123456789012:execution:stack-implementation-0a1b2c3d4e5f:r-20250101T000000-abcdef.resume-1"},
		{"arn:aws-cn:states:cn-north-1:123456789012:stateMachine:m", "x", "arn:aws-cn:states:cn-north-1:123456789012:execution:m:x"},
	} {
		if got, err := ExecutionARN(tc.sm, tc.name); err != nil || got != tc.want {
			t.Errorf("ExecutionARN(%q, %q) = %q, %v; want %q", tc.sm, tc.name, got, err, tc.want)
		}
	}
	for _, sm := range []string{"", "review", "arn:aws:states:us-east-1:123456789012:execution:m:x", "arn:aws:lambda:us-east-1:123456789012:function:f"} {
		if _, err := ExecutionARN(sm, "x"); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("ExecutionARN(%q) = %v; want EINVALID", sm, err)
		}
	}
	if _, err := ExecutionARN("arn:aws:states:us-east-1:123456789012:stateMachine:m", ""); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("ExecutionARN without a name = %v; want EINVALID", err)
	}
}
