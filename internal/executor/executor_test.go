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
