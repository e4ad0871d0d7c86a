package httpapi_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// workerCall is one credentialed worker route with a body it takes, for
// task tid.
type workerCall struct{ method, path, body string }

func workerCalls(tid string) []workerCall {
	return []workerCall{
		{"GET", "/v1/worker/prompt?task_id=" + tid, ""},
		{"GET", "/v1/worker/prompt", ""},
		{"GET", "/v1/worker/prompt/system?task_id=" + tid + "&attempt=1", ""},
		{"POST", "/v1/worker/artifact?name=notes.md", "notes"},
		{"POST", "/v1/worker/stats", `{"steps":1}`},
		{"POST", "/v1/worker/degradation", `{"tool":"t","error":"e","fallback":"f"}`},
		{"POST", "/v1/worker/upload", `{"bytes":10}`},
		{"GET", "/v1/worker/workspace/blob?key=x", ""},
		{"PUT", "/v1/worker/workspace/blob?key=x", "x"},
		{"POST", "/v1/worker/workspace/head", `{"from":"a","to":"b"}`},
		{"POST", "/v1/worker/result", `{"task_id":"` + tid + `","ok":false,"value":"gave up"}`},
		{"POST", "/v1/worker/submit", "done"},
	}
}

// secondRun is run r2 of the same work dir as b's run r1, served by an API
// of its own over b's store and HMAC key, as `stratus host` (or a second
// `stratus run` in the work dir) serves it.
func secondRun(t *testing.T, b *bundle) *bundle {
	t.Helper()
	env, err := b.svc.Env(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	r2 := &bundle{tokens: &workertest.FakeTokens{}, launch: &workertest.FakeLauncher{}, dir: b.dir}
	r2.svc = worker.New(worker.Config{RunID: "r2", Store: b.svc.Store, Sink: b.svc.Sink, Tokens: r2.tokens, Launcher: r2.launch,
		Minter: &captoken.Minter{Key: b.svc.Minter.Key},
		Env: func(_ context.Context, id string) (*worker.RunEnv, error) {
			if id != "r2" {
				return nil, stratus.Errorf(stratus.ENOTFOUND, "run %s is not served here", id)
			}
			return env, nil
		}})
	r2.handler = httpapi.New(r2.svc)
	r2.srv = httptest.NewServer(r2.handler)
	t.Cleanup(r2.srv.Close)
	r2.svc.APIURL = r2.srv.URL
	r2.run = b.run
	r2.run.ID = "r2"
	if err := b.svc.Store.CreateRun(context.Background(), r2.run); err != nil {
		t.Fatal(err)
	}
	return r2
}

// docs/security.md § Handles: a handle (or capability token) minted for
// run r1 is refused, 403 naming the run the API serves, on every route of
// run r2's worker API — though both APIs share one store and one HMAC key,
// and r1 is still running — while r1's own API takes it.
func TestHandle_RefusedOnAnotherRunsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.RunID = "r1"
	r2 := secondRun(t, b)
	h := b.dispatch(t, "planning", "tok-1")
	tok, _, err := b.svc.Minter.Mint("r1", "r1.planning.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	// A handle stored before handles named their run is its task's run's.
	if err := b.svc.Store.PutHandle(context.Background(), stratus.Handle{Handle: "wh-legacy0", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, cred := range []string{h, tok, "wh-legacy0"} {
		for _, c := range workerCalls("r1.planning.1") {
			code, body := r2.do(t, c.method, c.path, "Bearer "+cred, c.body)
			if code != 403 || !strings.Contains(body, "this API serves run r2 only") {
				t.Errorf("%s %s with run r1's %.6s… on run r2's API: %d %s; want 403", c.method, c.path, cred, code, body)
			}
		}
	}
	if p := payload(t, b, h, "r1.planning.1"); p.TaskID != "r1.planning.1" {
		t.Errorf("run r1's own API: payload of %s", p.TaskID)
	}
	// The bootstrap value a worker starts with is fenced alike, and a
	// refused exchange does not spend it.
	if err := b.svc.Store.PutHandle(context.Background(), stratus.Handle{Handle: "wb-fenced", RunID: "r1", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if code, body := r2.do(t, "POST", "/v1/worker/bootstrap", "Bearer wb-fenced", ""); code != 403 {
		t.Errorf("run r1's bootstrap value on run r2's API: %d %s; want 403", code, body)
	}
	if code, body := b.do(t, "POST", "/v1/worker/bootstrap", "Bearer wb-fenced", ""); code != 200 {
		t.Errorf("run r1's bootstrap value on its own API after the refusal: %d %s; want 200", code, body)
	}
}

// docs/security.md § Handles: once its run has ended — done, failed,
// manual_action_required, interrupted (a cancelled run is interrupted) —
// a handle gets 409 "run R ended S" on every worker route, the prompt
// fetch included, and a bootstrap value is not exchanged (nor spent).
func TestHandle_RefusedAfterItsRunEnded(t *testing.T) {
	t.Parallel()
	for _, status := range []string{stratus.RunDone, stratus.RunFailed, stratus.RunManualActionRequired, stratus.RunInterrupted} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := b.dispatch(t, "planning", "tok-1")
			tok, _, err := b.svc.Minter.Mint("r1", "r1.planning.1", 1)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := b.svc.Store.PutHandle(ctx, stratus.Handle{Handle: "wb-late", RunID: "r1", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			run := b.run
			run.Status = status
			if err := b.svc.Store.UpdateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			want := "run r1 ended " + status
			for _, cred := range []string{h, tok} {
				for _, c := range workerCalls("r1.planning.1") {
					if code, body := b.do(t, c.method, c.path, "Bearer "+cred, c.body); code != 409 || !strings.Contains(body, want) {
						t.Errorf("%s %s after the run ended: %d %s; want 409 %q", c.method, c.path, code, body, want)
					}
				}
			}
			if code, body := b.do(t, "POST", "/v1/worker/bootstrap", "Bearer wb-late", ""); code != 409 || !strings.Contains(body, want) {
				t.Errorf("bootstrap exchange after the run ended: %d %s; want 409 %q", code, body, want)
			}
			if _, err := b.svc.Store.GetHandle(ctx, "wb-late"); err != nil {
				t.Errorf("the refused bootstrap value was spent: %v", err)
			}
		})
	}
}

// docs/security.md § Handles, where one API serves every run (AWS): the
// credential names its run and the server checks it against the run of
// the task it maps to; a capability token naming no run is refused.
func TestHandle_NamesItsRunOnAnAPIServingAllRuns(t *testing.T) {
	t.Parallel()
	b := setup(t) // Service.RunID "": every run of the store
	b.dispatch(t, "planning", "tok-1")
	ctx := context.Background()
	if err := b.svc.Store.CreateRun(ctx, stratus.Run{ID: "r2", TaskID: "t2", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Store.PutHandle(ctx, stratus.Handle{Handle: "wh-crossrun", RunID: "r2", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tok, _, _ := b.svc.Minter.Mint("r2", "r1.planning.1", 1)
	noRun, _, _ := b.svc.Minter.Mint("", "r1.planning.1", 1)
	for name, tc := range map[string]struct {
		cred string
		code int
		says string
	}{
		"handle naming another run": {"wh-crossrun", 403, "is for run r2, but its task r1.planning.1 is of run r1"},
		"token naming another run":  {tok, 403, "is for run r2, but its task r1.planning.1 is of run r1"},
		"token naming no run":       {noRun, 401, "names no run"},
	} {
		if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.1", "Bearer "+tc.cred, ""); code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s; want %d saying %q", name, code, body, tc.code, tc.says)
		}
	}
	// A handle stored before handles named their run is its task's run's.
	if err := b.svc.Store.PutHandle(ctx, stratus.Handle{Handle: "wh-legacy0", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if p := payload(t, b, "wh-legacy0", "r1.planning.1"); p.TaskID != "r1.planning.1" {
		t.Errorf("legacy handle: payload of %s", p.TaskID)
	}
}

// readCalls are the worker routes that only read, for task tid's attempt 1
// of agent planning.
func readCalls(tid string) []workerCall {
	return []workerCall{
		{"GET", "/v1/worker/prompt?task_id=" + tid, ""},
		{"GET", "/v1/worker/prompt", ""},
		{"GET", "/v1/worker/prompt/system?task_id=" + tid + "&attempt=1", ""},
		{"GET", "/v1/worker/workspace/blob?key=x", ""},
		{"GET", "/v1/agents/planning/render-size", ""},
	}
}

// docs/security.md § Handles (a hardening finding): the planning#1 handle
// from before `stratus cancel` got GET /v1/worker/prompt 200 on the
// resumed run's API (its writes got 409). A credential is good only while
// its attempt is its step's live attempt and the run runs: once the run
// was cancelled and resumed — as once its attempt ended (submitted) or was
// superseded (rekicked) — every route, reads included, answers 409 naming
// the run and the attempt, and the attempt's bootstrap value is not
// exchanged (nor spent), while the live attempt's handle reads and
// submits as before.
func TestHandle_RefusedOnceItsAttemptEndedAndAcrossAResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, how := range []string{"cancelled and resumed", "submitted", "rekicked"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := b.dispatch(t, "planning", "tok-1")
			tok, _, err := b.svc.Minter.Mint("r1", "r1.planning.1", 1)
			if err != nil {
				t.Fatal(err)
			}
			if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.1", "Bearer "+h, ""); code != 200 {
				t.Fatalf("prompt of the live attempt: %d %s", code, body)
			}
			// A bootstrap value of attempt 1 never exchanged (a launch
			// still waiting for capacity).
			if err := b.svc.Store.PutHandle(ctx, stratus.Handle{Handle: "wb-stale", RunID: "r1", TID: "r1.planning.1", Attempt: 1, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			live, want := "", ""
			switch how {
			case "cancelled and resumed":
				run, err := b.svc.Store.GetRun(ctx, "r1")
				if err != nil {
					t.Fatal(err)
				}
				// stratus cancel, then stratus resume (lifecycle.PrepareResume
				// records the run running again; the step runs again as a new
				// visit, planning#2, with a handle of its own).
				if run, err = lifecycle.Interrupt(ctx, b.svc.Store, run, "cancelled by the operator (stratus cancel)", time.Now().UTC()); err != nil {
					t.Fatal(err)
				}
				run.Resumes++
				run.Resumed(time.Now().UTC())
				run.Status = stratus.RunRunning
				if err := b.svc.Store.UpdateRun(ctx, run); err != nil {
					t.Fatal(err)
				}
				live = b.dispatch(t, "planning", "tok-2")
				if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.2", "Bearer "+live, ""); code != 200 {
					t.Fatalf("prompt of the resumed run's new step: %d %s", code, body)
				}
				want = "run r1: attempt 1 of planning#1 (task r1.planning.1) already ended (failed)"
			case "submitted":
				if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "planned"); code != 200 {
					t.Fatalf("submit of the live attempt: %d %s", code, body)
				}
				want = "run r1: attempt 1 of planning#1 (task r1.planning.1) already ended (submitted)"
			case "rekicked":
				if _, err := b.svc.Rekick(ctx, "r1.planning.1"); err != nil {
					t.Fatal(err)
				}
				specs := b.launch.Launched()
				live = specs[len(specs)-1].Handle
				want = "run r1: attempt 1 of planning#1 (task r1.planning.1) is superseded by attempt 2"
			}
			for _, cred := range []string{h, tok} {
				for _, c := range append(readCalls("r1.planning.1"), workerCalls("r1.planning.1")...) {
					if code, body := b.do(t, c.method, c.path, "Bearer "+cred, c.body); code != 409 || !strings.Contains(body, want) || !strings.Contains(body, "docs/security.md § Handles") {
						t.Errorf("%s %s with the old %.6s…: %d %s; want 409 %q", c.method, c.path, cred, code, body, want)
					}
				}
			}
			if code, body := b.do(t, "POST", "/v1/worker/bootstrap", "Bearer wb-stale", ""); code != 409 || !strings.Contains(body, want) {
				t.Errorf("bootstrap exchange of the old attempt's value: %d %s; want 409 %q", code, body, want)
			}
			if _, err := b.svc.Store.GetHandle(ctx, "wb-stale"); err != nil {
				t.Errorf("the refused bootstrap value was spent: %v", err)
			}
			if live != "" {
				// The live attempt's own reads and its submit still work.
				tid := "r1.planning.2"
				if how == "rekicked" {
					tid = "r1.planning.1"
				}
				if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id="+tid, "Bearer "+live, ""); code != 200 {
					t.Errorf("prompt of the live attempt: %d %s", code, body)
				}
				if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+live, "planned"); code != 200 {
					t.Errorf("submit of the live attempt: %d %s", code, body)
				}
			}
		})
	}
}
