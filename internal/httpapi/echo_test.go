package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
)

// The answer to a failed result or submit acknowledges it — step ref,
// outcome, the size of the reason, a preview of at most a few hundred
// bytes — and never echoes a 300 KB reason back; the reason Stratus keeps
// (the attempt's, the step's value, the task failure's cause) is bounded
// by worker.MaxReasonBytes, and the whole text stays the attempt's failed
// Final in its output tail.
func TestFailedResult_AnswerIsSmallAndTheKeptReasonBounded(t *testing.T) {
	t.Parallel()
	reason := strings.Repeat("the model refused; ", 300<<10/19+1)[:300<<10]
	str, _ := json.Marshal(reason)
	failure, _ := json.Marshal(map[string]string{"terminal": "Failed", "reason": reason})
	for _, tc := range []struct{ name, method, path, body string }{
		{"result, string value", "POST", "/v1/worker/result", `{"task_id":"r1.planning.1","ok":false,"value":` + string(str) + `}`},
		{"result, terminal and reason", "POST", "/v1/worker/result", `{"task_id":"r1.planning.1","ok":false,"value":` + string(failure) + `}`},
		{"submit ok=false", "POST", "/v1/worker/submit?ok=false", reason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := b.dispatch(t, "planning", "tok-1")
			code, body := b.do(t, tc.method, tc.path, "Bearer "+h, tc.body)
			if code != 200 {
				t.Fatalf("%d %.300s", code, body)
			}
			if len(body) > 600 {
				t.Errorf("the answer is %d bytes; want an acknowledgement of a few hundred: %.300s…", len(body), body)
			}
			var sv worker.StepValue
			if err := json.Unmarshal([]byte(body), &sv); err != nil {
				t.Fatal(err)
			}
			if sv.StepRef != "planning#1" || sv.Outcome != "failed" || sv.Bytes != len(reason) || !strings.HasPrefix(sv.Reason, "the model refused") || len(sv.Reason) > worker.AnswerReasonBytes {
				t.Errorf("answer = %.300s; want planning#1 failed, bytes %d, a preview of at most %d bytes", fmt.Sprintf("%+v", sv), len(reason), worker.AnswerReasonBytes)
			}

			ctx := context.Background()
			att, err := b.svc.Store.GetAttempt(ctx, "r1.planning.1", 1)
			if err != nil {
				t.Fatal(err)
			}
			st, err := b.svc.Store.GetStep(ctx, "r1.planning.1")
			if err != nil {
				t.Fatal(err)
			}
			cause := b.tokens.Failure("tok-1")
			for what, n := range map[string]int{"the attempt's reason": len(att.Reason), "the step's value": len(st.Value), "the task failure": len(cause)} {
				if n > worker.MaxReasonBytes+200 {
					t.Errorf("%s is %d bytes; want it bounded by about %d", what, n, worker.MaxReasonBytes)
				}
			}
			if !strings.HasPrefix(att.Reason, "the model refused") || !strings.Contains(att.Reason, "cut") {
				t.Errorf("the attempt's reason %.120q… does not start with the worker's words and say it was cut", att.Reason)
			}
			tail, err := b.svc.Store.ListOutput(ctx, "r1.planning.1", 1)
			if err != nil {
				t.Fatal(err)
			}
			var final *stratus.OutputEvent
			for i := range tail {
				if tail[i].Kind == stratus.OutputFinal {
					final = &tail[i]
				}
			}
			if final == nil || final.OK || !strings.Contains(string(final.Body), reason) {
				t.Errorf("the attempt's output tail holds no failed Final with the whole reason (%d events)", len(tail))
			}
		})
	}
}
