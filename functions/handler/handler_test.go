package handler_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// fixture is the worker service of the built-in implementation flow over
// the embedded store and sink with fake tokens and launcher, one running
// run "r1", and both Lambda handlers built as the functions build them.
type fixture struct {
	svc    *worker.Service
	tokens *workertest.FakeTokens
	launch *workertest.FakeLauncher
	dir    string
	http   handler.HTTPFunc
	sqs    handler.SQSFunc
}

func setup(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	flowsDir := filepath.Join(dir, "flows")
	workertest.WriteFiles(t, flowsDir, workertest.ImplementationFlow(t))
	fl, err := flow.Load(flowsDir, "implementation")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.Parse("task.md", []byte("---\nid: t1\ntitle: A task\n---\nDo it.\n"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	cfg.Supervisor.Enabled = new(bool) // not about the supervisor layer: no extra turns
	env := &worker.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	f := &fixture{tokens: &workertest.FakeTokens{}, launch: &workertest.FakeLauncher{}, dir: dir}
	f.svc = worker.New(worker.Config{Store: st, Sink: fs.New(dir), Tokens: f.tokens, Launcher: f.launch,
		Minter: &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		APIURL: "https://api.example.test",
		Env:    func(context.Context, string) (*worker.RunEnv, error) { return env, nil }})
	f.launch.Exchange = func(ctx context.Context, v string) (string, error) { // the runner's exchange
		b, err := f.svc.ExchangeBootstrap(ctx, "Bearer "+v)
		return b.Handle, err
	}
	run := stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: filepath.Join(dir, "task.md"), CreatedAt: time.Now()}
	if err := st.CreateRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	f.http = handler.HTTPAPI(httpapi.New(f.svc), f.svc.Drain)
	f.sqs = handler.SQS(func(ctx context.Context, body string) error {
		var m worker.Message
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return err
		}
		return f.svc.Dispatch(ctx, m)
	}, nil, f.svc.Drain)
	return f
}

// apiEvent is an HTTP API payload-2.0 event as API Gateway sends it:
// header names lower-cased, the query string raw, the route key set.
func apiEvent(method, path, query string, headers map[string]string, body []byte, b64 bool) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + path, RawPath: path, RawQueryString: query,
		Headers: map[string]string{"host": "abc123.execute-api.us-east-1.amazonaws.com", "user-agent": "stratus-runner"},
	}
	for k, v := range headers {
		ev.Headers[k] = v
	}
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = path
	ev.RequestContext.DomainName = "abc123.execute-api.us-east-1.amazonaws.com"
	ev.RequestContext.Stage = "$default"
	if b64 {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	} else {
		ev.Body = string(body)
	}
	return ev
}

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m" + string(rune('1'+i)), Body: b, EventSource: "aws:sqs"})
	}
	return ev
}

func dispatchBody(node, token string) string {
	b, _ := json.Marshal(worker.Message{RunID: "r1", Node: node, Kind: "agent", TaskToken: token})
	return string(b)
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var eb httpapi.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); err != nil {
		t.Fatalf("error body %q is not the JSON error shape: %v", body, err)
	}
	return eb.Error.Code
}

// The whole worker path through both Lambda handlers (docs/architecture.md §
// The path of one step): an SQS record dispatches the node, the worker fetches
// its prompt with API Gateway's lower-cased "authorization" header, stages a
// binary part API Gateway delivers base64-encoded, and submits; the Task state
// completes with the part named and the part's bytes are projected decoded.
func TestLambda_SQSDispatchThenWorkerRoutesThroughAPIGateway(t *testing.T) {
	f := setup(t)
	resp, err := f.sqs(context.Background(), sqsEvent(dispatchBody("planning", "tok-1")))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sqs handler = %+v, %v; want no batch item failures", resp, err)
	}
	specs := f.launch.Launched()
	if len(specs) != 1 || !captoken.IsHandle(specs[0].Handle) || specs[0].APIURL != "https://api.example.test" {
		t.Fatalf("launched %+v; want one worker with a wh- handle and the API URL", specs)
	}
	h := specs[0].Handle
	auth := map[string]string{"authorization": "Bearer " + h}

	r, err := f.http(context.Background(), apiEvent("GET", "/v1/worker/prompt", "task_id="+specs[0].TaskID, auth, nil, false))
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("prompt = %d %s, %v", r.StatusCode, r.Body, err)
	}
	var p worker.Payload
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil || p.TaskID != specs[0].TaskID || p.Agent != "planning" {
		t.Fatalf("payload %s (%v)", r.Body, err)
	}

	part := []byte{0x89, 'P', 'N', 'G', 0x00, 0xff, 0xfe, '\n'} // not UTF-8: API Gateway base64-encodes it
	r, err = f.http(context.Background(), apiEvent("POST", "/v1/worker/artifact", "name=plan.bin",
		map[string]string{"authorization": "Bearer " + h, "content-type": "application/octet-stream"}, part, true))
	if err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("artifact = %d %s, %v", r.StatusCode, r.Body, err)
	}
	r, err = f.http(context.Background(), apiEvent("POST", "/v1/worker/submit", "", auth, []byte("planned"), true))
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("submit = %d %s, %v", r.StatusCode, r.Body, err)
	}
	var sv worker.StepValue
	json.Unmarshal(f.tokens.Success("tok-1"), &sv)
	if sv.StepRef != "planning#1" || sv.Outcome != "done" || !slices.Equal(sv.Parts, []string{"plan.bin"}) {
		t.Fatalf("Task state completed with %s; want planning#1 done with part plan.bin", f.tokens.Success("tok-1"))
	}
	var found []byte
	filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "plan.bin" {
			found, _ = os.ReadFile(p)
		}
		return nil
	})
	if !bytes.Equal(found, part) {
		t.Fatalf("projected plan.bin = %q; want the decoded bytes %q", found, part)
	}
}

// The header name API Gateway lower-cases is what authenticates: the same
// request without it is refused 401, so the 200 above is the credential's.
func TestLambda_HTTPAPIWithoutAuthorizationIs401(t *testing.T) {
	f := setup(t)
	if resp, _ := f.sqs(context.Background(), sqsEvent(dispatchBody("planning", "tok-1"))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("dispatch failed: %+v", resp)
	}
	tid := f.launch.Launched()[0].TaskID
	r, err := f.http(context.Background(), apiEvent("GET", "/v1/worker/prompt", "task_id="+tid, nil, nil, false))
	if err != nil || r.StatusCode != http.StatusUnauthorized || errorCode(t, r.Body) != stratus.EUNAUTHORIZED {
		t.Fatalf("prompt without authorization = %d %s, %v; want 401 unauthorized", r.StatusCode, r.Body, err)
	}
	r, _ = f.http(context.Background(), apiEvent("GET", "/v1/worker/prompt", "task_id="+tid, map[string]string{"authorization": "Bearer wh-zzzzzzzz"}, nil, false))
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("prompt with an unknown handle = %d %s; want 401", r.StatusCode, r.Body)
	}
}

// The operator's hitl route is served by the same function
// (README.md § A human gate, step by step): it answers in the JSON error shape, not the "no
// route" 404.
func TestLambda_HITLRouteServed(t *testing.T) {
	f := setup(t)
	r, err := f.http(context.Background(), apiEvent("POST", "/v1/runs/r1/nodes/review/hitl", "",
		map[string]string{"authorization": "Bearer not-an-operator-token", "content-type": "application/json"}, []byte(`{"decision":"approve"}`), false))
	if err != nil || r.StatusCode != http.StatusUnauthorized || errorCode(t, r.Body) != stratus.EUNAUTHORIZED {
		t.Fatalf("hitl with a bad operator token = %d %s, %v; want 401 unauthorized", r.StatusCode, r.Body, err)
	}
	r, _ = f.http(context.Background(), apiEvent("GET", "/v1/nowhere", "", nil, nil, false))
	if r.StatusCode != http.StatusNotFound || errorCode(t, r.Body) != stratus.ENOTFOUND {
		t.Fatalf("unknown route = %d %s; want the JSON 404", r.StatusCode, r.Body)
	}
}

// A body marked base64 that is not is the caller's error (400 naming the
// body), not a failed invocation API Gateway would turn into a 500.
func TestLambda_BadBase64BodyIs400(t *testing.T) {
	f := setup(t)
	ev := apiEvent("POST", "/v1/worker/submit", "", map[string]string{"authorization": "Bearer wh-aaaaaaaa"}, nil, false)
	ev.Body, ev.IsBase64Encoded = "%%% not base64 %%%", true
	r, err := f.http(context.Background(), ev)
	if err != nil || r.StatusCode != http.StatusBadRequest || errorCode(t, r.Body) != stratus.EINVALID || !strings.Contains(r.Body, `"field":"body"`) {
		t.Fatalf("bad base64 = %d %s, %v; want 400 invalid on field body", r.StatusCode, r.Body, err)
	}
}

// ReportBatchItemFailures: only the records whose dispatch failed are
// reported, by message id, so SQS redelivers those alone; the handler
// itself never fails the batch.
func TestLambda_SQSReportsOnlyFailedRecords(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	fn := handler.SQS(func(_ context.Context, body string) error {
		mu.Lock()
		seen = append(seen, body)
		mu.Unlock()
		if body == "throttled" {
			return errors.New("ecs RunTask: ThrottlingException")
		}
		return nil
	}, nil, nil)
	resp, err := fn(context.Background(), sqsEvent("ok-1", "throttled", "ok-2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Fatalf("batch item failures = %+v; want only m2", resp.BatchItemFailures)
	}
	if slices.Sort(seen); !slices.Equal(seen, []string{"ok-1", "ok-2", "throttled"}) {
		t.Fatalf("dispatched %v; want every record once", seen)
	}
	// A batch with no failure answers an empty list, which SQS reads as
	// "delete them all" (null would too, but the JSON is explicit).
	resp, _ = fn(context.Background(), sqsEvent("ok-3"))
	if b, _ := json.Marshal(resp); string(b) != `{"batchItemFailures":[]}` {
		t.Fatalf("all-ok response = %s", b)
	}
}

// The records of different steps are dispatched at once (a record waiting
// out a pooled runner's pickup window holds up no other step's); those of
// one step (run_id and node) in their order; a record the invocation has
// no time left to start is reported for redelivery, not left to time the
// whole batch out.
func TestLambda_SQSRunsStepsAtOnceAndEachStepInOrder(t *testing.T) {
	msg := func(run, node, kind string) string {
		b, _ := json.Marshal(map[string]string{"run_id": run, "node": node, "kind": kind, "task_token": "tok"})
		return string(b)
	}
	var mu sync.Mutex
	var order []string
	started := make(chan string, 4)
	release := make(chan struct{})
	fn := handler.SQS(func(_ context.Context, body string) error {
		var m worker.Message
		json.Unmarshal([]byte(body), &m)
		started <- m.RunID + "/" + m.Node + "/" + m.Kind
		if m.Kind == "agent" {
			<-release // waits, as for a pooled runner
		}
		mu.Lock()
		order = append(order, m.RunID+"/"+m.Node+"/"+m.Kind)
		mu.Unlock()
		return nil
	}, nil, nil)
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := fn(context.Background(), sqsEvent(msg("r1", "build", "agent"), msg("r2", "build", "agent"), msg("r1", "build", "stop")))
		done <- resp
	}()
	// Both steps' first records start before either ends.
	got := map[string]bool{<-started: true, <-started: true}
	if !got["r1/build/agent"] || !got["r2/build/agent"] {
		t.Fatalf("started %v first; want both steps' dispatches at once", got)
	}
	close(release)
	resp := <-done
	<-started // r1's stop
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if i, j := slices.Index(order, "r1/build/agent"), slices.Index(order, "r1/build/stop"); i < 0 || j < i {
		t.Errorf("order %v: r1's stop ran before its dispatch", order)
	}

	// No time left: the record is not started, and comes back.
	ctx, cancel := context.WithTimeout(context.Background(), handler.DispatchStartMargin/2)
	defer cancel()
	resp, _ = fn(ctx, sqsEvent(msg("r3", "build", "stop")))
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m1" {
		t.Errorf("with %s left: failures %+v; want m1 for redelivery", handler.DispatchStartMargin/2, resp.BatchItemFailures)
	}
	select {
	case s := <-started:
		t.Errorf("%s was dispatched with no time left to", s)
	default:
	}
}

// Background work the handler started ends before the invocation does
// (Lambda freezes the environment between invocations).
func TestLambda_AfterRunsBeforeReturn(t *testing.T) {
	var calls int
	h := handler.HTTPAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), func() { calls++ })
	if r, _ := h(context.Background(), apiEvent("GET", "/v1/healthz", "", nil, nil, false)); r.StatusCode != 204 || calls != 1 {
		t.Fatalf("status %d, after ran %d times; want 204 and once", r.StatusCode, calls)
	}
	s := handler.SQS(func(context.Context, string) error { return nil }, nil, func() { calls++ })
	s(context.Background(), sqsEvent("x"))
	if calls != 2 {
		t.Fatalf("after ran %d times in all; want 2", calls)
	}
}

// The host the worker API sees — which, without STRATUS_API_URL, becomes the
// address workers are told to call — is the domain API Gateway recorded the
// request came to, never a Host header the client wrote.
func TestHTTPAPI_HostIsTheDomainAPIGatewayRecorded(t *testing.T) {
	var host string
	h := handler.HTTPAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host = r.Host; w.WriteHeader(204) }), nil)
	ev := events.APIGatewayV2HTTPRequest{RawPath: "/v1/healthz", Headers: map[string]string{"Host": "evil.example"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "abc123.execute-api.eu-west-1.amazonaws.com",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/healthz"}}}
	if _, err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if host != "abc123.execute-api.eu-west-1.amazonaws.com" {
		t.Errorf("the handler saw host %q; want the domain API Gateway recorded", host)
	}
}

// A request still at work when the function's time runs out (template.yaml:
// the worker API's timeout is under API Gateway's 30 s ceiling) ends
// ResponseMargin before the function's deadline and is answered 503, which
// a worker retries, not the 500 its cancelled work caused; a 500 of its own
// before then stays a 500.
func TestHTTPAPI_RequestOutOfTimeIs503(t *testing.T) {
	var sawDeadline time.Time
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawDeadline, _ = r.Context().Deadline()
		<-r.Context().Done()
		httpapi.WriteError(w, r.Context().Err())
	})
	dl := time.Now().Add(handler.ResponseMargin + 200*time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	r, err := handler.HTTPAPI(slow, nil)(ctx, apiEvent("POST", "/v1/worker/submit", "Bearer x", nil, nil, false))
	if err != nil || r.StatusCode != 503 || !strings.Contains(r.Body, "ran out of time") || r.Headers["Retry-After"] == "" {
		t.Fatalf("a request past its time: %d %v %s %v; want 503 with Retry-After, saying it ran out of time", r.StatusCode, err, r.Body, r.Headers)
	}
	if want := dl.Add(-handler.ResponseMargin); !sawDeadline.Equal(want) {
		t.Errorf("the request's deadline is %v; want the function's less ResponseMargin, %v", sawDeadline, want)
	}
	failing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, errors.New("boom")) })
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if r, _ := handler.HTTPAPI(failing, nil)(ctx2, apiEvent("GET", "/v1/healthz", "", nil, nil, false)); r.StatusCode != 500 {
		t.Errorf("a 500 in time became %d", r.StatusCode)
	}
}

// docs/security.md § Operator replies on AWS: the caller API Gateway's
// IAM authorizer verified (requestContext.authorizer.iam) reaches the
// worker API in the request's context, and with it the operator route
// takes the reply (here it goes on to the flow, which has no such node:
// the 404 names the node); without one — no authorizer, or one a client
// wrote into a header the adapter also uses — the route answers 403.
func TestLambda_OperatorRouteTakesTheIAMIdentityAPIGatewayVerified(t *testing.T) {
	f := setup(t)
	const path = "/v1/operator/runs/r1/nodes/review/hitl"
	body := []byte(`{"decision":"approve"}`)
	signed := apiEvent("POST", path, "", map[string]string{"content-type": "application/json"}, body, false)
	signed.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: "AKIAEXAMPLE", AccountID: "111122223333", CallerID: "AIDAEXAMPLE", UserARN: "arn:aws:iam::111122223333:user/alice", UserID: "AIDAEXAMPLE"}}
	r, err := f.http(context.Background(), signed)
	if err != nil || r.StatusCode != http.StatusNotFound || errorCode(t, r.Body) != stratus.ENOTFOUND || !strings.Contains(r.Body, `"field":"node"`) {
		t.Fatalf("signed reply = %d %s, %v; want it past authorization, to the flow's 404 on field node", r.StatusCode, r.Body, err)
	}
	forged, _ := json.Marshal(signed.RequestContext)
	for name, ev := range map[string]events.APIGatewayV2HTTPRequest{
		"no authorizer": apiEvent("POST", path, "", map[string]string{"content-type": "application/json"}, body, false),
		"an authorizer written in a header": apiEvent("POST", path, "", map[string]string{"content-type": "application/json",
			"x-golambdaproxyapigatewaycontext": string(forged)}, body, false),
	} {
		r, err := f.http(context.Background(), ev)
		if err != nil || r.StatusCode != http.StatusForbidden || errorCode(t, r.Body) != stratus.EFORBIDDEN || !strings.Contains(r.Body, "AWS_IAM") {
			t.Errorf("%s: %d %s, %v; want 403 naming the AWS_IAM authorizer", name, r.StatusCode, r.Body, err)
		}
	}
}

// The identity reaches any handler the adapter serves as API Gateway
// recorded it, field by field.
func TestHTTPAPI_IAMIdentityIsTheEventsAuthorizer(t *testing.T) {
	var got httpapi.IAMIdentity
	var ok bool
	h := handler.HTTPAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = httpapi.IAMIdentityFrom(r.Context())
		w.WriteHeader(204)
	}), nil)
	ev := apiEvent("POST", "/v1/operator/runs/r1/nodes/gate/hitl", "", nil, nil, false)
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: "ASIAEXAMPLE", AccountID: "111122223333", CallerID: "AROAEXAMPLE:alice", PrincipalOrgID: "o-abc",
		UserARN: "arn:aws:sts::111122223333:assumed-role/Operator/alice", UserID: "AROAEXAMPLE:alice"}}
	if _, err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	want := httpapi.IAMIdentity{AccessKey: "ASIAEXAMPLE", AccountID: "111122223333", CallerID: "AROAEXAMPLE:alice",
		UserARN: "arn:aws:sts::111122223333:assumed-role/Operator/alice", UserID: "AROAEXAMPLE:alice", PrincipalOrgID: "o-abc"}
	if !ok || got != want {
		t.Errorf("identity %+v (%v); want %+v", got, ok, want)
	}
	if _, err := h(context.Background(), apiEvent("POST", "/v1/runs/r1/nodes/gate/hitl", "", nil, nil, false)); err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("a request without an authorizer carries identity %+v", got)
	}
}
