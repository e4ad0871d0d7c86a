package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// bundle is the worker service over a SQLite store and an fs sink in a temp
// dir, fake task tokens and a fake launcher, one running run "r1", and the
// real handler, both served by srv and reachable directly (fuzz targets).
type bundle struct {
	srv     *httptest.Server
	handler *httpapi.Handler
	svc     *worker.Service
	tokens  *workertest.FakeTokens
	launch  *workertest.FakeLauncher
	run     stratus.Run
	dir     string
	fresh   int // dispatchFresh calls so far
}

// setup is setupFlow with the built-in implementation flow.
func setup(tb testing.TB) *bundle {
	tb.Helper()
	return setupFlow(tb, workertest.ImplementationFlow(tb))
}

// setupFlow is setup with the flows directory given as files (path → text);
// the flow loaded is "implementation".
func setupFlow(tb testing.TB, files map[string]string) *bundle {
	tb.Helper()
	return setupRun(tb, files, nil)
}

// setupRun is setupFlow with the run "r1" changed by edit before it is
// stored (nil: as is).
func setupRun(tb testing.TB, files map[string]string, edit func(*stratus.Run)) *bundle {
	tb.Helper()
	dir := tb.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return setupStore(tb, dir, files, edit, st, fs.New(dir).Private(worker.StateDirName))
}

// setupStore is setupRun on store st and sink sk, in work dir dir.
func setupStore(tb testing.TB, dir string, files map[string]string, edit func(*stratus.Run), st store.Store, sk sink.Sink) *bundle {
	tb.Helper()
	flowsDir := filepath.Join(dir, "flows")
	workertest.WriteFiles(tb, flowsDir, files)
	fl, err := flow.Load(flowsDir, "implementation")
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := task.Parse("task.md", []byte("---\nid: t1\ntitle: A task\n---\nDo it.\n"))
	if err != nil {
		tb.Fatal(err)
	}
	b := &bundle{tokens: &workertest.FakeTokens{}, launch: &workertest.FakeLauncher{}, dir: dir}
	cfg := config.Default()
	cfg.Supervisor.Enabled = new(bool) // these tests are not about the supervisor layer: no extra turns
	env := &worker.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	b.svc = worker.New(worker.Config{Store: st, Sink: sk, Tokens: b.tokens, Launcher: b.launch,
		Minter: &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		Env:    func(context.Context, string) (*worker.RunEnv, error) { return env, nil }})
	b.launch.Exchange = func(ctx context.Context, v string) (string, error) { // the runner's exchange
		b, err := b.svc.ExchangeBootstrap(ctx, "Bearer "+v)
		return b.Handle, err
	}
	b.handler = httpapi.New(b.svc)
	b.srv = httptest.NewServer(b.handler)
	tb.Cleanup(b.srv.Close)
	b.svc.APIURL = b.srv.URL
	b.run = stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "A task", Flow: "implementation", Status: stratus.RunRunning, WorkDir: dir, TaskPath: filepath.Join(dir, "task.md"), CreatedAt: time.Now()}
	if edit != nil {
		edit(&b.run)
	}
	if err := st.CreateRun(context.Background(), b.run); err != nil {
		tb.Fatal(err)
	}
	return b
}

// dispatchSpec dispatches node and returns the last launch spec: the
// worker's wh- handle and the dispatch task id.
func (b *bundle) dispatchSpec(tb testing.TB, node, token string) launch.Spec {
	tb.Helper()
	if err := b.svc.Dispatch(context.Background(), worker.Message{RunID: b.run.ID, Node: node, Kind: "agent", TaskToken: token}); err != nil {
		tb.Fatal(err)
	}
	n, last := b.launch.Last()
	if n == 0 {
		tb.Fatalf("dispatch of %s launched no worker", node)
	}
	return last
}

// dispatch dispatches node and returns the worker's handle.
func (b *bundle) dispatch(tb testing.TB, node, token string) string {
	tb.Helper()
	return b.dispatchSpec(tb, node, token).Handle
}

// dispatchFresh starts a fresh visit of the planning node (a running
// attempt 1) under a new task token and returns its launch spec; it fails
// unless every dispatchFresh so far launched exactly one worker.
func (b *bundle) dispatchFresh(tb testing.TB) launch.Spec {
	tb.Helper()
	b.fresh++
	spec := b.dispatchSpec(tb, "planning", fmt.Sprintf("tok-%s-%d", b.run.ID, b.fresh))
	if n, _ := b.launch.Last(); n != b.fresh {
		tb.Fatalf("dispatch %d launched %d workers in all", b.fresh, n)
	}
	return spec
}

func (b *bundle) do(t *testing.T, method, path, auth, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// docs/contracts.md § Routes, § The shape: fetch IN, stage
// a part, submit OUT; the step completes its Task state with a small value.
func TestWorkerAPI_FetchStageSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	if !captoken.IsHandle(h) {
		t.Fatalf("handle %q", h)
	}
	code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.1", "bearer "+h, "")
	if code != 200 {
		t.Fatalf("prompt: %d %s", code, body)
	}
	var p worker.Payload
	json.Unmarshal([]byte(body), &p)
	if p.TaskID != "r1.planning.1" || p.Attempt != 1 || p.Agent != "planning" || !strings.Contains(p.Prompt, "task t1") || p.Context == nil || p.Engine == nil {
		t.Fatalf("payload = %+v", p)
	}
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=plan.md", "Bearer "+h, "# Plan\n"); code != 204 {
		t.Fatalf("artifact: %d %s", code, body)
	}
	if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "planned"); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sv worker.StepValue
	json.Unmarshal(b.tokens.Success("tok-1"), &sv)
	if sv.StepRef != "planning#1" || sv.Outcome != "done" || len(sv.Parts) != 1 || sv.Parts[0] != "plan.md" {
		t.Fatalf("step value = %s", b.tokens.Success("tok-1"))
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/plan.md")); string(got) != "# Plan\n" {
		t.Errorf("plan.md = %q", got)
	}
	// docs/contracts.md § Routes: a second Final is 409.
	if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "again"); code != 409 || !strings.Contains(body, `"code":"conflict"`) {
		t.Errorf("second submit: %d %s", code, body)
	}
}

// docs/contracts.md § Bearer authentication: missing, unknown, foreign
// credentials.
func TestWorkerAPI_AuthErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	for name, tc := range map[string]struct {
		path, auth string
		want       int
	}{
		"missing":        {"/v1/worker/prompt?task_id=r1.planning.1", "", 401},
		"bad scheme":     {"/v1/worker/prompt?task_id=r1.planning.1", "Basic " + h, 401},
		"unknown handle": {"/v1/worker/prompt?task_id=r1.planning.1", "Bearer wh-00000000", 401},
		"garbage token":  {"/v1/worker/prompt?task_id=r1.planning.1", "Bearer abc.def", 401},
		"other task":     {"/v1/worker/prompt?task_id=r1.review.1", "Bearer " + h, 403},
	} {
		code, body := b.do(t, "GET", tc.path, tc.auth, "")
		var eb httpapi.ErrorBody
		if code != tc.want || json.Unmarshal([]byte(body), &eb) != nil || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with the JSON error shape", name, code, body, tc.want)
		}
	}
}

// docs/contracts.md § Files are the server's job: a bad part name is 400 and
// nothing is staged.
func TestWorkerAPI_BadPartNameRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	code, body := b.do(t, "POST", "/v1/worker/artifact?name=../x", "Bearer "+h, "x")
	if code != 400 || !strings.Contains(body, `"field":"name"`) {
		t.Fatalf("%d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "workspace/tasks/t1/x")); err == nil {
		t.Error("file written for a rejected part")
	}
}

// A failed result (runner terminal other than Captured) fails the Task state.
func TestWorkerAPI_FailedResultFailsTheState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	code, body := b.do(t, "POST", "/v1/worker/result", "Bearer "+h, `{"task_id":"r1.planning.1","ok":false,"value":{"terminal":"TimedOut","reason":"deadline"}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if f := b.tokens.Failure("tok-1"); !strings.Contains(f, worker.ErrWorkerFailed) || !strings.Contains(f, "TimedOut") {
		t.Errorf("failure = %q", f)
	}
	// Any write after the attempt ended is fenced.
	if code, _ := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "late"); code != 409 {
		t.Errorf("late submit: %d", code)
	}
}

// internal/failclass: a failed result records the runner's class and reset
// on the attempt; a class that is none of the six (or a reset that is no
// RFC 3339 time) is a 400 naming the field and what is valid, and records
// nothing; a result without a class (an older runner's, or a bare reason)
// is classified here by the same rules. The Task state then fails with
// ErrWorkerFailed for a class that is not transient, and with the retry
// policy's error (internal/retry: a retry, a fallback, a park) for one
// that is.
func TestWorkerAPI_FailedResultRecordsItsClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		value     string
		wantCode  int
		wantField string // of a 400
		wantClass string
		wantRetry time.Time
	}{
		{"the runner's class and reset", `{"terminal":"Failed","reason":"codex turn failed: You've hit your usage limit.","class":"rate_limited","retry_at":"2026-12-04T18:00:00+01:00"}`,
			200, "", "rate_limited", time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)},
		{"the runner's class is kept", `{"terminal":"Failed","reason":"the model refused","class":"provider_unavailable"}`, 200, "", "provider_unavailable", time.Time{}},
		{"an unknown class", `{"terminal":"Failed","reason":"x","class":"overloaded"}`, 400, "class", "", time.Time{}},
		{"a class that is no string", `{"terminal":"Failed","reason":"x","class":7}`, 400, "class", "", time.Time{}},
		{"a class without a terminal", `{"reason":"x","class":"Quality"}`, 400, "class", "", time.Time{}},
		{"a reset that is no time", `{"terminal":"Failed","reason":"x","class":"rate_limited","retry_at":"in an hour"}`, 400, "retry_at", "", time.Time{}},
		{"an older runner's value: classified here", `{"terminal":"Failed","reason":"claude: API Error: 529 Overloaded. This is a server-side issue."}`, 200, "", "provider_unavailable", time.Time{}},
		{"a null class: classified here", `{"terminal":"Failed","reason":"claude: API Error: Request rejected (429) · slow down","class":null}`, 200, "", "rate_limited", time.Time{}},
		{"a reset without a class: classified here, the reset kept", `{"terminal":"Failed","reason":"claude: API Error: Request rejected (429) · slow down","retry_at":"2026-12-04T18:00:00Z"}`,
			200, "", "rate_limited", time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)},
		{"a deadline: classified here", `{"terminal":"TimedOut","reason":"the engine did not finish within its deadline of 600000 ms"}`, 200, "", "timeout", time.Time{}},
		{"a bare reason: classified here", `"codex turn failed: You’ve hit your usage limit. Try again at Dec 7th, 2026 5:00 PM."`, 200, "", "rate_limited", time.Date(2026, 12, 7, 17, 0, 0, 0, time.Local)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := b.dispatch(t, "planning", "tok-1")
			code, body := b.do(t, "POST", "/v1/worker/result", "Bearer "+h, `{"task_id":"r1.planning.1","ok":false,"value":`+tc.value+`}`)
			if code != tc.wantCode {
				t.Fatalf("%d %s; want %d", code, body, tc.wantCode)
			}
			att, err := b.svc.Store.GetAttempt(context.Background(), "r1.planning.1", 1)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCode == 400 {
				if !strings.Contains(body, `"field":"`+tc.wantField+`"`) || (tc.wantField == "class" && !strings.Contains(body, "provider_unavailable, rate_limited, network_unavailable, timeout, quality, infrastructure")) {
					t.Errorf("400 %s; want the field %s named, and what is valid", body, tc.wantField)
				}
				if att.Status != stratus.AttemptRunning || b.tokens.Failure("tok-1") != "" {
					t.Errorf("a refused result recorded something: attempt %s, task failure %q", att.Status, b.tokens.Failure("tok-1"))
				}
				return
			}
			if att.Status != stratus.AttemptFailed || att.Class != tc.wantClass || !att.RetryAt.Equal(tc.wantRetry) {
				t.Errorf("attempt %s class %q retry_at %v; want failed, %q, %v", att.Status, att.Class, att.RetryAt, tc.wantClass, tc.wantRetry)
			}
			want := []string{worker.ErrWorkerFailed}
			if failclass.Transient(tc.wantClass) {
				want = []string{compiler.ErrProviderUnavailable, compiler.ErrRateLimited, compiler.ErrNetworkUnavailable, compiler.ErrBlocked}
			}
			f := b.tokens.Failure("tok-1")
			if !slices.ContainsFunc(want, func(name string) bool { return strings.HasPrefix(f, name+": ") }) {
				t.Errorf("task failure %q; want one of %v for class %s", f, want, tc.wantClass)
			}
		})
	}
}

// A redelivered dispatch message does not create a second step or worker.
func TestDispatch_RedeliveryIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dispatch(t, "planning", "tok-1")
	b.dispatch(t, "planning", "tok-1")
	if n := len(b.launch.Launched()); n != 1 {
		t.Fatalf("%d workers launched", n)
	}
}

// An evaluator's findings decide accept/rework against gate_severity (worc:
// default high); malformed findings fail closed.
func TestSubmit_EvaluatorOutcome(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"findings":[]}`: "accept",
		`{"findings":[{"severity":"low","path":"a","what":"w","fix":"f"}]}`:  "accept",
		`{"findings":[{"severity":"high","path":"a","what":"w","fix":"f"}]}`: "rework",
		"```json\n{\"findings\":[{\"severity\":\"critical\"}]}\n```":         "rework",
		`looks good to me`:                     "invalid",
		`{"findings":[{"severity":"urgent"}]}`: "invalid",
	} {
		b := setup(t)
		h := b.dispatch(t, "review", "tok-r")
		if code, resp := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, body); code != 200 {
			t.Fatalf("%s: %d %s", body, code, resp)
		}
		var sv worker.StepValue
		json.Unmarshal(b.tokens.Success("tok-r"), &sv)
		if sv.Outcome != want {
			t.Errorf("%s: outcome %q, want %q (%s)", body, sv.Outcome, want, sv.Reason)
		}
	}
}

// A worker that ends without a result fails its step at once, with the
// exit status in the reason, instead of leaving the state to time out.
func TestDispatch_WorkerExitWithoutResultFailsTheStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dispatch(t, "planning", "tok-x")
	spec := b.launch.Launched()[0]
	spec.OnExit(errors.New("exit status 2"))
	if f := b.tokens.Failure("tok-x"); !strings.Contains(f, "worker exited (exit status 2) without a result") {
		t.Fatalf("failure = %q", f)
	}
	// A worker that delivered its result and then exits changes nothing.
	h := b.dispatch(t, "implementation", "tok-y")
	if code, _ := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "done"); code != 200 {
		t.Fatal(code)
	}
	b.launch.Launched()[1].OnExit(nil)
	if _, failed := b.tokens.Failures()["tok-y"]; failed {
		t.Error("an exit after the result failed the step")
	}
}

// A part may not overwrite another node's projection (<ctx-dir>/<node>.md).
func TestWorkerAPI_PartCannotShadowAProjection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "fixing", "tok-f")
	code, body := b.do(t, "POST", "/v1/worker/artifact?name=implementation.md", "Bearer "+h, "clobbered")
	if code != 400 || !strings.Contains(body, "projection of node implementation") {
		t.Fatalf("%d %s", code, body)
	}
}

// docs/contracts.md § The event stream counters: a negative or non-finite
// count is refused.
func TestWorkerAPI_StatsMustBePlausible(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-s")
	for _, body := range []string{`{"prompt_tokens":-100}`, `{"cost_usd":-1}`, `{"cost_usd":1e308}`, `{"steps":-1}`} {
		if code, resp := b.do(t, "POST", "/v1/worker/stats", "Bearer "+h, body); code != 400 {
			t.Errorf("%s: %d %s", body, code, resp)
		}
	}
	if code, _ := b.do(t, "POST", "/v1/worker/stats", "Bearer "+h, `{}`); code != 204 {
		t.Errorf("empty stats: %d", code)
	}
}

// A request without a credential is refused before its body is read.
func TestWorkerAPI_UnauthenticatedLargeBodyIs401(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.do(t, "POST", "/v1/worker/submit", "", strings.Repeat("x", 40<<20))
	if code != 401 {
		t.Fatalf("%d", code)
	}
}

// An unclean path is a JSON 404 like any unknown path, never a redirect.
func TestWorkerAPI_UncleanPathIs404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"//v1/healthz", "/v1/agents//render-size", "/v1/./healthz", "/v1/healthz/"} {
		req, _ := http.NewRequest("GET", b.srv.URL+p, nil)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s = %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
