package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

const passEnd = `{"StartAt":"p","States":{"p":{"Type":"Pass","End":true}}}`

// AWS API StartExecution: names are unique per state machine; the same
// name and input while running is idempotent; ARNs follow the state
// machine's; an unnamed execution gets a UUID and {} input.
func TestStartExecution_NamesAndARNs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	start := func(sm, name, input string) (executor.Execution, error) {
		return b.exec.StartExecution(ctx, executor.StartInput{StateMachine: sm, Definition: []byte(callback("")), Name: name, Input: json.RawMessage(input)})
	}
	x, err := start("arn:aws:states:eu-west-1:123456789012:stateMachine:review", "run-1", `{"a":1}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.exec.StopExecution(ctx, x.ARN, "", "") })
	if x.ARN != "arn:aws:states:eu-west-1:123456789012:execution:review:run-1" || x.StateMachine != "arn:aws:states:eu-west-1:123456789012:stateMachine:review" ||
		x.Status != executor.StatusRunning || x.Name != "run-1" || string(x.Input) != `{"a":1}` || x.StartDate.IsZero() {
		t.Errorf("started %+v", x)
	}
	b.call(t)

	// AWS: the same name and input while running returns the execution again.
	again, err := start("arn:aws:states:eu-west-1:123456789012:stateMachine:review", "run-1", `{"a":1}`)
	if err != nil || again.ARN != x.ARN {
		t.Errorf("idempotent start: %+v, %v", again, err)
	}
	// Another input under the same name is a conflict.
	_, err = start("arn:aws:states:eu-west-1:123456789012:stateMachine:review", "run-1", `{"a":2}`)
	if executor.APIErrorName(err) != executor.ErrExecutionAlreadyExists || stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("duplicate name: %v", err)
	}
	// The same name under another state machine is fine.
	other, err := start("review-local", "run-1", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.exec.StopExecution(ctx, other.ARN, "", "") })
	if other.ARN != "arn:aws:states:local:000000000000:execution:review-local:run-1" {
		t.Errorf("bare-name ARN %s", other.ARN)
	}
	b.call(t)
	// A closed execution's name stays taken.
	if err := b.exec.StopExecution(ctx, other.ARN, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := start("review-local", "run-1", `{}`); executor.APIErrorName(err) != executor.ErrExecutionAlreadyExists {
		t.Errorf("name of a closed execution: %v", err)
	}
	// No name: a UUID, and {} input.
	anon, err := start("review-local", "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.exec.StopExecution(ctx, anon.ARN, "", "") })
	if len(anon.Name) != 36 || string(anon.Input) != "{}" {
		t.Errorf("unnamed execution %+v", anon)
	}
	b.call(t)
}

// AWS API errors: InvalidDefinition (every problem by state and field),
// InvalidName, InvalidArn, InvalidExecutionInput, ExecutionDoesNotExist.
func TestStartExecution_Rejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	cases := []struct {
		name string
		in   executor.StartInput
		err  string
		msg  string
	}{
		{"invalid definition lists every problem", executor.StartInput{StateMachine: "sm", Definition: []byte(`{"StartAt":"m","States":{"m":{"Type":"Map","End":true},"w":{"Type":"Parallel"}}}`)},
			executor.ErrInvalidDefinition, `state "m": field "Type": "Map" is not supported by the embedded executor; supported: Pass, Task, Choice, Wait, Succeed, Fail` + "\n" + `state "w": field "Type": "Parallel" is not supported`},
		{"bad execution name", executor.StartInput{StateMachine: "sm", Definition: []byte(passEnd), Name: "a b"}, executor.ErrInvalidName, `"a b" contains ' '`},
		{"long execution name", executor.StartInput{StateMachine: "sm", Definition: []byte(passEnd), Name: strings.Repeat("x", 81)}, executor.ErrInvalidName, "1 to 80 characters"},
		{"bad state machine ARN", executor.StartInput{StateMachine: "arn:aws:lambda:x:y:function:z", Definition: []byte(passEnd)}, executor.ErrInvalidArn, "is not a state machine ARN"},
		{"bad state machine name", executor.StartInput{StateMachine: "", Definition: []byte(passEnd)}, executor.ErrInvalidName, "1 to 80 characters"},
		{"bad input", executor.StartInput{StateMachine: "sm", Definition: []byte(passEnd), Input: json.RawMessage(`{"a":`)}, executor.ErrInvalidExecutionInput, "invalid JSON"},
	}
	for _, tc := range cases {
		_, err := b.exec.StartExecution(ctx, tc.in)
		if executor.APIErrorName(err) != tc.err || stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v\nwant %s (EINVALID) containing %q", tc.name, err, tc.err, tc.msg)
		}
	}
	for _, arn := range []string{"arn:aws:states:local:000000000000:execution:sm:nope", "junk"} {
		if _, err := b.exec.DescribeExecution(ctx, arn); executor.APIErrorName(err) != executor.ErrExecutionDoesNotExist || stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("DescribeExecution(%q): %v", arn, err)
		}
		if _, err := b.exec.WaitExecution(ctx, arn); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("WaitExecution(%q): %v", arn, err)
		}
		if err := b.exec.StopExecution(ctx, arn, "", ""); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("StopExecution(%q): %v", arn, err)
		}
		if h := b.exec.History(arn); h != nil {
			t.Errorf("History(%q) = %v", arn, h)
		}
	}
}

// ASL spec § Pass, § Succeed, § Fail: the simple states end to end, with
// substitutions and the context object.
func TestExecution_SimpleStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, def, input string
		status, output   string
		errName, cause   string
	}{
		{"pass chain with Result and ResultPath", `{"StartAt":"a","States":{
			"a":{"Type":"Pass","Result":{"x":1},"ResultPath":"$.a","Next":"b"},
			"b":{"Type":"Pass","Parameters":{"sum.$":"States.MathAdd($.a.x, $.n)","tag":"${DispatchQueueUrl}"},"ResultPath":"$.b","Next":"c"},
			"c":{"Type":"Pass","InputPath":"$.b","End":true}}}`, `{"n":41}`,
			executor.StatusSucceeded, `{"sum":42,"tag":"https://sqs.local/000000000000/dispatch"}`, "", ""},
		{"succeed filters", `{"StartAt":"s","States":{"s":{"Type":"Succeed","InputPath":"$.keep","OutputPath":"$.v"}}}`, `{"keep":{"v":[1,2]},"drop":0}`,
			executor.StatusSucceeded, `[1,2]`, "", ""},
		{"fail", `{"StartAt":"f","States":{"f":{"Type":"Fail","Error":"flow.Bad","Cause":"because"}}}`, `{}`,
			executor.StatusFailed, ``, "flow.Bad", "because"},
		{"choice routes and filters", `{"StartAt":"c","States":{
			"c":{"Type":"Choice","InputPath":"$.in","OutputPath":"$.v","Choices":[{"Variable":"$.v","NumericGreaterThan":1,"Next":"big"}],"Default":"small"},
			"big":{"Type":"Pass","Result":"big","ResultPath":"$.size","End":true},"small":{"Type":"Succeed"}}}`, `{"in":{"v":{"n":3}}}`,
			executor.StatusSucceeded, `{"n":3}`, "", ""}, // $.v is an object: NumericGreaterThan is false, Default
		{"no choice matched", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.v","IsNull":true,"Next":"d"}]},"d":{"Type":"Succeed"}}}`, `{"v":1}`,
			executor.StatusFailed, "", asl.ErrNoChoiceMatched, `No Choice rule matched the input of state "c" and it has no Default`},
		{"context object", `{"StartAt":"p","States":{"p":{"Type":"Pass","Parameters":{"id.$":"$$.Execution.Id","name.$":"$$.Execution.Name","in.$":"$$.Execution.Input.k","sm.$":"$$.StateMachine.Id","st.$":"$$.State.Name","t.$":"$$.State.EnteredTime"},"End":true}}}`, `{"k":"v"}`,
			executor.StatusSucceeded, ``, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			x := b.start(t, tc.def, tc.input)
			got := b.wait(t, x.ARN)
			if got.Status != tc.status || got.Error != tc.errName || (tc.cause != "" && got.Cause != tc.cause) {
				t.Fatalf("%s %q %q", got.Status, got.Error, got.Cause)
			}
			if tc.name == "context object" {
				want := fmt.Sprintf(`{"id":"%s","name":"%s","in":"v","sm":"arn:aws:states:local:000000000000:stateMachine:sm","st":"p","t":"2025-06-01T12:00:00.000Z"}`, x.ARN, x.Name)
				if string(got.Output) != want {
					t.Errorf("output %s\nwant   %s", got.Output, want)
				}
				return
			}
			if string(got.Output) != tc.output {
				t.Errorf("output %s, want %s", got.Output, tc.output)
			}
			if tc.status == executor.StatusFailed && got.StopDate.IsZero() {
				t.Error("no StopDate")
			}
		})
	}
}

// Request-response resources: the handler's return value is the result;
// ResultSelector shapes it; a panic or invalid JSON is a task failure.
func TestExecution_RequestResponse(t *testing.T) {
	t.Parallel()
	def := func(resource string) string {
		return `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"` + resource + `","Parameters":{"n.$":"$.n","const":"c"},
			"ResultSelector":{"echoed.$":"$.n","all.$":"$"},"ResultPath":"$.r","Next":"d"},"d":{"Type":"Succeed"}}}`
	}
	b := setup(t, map[string]TaskHandler{
		"arn:aws:lambda:local:0:function:panic": func(context.Context, TaskCall) (json.RawMessage, error) { panic("boom") },
		"arn:aws:lambda:local:0:function:junk":  func(context.Context, TaskCall) (json.RawMessage, error) { return json.RawMessage(`{nope`), nil },
		"arn:aws:lambda:local:0:function:plain": func(context.Context, TaskCall) (json.RawMessage, error) { return nil, errors.New("disk full") },
	})
	x := b.start(t, def("arn:aws:lambda:local:0:function:echo"), `{"n":7}`)
	if got := b.wait(t, x.ARN); string(got.Output) != `{"n":7,"r":{"echoed":7,"all":{"n":7,"const":"c"}}}` {
		t.Errorf("echo output %s", got.Output)
	}
	if c := b.call(t); c.Token != "" || c.State != "t" || c.Execution != x.ARN || string(c.Parameters) != `{"n":7,"const":"c"}` {
		t.Errorf("call %+v", c)
	}
	for _, tc := range []struct{ fn, errName, cause string }{
		{"panic", asl.ErrTaskFailed, "the handler of arn:aws:lambda:local:0:function:panic panicked: boom"},
		{"junk", asl.ErrTaskFailed, "the task returned invalid JSON"},
		{"plain", asl.ErrTaskFailed, "disk full"},
	} {
		x := b.start(t, def("arn:aws:lambda:local:0:function:"+tc.fn), `{"n":1}`)
		got := b.wait(t, x.ARN)
		if got.Status != executor.StatusFailed || got.Error != tc.errName || !strings.HasPrefix(got.Cause, tc.cause) {
			t.Errorf("%s: %s %q %q", tc.fn, got.Status, got.Error, got.Cause)
		}
	}
}

// A request-response Task's TimeoutSeconds cancels the handler's context.
func TestExecution_RequestResponseTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	x := b.start(t, `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:aws:lambda:local:0:function:block","TimeoutSeconds":5,"End":true}}}`, `{}`)
	b.call(t)
	b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 })
	b.clock.Advance(5 * time.Second)
	got := b.wait(t, x.ARN)
	if got.Error != asl.ErrTimeout {
		t.Fatalf("%+v", got)
	}
	if ty := types(b.exec.History(x.ARN)); ty[len(ty)-2] != "TaskTimedOut(t)" {
		t.Errorf("history %v", ty)
	}
}

// StopExecution: ABORTED with the given error and cause, handlers see
// their context end, the history ends with ExecutionAborted, and
// stopping again does nothing.
func TestStopExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ended := make(chan error, 1)
	b := setup(t, map[string]TaskHandler{"arn:aws:lambda:local:0:function:block": func(hctx context.Context, c TaskCall) (json.RawMessage, error) {
		<-hctx.Done()
		ended <- hctx.Err()
		return nil, hctx.Err()
	}})
	x := b.start(t, `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:aws:lambda:local:0:function:block","End":true}}}`, `{}`)
	b.waitEvent(t, x.ARN, executor.EventTaskStarted)
	if err := b.exec.StopExecution(ctx, x.ARN, "user.Cancelled", "operator said so"); err != nil {
		t.Fatal(err)
	}
	got, err := b.exec.DescribeExecution(ctx, x.ARN)
	if err != nil || got.Status != executor.StatusAborted || got.Error != "user.Cancelled" || got.Cause != "operator said so" || got.StopDate.IsZero() {
		t.Fatalf("%+v %v", got, err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end")
	}
	if err := b.exec.StopExecution(ctx, x.ARN, "again", ""); err != nil {
		t.Fatal(err)
	}
	h := b.exec.History(x.ARN)
	if last := h[len(h)-1]; last.Type != executor.EventExecutionAborted || last.Error != "user.Cancelled" {
		t.Errorf("last event %+v", last)
	}
	if got := b.wait(t, x.ARN); got.Error != "user.Cancelled" {
		t.Errorf("stopped twice: %+v", got)
	}
}

// ASL spec § Top-level fields, TimeoutSeconds: the execution ends
// TIMED_OUT; as on AWS, DescribeExecution shows no error or cause and the
// ExecutionTimedOut event carries States.Timeout.
func TestExecution_TimeoutSeconds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	x := b.start(t, `{"StartAt":"w","TimeoutSeconds":60,"States":{"w":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken","Parameters":{"t.$":"$$.Task.Token"},"End":true}}}`, `{}`)
	c := b.call(t)
	b.clock.waitPending(t, func(p []time.Duration) bool { return len(p) == 1 && p[0] == time.Minute })
	b.clock.Advance(time.Minute)
	got := b.wait(t, x.ARN)
	if got.Status != executor.StatusTimedOut || got.Error != "" || got.Cause != "" || got.StopDate.IsZero() {
		t.Fatalf("%+v", got)
	}
	if h := b.exec.History(x.ARN); h[len(h)-1].Type != executor.EventExecutionTimedOut || h[len(h)-1].Error != asl.ErrTimeout {
		t.Errorf("history %v, last %+v", types(h), h[len(h)-1])
	}
	if err := b.exec.SendTaskSuccess(context.Background(), c.Token, json.RawMessage(`{}`)); executor.APIErrorName(err) != executor.ErrTaskTimedOut {
		t.Errorf("token of a timed-out execution: %v", err)
	}
}

// WaitExecution returns when its context ends, with the running execution.
func TestWaitExecution_ContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	x := b.start(t, callback(""), `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := b.exec.WaitExecution(ctx, x.ARN)
	if !errors.Is(err, context.Canceled) || got.Status != executor.StatusRunning {
		t.Errorf("%+v %v", got, err)
	}
}

// Many executions at once, each in its own goroutine, completed from
// other goroutines: run with -race.
func TestExecution_Concurrent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const n = 40
	var wg sync.WaitGroup
	arns := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			x, err := b.exec.StartExecution(context.Background(), executor.StartInput{StateMachine: "sm", Definition: []byte(reviewLoop), Name: fmt.Sprintf("c-%d", i), Input: json.RawMessage(fmt.Sprintf(`{"run_id":"r%d"}`, i))})
			if err != nil {
				t.Error(err)
				return
			}
			arns <- x.ARN
		}(i)
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := <-b.calls
			_ = b.exec.SendTaskHeartbeat(context.Background(), c.Token)
			if err := b.exec.SendTaskSuccess(context.Background(), c.Token, json.RawMessage(`{"outcome":"accept"}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(arns)
	for arn := range arns {
		if got := b.wait(t, arn); got.Status != executor.StatusSucceeded {
			t.Errorf("%s: %+v", arn, got)
		}
	}
}
