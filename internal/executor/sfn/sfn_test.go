package sfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/executortest"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	"github.com/stratusflow/stratus/internal/flow"
)

const testRole = "arn:aws:iam::123456789012:role/stratus-test"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

var seq atomic.Int64

// uniqueName is a queue / state machine name unique on the shared server.
func uniqueName(t *testing.T) string {
	n := unsafeName.ReplaceAllString(t.Name(), "-")
	if len(n) > 50 {
		n = n[len(n)-50:]
	}
	return fmt.Sprintf("%s-%d-%d", n, time.Now().UnixNano()%1e9, seq.Add(1))
}

// queue is an SQS queue on moto with a receive buffer.
type queue struct {
	c   *sqs.Client
	url string

	mu      sync.Mutex
	pending []string
}

func newQueue(t *testing.T, cfg aws.Config, name string) *queue {
	t.Helper()
	c := sqs.NewFromConfig(cfg)
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return &queue{c: c, url: aws.ToString(out.QueueUrl)}
}

// account is the account id moto put in the queue URL (…/ACCOUNT/NAME).
func (q *queue) account() string {
	parts := strings.Split(q.url, "/")
	return parts[len(parts)-2]
}

// next returns the next message body, waiting until ctx ends.
func (q *queue) next(ctx context.Context) (json.RawMessage, error) {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			b := q.pending[0]
			q.pending = q.pending[1:]
			q.mu.Unlock()
			return json.RawMessage(b), nil
		}
		q.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, err := q.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		for _, m := range out.Messages {
			q.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle})
			q.mu.Lock()
			q.pending = append(q.pending, aws.ToString(m.Body))
			q.mu.Unlock()
		}
	}
}

func stateMachineARN(account, name string) string {
	return fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", awstest.Region, account, name)
}

// The Step Functions executor passes the suite every executor.Executor
// must (DESIGN.md § Testing stand-ins), on moto's real execution: each
// subtest gets its own queue and state machine, deployed from the
// definition it starts. moto 5.2.1 differs from AWS in two places the
// suite relaxes (executortest.Quirks): a completed token is answered
// InvalidToken instead of TaskTimedOut, StopExecution of an execution
// waiting on a callback takes effect only when that callback arrives, a
// retried callback state keeps its token and that token's first failure,
// and a States.Runtime cause is prefixed with the state and event id.
func TestConformance(t *testing.T) {
	cfg := awstest.Moto(t).Config()
	x := sfn.New(sfn.NewClient(cfg), sfn.Options{RoleARN: testRole, PollInterval: 200 * time.Millisecond})
	executortest.Run(t, func(t *testing.T) executortest.Harness {
		name := uniqueName(t)
		q := newQueue(t, cfg, name)
		return executortest.Harness{
			Executor:     x,
			StateMachine: stateMachineARN(q.account(), name),
			QueueURL:     q.url,
			NextMessage:  q.next,
			Quirks: executortest.Quirks{SpentTokenInvalid: true, StopAwaitsCallback: true,
				RuntimeCausePrefixed: true},
		}
	})
}

// Options.RoleARN deploys what StartExecution is given: the state machine
// is created from the definition (Substitutions applied first, since
// moto, like the API, applies no DefinitionSubstitutions) and updated when
// a later start brings another definition. Without RoleARN nothing is
// deployed: an absent state machine is ENOTFOUND.
func TestStartExecution_DeploysTheDefinition(t *testing.T) {
	cfg := awstest.Moto(t).Config()
	q := newQueue(t, cfg, uniqueName(t))
	name := uniqueName(t)
	arn := stateMachineARN(q.account(), name)
	x := sfn.New(sfn.NewClient(cfg), sfn.Options{RoleARN: testRole, PollInterval: 100 * time.Millisecond,
		Substitutions: map[string]string{"Greeting": `say "hi"`}})
	ctx := context.Background()
	run := func(def string) executor.Execution {
		t.Helper()
		e, err := x.StartExecution(ctx, executor.StartInput{StateMachine: arn, Definition: []byte(def), Name: uniqueName(t)})
		if err != nil {
			t.Fatalf("StartExecution: %v", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got, err := x.WaitExecution(wctx, e.ARN)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// An object result: moto 5.2.1 returns a top-level string output
	// unquoted (not JSON).
	first := run(`{"StartAt":"p","States":{"p":{"Type":"Pass","Result":{"greeting":"${Greeting}"},"End":true}}}`)
	var out struct{ Greeting string }
	if first.Status != executor.StatusSucceeded || json.Unmarshal(first.Output, &out) != nil || out.Greeting != `say "hi"` {
		t.Errorf("first definition: %s %s, want the substituted greeting", first.Status, first.Output)
	}
	second := run(`{"StartAt":"p","States":{"p":{"Type":"Pass","Result":{"v":2},"End":true}}}`)
	if second.Status != executor.StatusSucceeded || !strings.Contains(string(second.Output), `"v"`) {
		t.Errorf("second definition: %s %s, want it deployed over the first", second.Status, second.Output)
	}

	plain := sfn.New(sfn.NewClient(cfg), sfn.Options{})
	_, err := plain.StartExecution(ctx, executor.StartInput{StateMachine: stateMachineARN(q.account(), uniqueName(t)),
		Definition: []byte(`{"StartAt":"p","States":{"p":{"Type":"Pass","End":true}}}`), Name: "n"})
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "StateMachineDoesNotExist") {
		t.Errorf("start without RoleARN on an absent state machine: %v, want ENOTFOUND naming StateMachineDoesNotExist", err)
	}
	if _, err := plain.StartExecution(ctx, executor.StartInput{StateMachine: "implementation"}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("start with a bare name: %v, want EINVALID (an ARN is needed on AWS)", err)
	}
}

// DESIGN.md § The path of one step, 5, on moto's interpreter: the compiled
// machine of a flow deploys as is, and a worker state that fails passes
// "<node>.stop", whose plain sqs:sendMessage puts a stop message (no task
// token, the caught error) on the dispatch queue before the Catch routes
// to failed.
func TestCompiledFlow_CatchSendsStopOnMoto(t *testing.T) {
	cfg := awstest.Moto(t).Config()
	name := uniqueName(t)
	q := newQueue(t, cfg, name)
	f, err := flow.Parse("t.yaml", []byte(`flow:
  name: t
  task_type: t
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: publish }
`))
	if err != nil {
		t.Fatal(err)
	}
	def, err := compiler.Compile(f, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := sfn.New(sfn.NewClient(cfg), sfn.Options{RoleARN: testRole, PollInterval: 100 * time.Millisecond,
		Substitutions: map[string]string{"DispatchQueueUrl": q.url}})
	ctx := context.Background()
	e, err := x.StartExecution(ctx, executor.StartInput{StateMachine: stateMachineARN(q.account(), name), Definition: def, Name: "r-1", Input: json.RawMessage(`{"run_id":"r-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var dispatch struct {
		Node, Kind string
		Token      string `json:"task_token"`
	}
	body, err := q.next(mctx)
	if err != nil || json.Unmarshal(body, &dispatch) != nil || dispatch.Node != "build" || dispatch.Token == "" {
		t.Fatalf("dispatch message %s (%v)", body, err)
	}
	if err := x.SendTaskFailure(ctx, dispatch.Token, "stratus.WorkerFailed", "exit 3"); err != nil {
		t.Fatal(err)
	}
	body, err = q.next(mctx)
	var stop struct {
		RunID string                 `json:"run_id"`
		Node  string                 `json:"node"`
		Kind  string                 `json:"kind"`
		Token string                 `json:"task_token"`
		Error struct{ Error string } `json:"error"`
	}
	if err != nil || json.Unmarshal(body, &stop) != nil || stop.RunID != "r-1" || stop.Node != "build" || stop.Kind != compiler.KindStop ||
		stop.Token != "" || stop.Error.Error != "stratus.WorkerFailed" {
		t.Errorf("stop message %s (%v), want run r-1, node build, kind stop, no token, the caught error", body, err)
	}
	got, err := x.WaitExecution(mctx, e.ARN)
	if err != nil || got.Status != executor.StatusFailed || got.Error != compiler.ErrFailed {
		t.Errorf("execution %s %s (%v), want FAILED %s", got.Status, got.Error, err, compiler.ErrFailed)
	}
}

// fakeSFN answers every Step Functions call with one error (awsJson1_0),
// counting the calls.
func fakeSFN(t *testing.T, status int, code string) (aws.Config, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":%q,"message":"fake %s"}`, code, code)
	}))
	t.Cleanup(srv.Close)
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 3}, &calls
}

// fastBackoff keeps the SDK's retry delays short in tests.
func fastBackoff(o *awssfn.Options) {
	o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, time.Millisecond)
}

// TaskTimedOut and InvalidToken on a callback are final, not retried — one
// request, even when answered with a 5xx the SDK would otherwise retry — and
// map to the codes callers do not retry.
func TestCallbacks_FinalErrorsAreNotRetried(t *testing.T) {
	cases := []struct{ code, want string }{
		{executor.ErrTaskTimedOut, stratus.ECONFLICT},
		{executor.ErrInvalidToken, stratus.EINVALID},
		{executor.ErrTaskDoesNotExist, stratus.ENOTFOUND},
	}
	for _, c := range cases {
		for _, status := range []int{400, 500} {
			t.Run(fmt.Sprintf("%s/%d", c.code, status), func(t *testing.T) {
				cfg, calls := fakeSFN(t, status, c.code)
				x := sfn.New(sfn.NewClient(cfg, fastBackoff), sfn.Options{})
				ctx := context.Background()
				for op, call := range map[string]func() error{
					"SendTaskSuccess":   func() error { return x.SendTaskSuccess(ctx, "tok", json.RawMessage(`{}`)) },
					"SendTaskFailure":   func() error { return x.SendTaskFailure(ctx, "tok", "e", "c") },
					"SendTaskHeartbeat": func() error { return x.SendTaskHeartbeat(ctx, "tok") },
				} {
					calls.Store(0)
					err := call()
					if n := calls.Load(); n != 1 {
						t.Errorf("%s: %d requests, want 1 (final, never retried)", op, n)
					}
					if stratus.ErrorCode(err) != c.want || executor.APIErrorName(err) != c.code {
						t.Errorf("%s: %v (code %s), want %s named %s", op, err, stratus.ErrorCode(err), c.want, c.code)
					}
				}
			})
		}
	}
}

// Throttling is retried by the SDK's retryer (all its attempts), then
// reported as a retryable infrastructure error (EINTERNAL) naming the AWS
// error.
func TestCallbacks_ThrottlingIsRetriedBySDK(t *testing.T) {
	cfg, calls := fakeSFN(t, 400, "ThrottlingException")
	x := sfn.New(sfn.NewClient(cfg, fastBackoff), sfn.Options{})
	err := x.SendTaskSuccess(context.Background(), "tok", json.RawMessage(`{}`))
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests, want 3 (cfg.RetryMaxAttempts)", n)
	}
	if stratus.ErrorCode(err) != stratus.EINTERNAL || !strings.Contains(err.Error(), "ThrottlingException") {
		t.Errorf("%v, want EINTERNAL naming ThrottlingException", err)
	}
}

// SendTaskFailure stays within Step Functions' limits (error 256, cause
// 32768 characters): a longer failure reason is cut, not refused, so the
// task still fails.
func TestSendTaskFailure_ClipsToTheAPILimits(t *testing.T) {
	var got struct{ Error, Cause string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), BaseEndpoint: aws.String(srv.URL)}
	x := sfn.New(sfn.NewClient(cfg), sfn.Options{})
	long := strings.Repeat("é", 40000)
	if err := x.SendTaskFailure(context.Background(), "tok", "worker."+strings.Repeat("E", 300), long); err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(got.Cause)); n != sfn.MaxCauseChars || !strings.HasSuffix(got.Cause, "…") || !strings.HasPrefix(got.Cause, "éé") {
		t.Errorf("cause of %d characters, want %d ending in …", n, sfn.MaxCauseChars)
	}
	if n := len([]rune(got.Error)); n != sfn.MaxErrorChars || !strings.HasPrefix(got.Error, "worker.") {
		t.Errorf("error of %d characters, want %d", n, sfn.MaxErrorChars)
	}
	if err := x.SendTaskFailure(context.Background(), "tok", "worker.Crashed", "exit 3"); err != nil || got.Error != "worker.Crashed" || got.Cause != "exit 3" {
		t.Errorf("short failure sent as %+v (%v)", got, err)
	}
}
