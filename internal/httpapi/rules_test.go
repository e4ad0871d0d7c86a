package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker"
)

// A one-node flow whose node's submit_format, verdicts and role file the
// test chooses.
func oneNode(node, role string) map[string]string {
	return map[string]string{
		"implementation.yaml": `flow:
  name: implementation
  task_type: implementation
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
` + node + `
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: gate, to: publish }
`,
		"implementation/gate.md": role,
	}
}

func payload(t *testing.T, b *bundle, h, tid string) worker.Payload {
	t.Helper()
	code, body := b.do(t, "GET", "/v1/worker/prompt?task_id="+tid, "Bearer "+h, "")
	if code != 200 {
		t.Fatalf("prompt: %d %s", code, body)
	}
	var p worker.Payload
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// docs/contracts.md § Request and response bodies: the raw baked bytes as
// text/plain; the payload's system_ref carries the URI, sha256 and size to
// verify them.
func TestWorkerAPI_SystemPromptBySystemRef(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	p := payload(t, b, h, "r1.planning.1")
	if p.SystemRef == nil || p.SystemRef.Bytes == 0 {
		t.Fatalf("system_ref = %+v", p.SystemRef)
	}
	code, body := b.do(t, "GET", p.SystemRef.URI, "Bearer "+h, "")
	sum := sha256.Sum256([]byte(body))
	if code != 200 || hex.EncodeToString(sum[:]) != p.SystemRef.SHA256 || len(body) != p.SystemRef.Bytes || body != p.System {
		t.Fatalf("%d: body does not match system_ref %+v", code, p.SystemRef)
	}
	if code, _ := b.do(t, "GET", "/v1/worker/prompt/system?task_id=r1.planning.1&attempt=2", "Bearer "+h, ""); code != 403 {
		t.Errorf("another attempt's system: %d, want 403", code)
	}
	if code, _ := b.do(t, "GET", "/v1/worker/prompt/system?task_id=r1.planning.1&attempt=x", "Bearer "+h, ""); code != 400 {
		t.Errorf("malformed attempt: %d, want 400", code)
	}
}

// docs/contracts.md § Request and response bodies, hardened
// (docs/security.md § Who is trusted): the last observed size goes to a
// worker of that agent — its handle or capability token — and to no one else.
// The hardening finding: the route answered anyone who reached the API,
// credential or not.
func TestWorkerAPI_RenderSizeNeedsTheAgentsCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	p := payload(t, b, h, "r1.planning.1")
	tok, _, err := b.svc.Minter.Mint("r1", "r1.planning.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, agent, auth string
		want              int
	}{
		{"no credential", "planning", "", 401},
		{"another scheme", "planning", "Basic " + h, 401},
		{"unknown handle", "planning", "Bearer wh-unknown1", 401},
		{"no credential, unknown agent", "nobody", "", 401},
		{"another agent", "implementation", "Bearer " + h, 403},
		{"its handle", "planning", "Bearer " + h, 200},
		{"its capability token", "planning", "Bearer " + tok, 200},
	} {
		code, body := b.do(t, "GET", "/v1/agents/"+c.agent+"/render-size", c.auth, "")
		if code != c.want {
			t.Errorf("%s: %d %s; want %d", c.name, code, body, c.want)
			continue
		}
		var rs stratus.RenderSize
		json.Unmarshal([]byte(body), &rs)
		if ok := rs.Agent == "planning" && rs.Bytes == len(p.System); ok != (code == 200) {
			t.Errorf("%s: %d %s (the system prompt is %d bytes)", c.name, code, body, len(p.System))
		}
	}
}

// docs/contracts.md § Request and response bodies: appended to the run record
// with server-injected step_ref/attempt/at; never visible in the fold.
func TestWorkerAPI_DegradationGoesToTheRunRecordOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	code, body := b.do(t, "POST", "/v1/worker/degradation", "Bearer "+h, `{"tool":"web_search","error":"timeout","fallback":"cached index"}`)
	if code != 204 {
		t.Fatalf("%d %s", code, body)
	}
	for in, field := range map[string]string{`{"error":"e","fallback":"f"}`: "tool", `{"tool":"t","error":"e","fallback":"f","step_ref":"x#9"}`: ""} {
		if code, body := b.do(t, "POST", "/v1/worker/degradation", "Bearer "+h, in); code != 400 || !strings.Contains(body, field) {
			t.Errorf("%s: %d %s", in, code, body)
		}
	}
	ds, err := b.svc.Store.ListDegradations(context.Background(), "r1")
	if err != nil || len(ds) != 1 || ds[0].StepRef != "planning#1" || ds[0].Attempt != 1 || ds[0].At.IsZero() || ds[0].Tool != "web_search" {
		t.Fatalf("degradations = %+v, %v", ds, err)
	}
	b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "planned")
	var sv worker.StepValue
	json.Unmarshal(b.tokens.Success("tok-1"), &sv)
	if sv.Bytes != len("planned") || len(sv.Parts) != 0 {
		t.Errorf("a degradation leaked into the step value: %s", b.tokens.Success("tok-1"))
	}
	// After the attempt's final submit, a degradation gets the 409 every
	// other write gets, naming why, and nothing is stored.
	if code, body := b.do(t, "POST", "/v1/worker/degradation", "Bearer "+h, `{"tool":"t","error":"e","fallback":"f"}`); code != 409 || !strings.Contains(body, "already ended") {
		t.Errorf("degradation after the final submit: %d %s; want 409", code, body)
	}
	// The credential is checked before the body.
	if code, body := b.do(t, "POST", "/v1/worker/degradation", "", `{}`); code != 401 {
		t.Errorf("degradation without a credential: %d %s; want 401", code, body)
	}
	if ds, _ := b.svc.Store.ListDegradations(context.Background(), "r1"); len(ds) != 1 {
		t.Errorf("%d degradations stored; want the one accepted", len(ds))
	}
}

// A rekicked attempt's handle is fenced for degradations too.
func TestWorkerAPI_DegradationOfASupersededAttemptIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	if _, err := b.svc.Rekick(context.Background(), "r1.planning.1"); err != nil {
		t.Fatal(err)
	}
	if code, body := b.do(t, "POST", "/v1/worker/degradation", "Bearer "+h, `{"tool":"t","error":"e","fallback":"f"}`); code != 409 || !strings.Contains(body, "superseded") {
		t.Errorf("degradation of a superseded attempt: %d %s; want 409", code, body)
	}
}

// docs/contracts.md § Bearer authentication: role × verb gate, TTL,
// case-insensitive header name and scheme.
func TestWorkerAPI_CapabilityTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dispatch(t, "planning", "tok-1")
	tok, _, err := b.svc.Minter.Mint("r1", "r1.planning.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.1", "BEARER "+tok, ""); code != 200 {
		t.Fatalf("full token: %d %s", code, body)
	}
	if code, _ := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.review.1", "Bearer "+tok, ""); code != 403 {
		t.Errorf("another task's token: %d, want 403", code)
	}
	expired := &captoken.Minter{Key: b.svc.Minter.Key, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	old, _, _ := expired.Mint("r1", "r1.planning.1", 1)
	if code, body := b.do(t, "GET", "/v1/worker/prompt?task_id=r1.planning.1", "Bearer "+old, ""); code != 401 || !strings.Contains(body, "expired") {
		t.Errorf("expired token: %d %s", code, body)
	}
}

// docs/contracts.md § Input is a fetch: a fetch after a rekick shows the
// current attempt; the old attempt's writes are fenced with 409.
func TestWorkerAPI_RekickFencesTheOldAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h1 := b.dispatch(t, "planning", "tok-1")
	n, err := b.svc.Rekick(context.Background(), "r1.planning.1")
	if err != nil || n != 2 {
		t.Fatalf("Rekick = %d, %v", n, err)
	}
	specs := b.launch.Launched()
	h2 := specs[len(specs)-1].Handle
	if p := payload(t, b, h2, "r1.planning.1"); p.Attempt != 2 {
		t.Errorf("fetch after rekick: attempt %d", p.Attempt)
	}
	code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h1, "late")
	if code != 409 || !strings.Contains(body, "superseded by attempt 2") {
		t.Errorf("old attempt submit: %d %s", code, body)
	}
	if code, _ := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h2, "fresh"); code != 200 {
		t.Errorf("new attempt submit: %d", code)
	}
}

// docs/contracts.md § Routes: any write after the run is terminal is 409
// naming the run state.
func TestWorkerAPI_WriteAfterTerminalRunIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	run := b.run
	run.Status = stratus.RunManualActionRequired
	b.svc.Store.UpdateRun(context.Background(), run)
	code, body := b.do(t, "POST", "/v1/worker/artifact?name=x.md", "Bearer "+h, "x")
	if code != 409 || !strings.Contains(body, "manual_action_required") {
		t.Errorf("%d %s", code, body)
	}
}

// docs/contracts.md § The fold and submit_format: nearest declaration wins
// (step > agent's role file > flow); json is strict on the body only (422
// echoing the start).
func TestSubmitFormat_NearestWins(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		node, role, flowFormat, body string
		wantCode                     int
		wantBytes                    string
	}{
		"flow json rejects prose":        {"    - { id: gate, kind: agent, role_file: implementation/gate.md }", "Go.", "json", "not json", 422, ""},
		"role file text beats flow":      {"    - { id: gate, kind: agent, role_file: implementation/gate.md }", "---\nsubmit_format: text\n---\nGo.", "json", "not json", 200, ""},
		"node json beats role file":      {"    - { id: gate, kind: agent, role_file: implementation/gate.md, submit_format: json }", "---\nsubmit_format: text\n---\nGo.", "", "prose", 422, ""},
		"node json accepts scalar":       {"    - { id: gate, kind: agent, role_file: implementation/gate.md, submit_format: json }", "Go.", "", "42", 200, ""},
		"unknown format behaves lenient": {"    - { id: gate, kind: agent, role_file: implementation/gate.md, submit_format: yaml }", "Go.", "", "prose", 200, ""},
	} {
		files := oneNode(tc.node, tc.role)
		if tc.flowFormat != "" {
			files["implementation.yaml"] = strings.Replace(files["implementation.yaml"], "  nodes:\n", "  submit_format: "+tc.flowFormat+"\n  nodes:\n", 1)
		}
		b := setupFlow(t, files)
		h := b.dispatch(t, "gate", "tok-g")
		code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, tc.body)
		if code != tc.wantCode {
			t.Errorf("%s: %d %s, want %d", name, code, body, tc.wantCode)
		}
		if code == 422 && (!strings.Contains(body, "gate") || !strings.Contains(body, tc.body)) {
			t.Errorf("%s: 422 must name the agent and echo the body: %s", name, body)
		}
		if code == 422 {
			// Nothing was appended: the attempt may still submit.
			if code, _ := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, `{"ok":1}`); code != 200 {
				t.Errorf("%s: resubmit after 422: %d", name, code)
			}
		}
	}
}

// docs/contracts.md § The in-process twin: verdict contracts on the body or a
// staged `verdict` part, compared before the fold; a violation is 422 naming
// the agent, the channel, what arrived and what is allowed.
func TestVerdictContract(t *testing.T) {
	t.Parallel()
	body := "    - { id: gate, kind: agent, role_file: implementation/gate.md, verdicts: { allowed: [pass, fail], channel: body } }"
	b := setupFlow(t, oneNode(body, "Judge."))
	h := b.dispatch(t, "gate", "tok-v")
	code, resp := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "maybe")
	if code != 422 || !strings.Contains(resp, "agent gate") || !strings.Contains(resp, "channel body") || !strings.Contains(resp, `\"maybe\"`) || !strings.Contains(resp, "pass, fail") {
		t.Fatalf("%d %s", code, resp)
	}
	if code, resp := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "pass\n"); code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	var sv worker.StepValue
	json.Unmarshal(b.tokens.Success("tok-v"), &sv)
	if sv.Outcome != "pass" {
		t.Errorf("outcome = %q, want the verdict", sv.Outcome)
	}

	part := strings.Replace(body, "channel: body", "channel: part", 1)
	b = setupFlow(t, oneNode(part, "Judge."))
	h = b.dispatch(t, "gate", "tok-p")
	if code, resp := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "see part"); code != 422 || !strings.Contains(resp, "no staged part named verdict") {
		t.Fatalf("no part: %d %s", code, resp)
	}
	b.do(t, "POST", "/v1/worker/artifact?name=verdict", "Bearer "+h, "fail")
	if code, resp := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "see part"); code != 200 {
		t.Fatalf("with part: %d %s", code, resp)
	}
	json.Unmarshal(b.tokens.Success("tok-p"), &sv)
	if sv.Outcome != "fail" {
		t.Errorf("outcome = %q", sv.Outcome)
	}
}

// docs/contracts.md § The in-process twin: only the worker's own parts fold;
// an audit sidecar on the same tail is invisible.
func TestFold_AuditSidecarInvisible(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	b.do(t, "POST", "/v1/worker/artifact?name=plan.md", "Bearer "+h, "# P")
	if _, err := b.svc.Store.AppendOutput(context.Background(), stratus.OutputEvent{TID: "r1.planning.1", Attempt: 1, Kind: stratus.OutputSidecar, Name: "audit:planning#1", Body: []byte("{}"), At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "done")
	var sv worker.StepValue
	json.Unmarshal(b.tokens.Success("tok-1"), &sv)
	if len(sv.Parts) != 1 || sv.Parts[0] != "plan.md" {
		t.Errorf("parts = %v", sv.Parts)
	}
}

// Size limits: a body over the limit is a JSON 413 before anything is stored.
func TestWorkerAPI_BodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.MaxBodyBytes = 1024
	h := b.dispatch(t, "planning", "tok-1")
	code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, strings.Repeat("x", 2048))
	if code != 413 || !strings.Contains(body, `"code":"too_large"`) {
		t.Fatalf("%d %s", code, body)
	}
	tail, _ := b.svc.Store.ListOutput(context.Background(), "r1.planning.1", 1)
	if len(tail) != 0 {
		t.Errorf("a refused body was stored: %d events", len(tail))
	}
}

// docs/contracts.md § Files are the server's job: sentinel: resolved in
// embedded mode only inside the run's work dir; refused when the server does
// not resolve files (AWS).
func TestWorkerAPI_FileSentinel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.ResolveFiles = true
	inside := filepath.Join(b.dir, "out.md")
	os.WriteFile(inside, []byte("# from a file\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("s"), 0o644)
	h := b.dispatch(t, "planning", "tok-1")
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=x.md", "Bearer "+h, "@file:"+outside); code != 400 || !strings.Contains(body, "outside the run's work dir") {
		t.Errorf("outside: %d %s", code, body)
	}
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=x.md", "Bearer "+h, "@file:relative.md"); code != 400 || !strings.Contains(body, "absolute") {
		t.Errorf("relative: %d %s", code, body)
	}
	if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "@file:"+inside+"\n"); code != 200 {
		t.Fatalf("inside: %d %s", code, body)
	}
	got, _ := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/planning.md"))
	if !strings.HasSuffix(string(got), "---\n# from a file\n") {
		t.Errorf("projected %q", got)
	}

	b = setup(t) // ResolveFiles false: the AWS posture
	h = b.dispatch(t, "planning", "tok-2")
	if code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "@file:"+inside); code != 400 || !strings.Contains(body, "resolved by the worker") {
		t.Errorf("AWS posture: %d %s", code, body)
	}
}

// docs/contracts.md § Routes: context.steps is filtered by the node's context
// policy.
func TestPrompt_ContextPolicyFiltersStepPointers(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"implementation.yaml": `flow:
  name: implementation
  task_type: implementation
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - { id: a, kind: agent, role_file: implementation/x.md }
    - { id: b, kind: agent, role_file: implementation/x.md }
    - { id: c, kind: agent, role_file: implementation/x.md, context: { steps: [a] } }
    - { id: d, kind: agent, role_file: implementation/x.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: a, to: b }
    - { from: b, to: c }
    - { from: c, to: d }
    - { from: d, to: publish }
`,
		"implementation/x.md": "Go.",
	}
	b := setupFlow(t, files)
	for _, n := range []string{"a", "b"} {
		h := b.dispatch(t, n, "tok-"+n)
		b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, n+" done")
	}
	steps := func(node string) []string {
		h := b.dispatch(t, node, "tok-"+node)
		var got []string
		for _, p := range payload(t, b, h, "r1."+node+".1").Context.Steps {
			got = append(got, p.Step)
		}
		return got
	}
	if got := strings.Join(steps("c"), ","); got != "a" {
		t.Errorf("c (context.steps [a]) sees %q", got)
	}
	if got := strings.Join(steps("d"), ","); got != "a,b" {
		t.Errorf("d (no policy) sees %q", got)
	}
}

// docs/contracts.md § Files are the server's job: when no root resolves,
// files are skipped fail-open with a warning, or the step fails under
// check_policy: strict.
func TestSubmit_NoRootSkipsFilesOrFailsUnderStrict(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		files := oneNode("    - { id: gate, kind: agent, role_file: implementation/gate.md }", "Go.")
		if strict {
			files["implementation.yaml"] = strings.Replace(files["implementation.yaml"], "  nodes:\n", "  check_policy: strict\n  nodes:\n", 1)
		}
		b := setupFlow(t, files)
		var rec logging.Recorder
		b.svc.Log = rec.Logger()
		run := b.run
		run.ID, run.WorkDir = "r2", ""
		if err := b.svc.Store.CreateRun(context.Background(), run); err != nil {
			t.Fatal(err)
		}
		if err := b.svc.Dispatch(context.Background(), worker.Message{RunID: "r2", Node: "gate", Kind: "agent", TaskToken: "tok-nr"}); err != nil {
			t.Fatal(err)
		}
		specs := b.launch.Launched()
		h := specs[len(specs)-1].Handle
		code, body := b.do(t, "POST", "/v1/worker/submit", "Bearer "+h, "out")
		_, failed := b.tokens.Failures()["tok-nr"]
		_, succeeded := b.tokens.Successes()["tok-nr"]
		if strict && (code == 200 || !failed) {
			t.Errorf("strict: %d %s, failed=%v", code, body, failed)
		}
		if !strict && (code != 200 || !succeeded || len(rec.Messages()) == 0) {
			t.Errorf("lenient: %d %s, succeeded=%v warnings=%v", code, body, succeeded, rec.Messages())
		}
	}
}

// A hard link in the work dir to .stratus/hmac.key (the key that mints every
// token) is refused, as is a name under .stratus and the ctx dir's marker as
// a part name — each a 400 naming the rule, and nothing of the key reaches
// the ctx dir.
func TestWorkerAPI_FileSentinelRefusesTheKeyAndReservedNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.svc.ResolveFiles = true
	key := filepath.Join(b.dir, ".stratus", "hmac.key")
	os.MkdirAll(filepath.Dir(key), 0o700)
	os.WriteFile(key, []byte("KEY-BYTES"), 0o600)
	link := filepath.Join(b.dir, "innocent.md")
	if err := os.Link(key, link); err != nil {
		t.Fatal(err)
	}
	h := b.dispatch(t, "planning", "tok-1")
	for _, c := range []struct{ path, name, why string }{
		{"/v1/worker/artifact?name=x.md", "@file:" + link, "has 2 hard links"},
		{"/v1/worker/artifact?name=y.md", "@file:" + key, "Stratus's own state"},
		{"/v1/worker/artifact?name=.stratus-ctx", "overwritten", "is reserved"},
		{"/v1/worker/artifact?name=%252e%252e", "x", `contains \"%\"`},
		{"/v1/worker/artifact?name=%EF%BC%8E%EF%BC%8E", "x", "NFKC"},
	} {
		if code, body := b.do(t, "POST", c.path, "Bearer "+h, c.name); code != 400 || !strings.Contains(body, c.why) {
			t.Errorf("%s %s: %d %s; want 400 saying %s", c.path, c.name, code, body, c.why)
		}
	}
	filepath.Walk(filepath.Join(b.dir, "workspace"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if got, _ := os.ReadFile(p); strings.Contains(string(got), "KEY-BYTES") {
				t.Errorf("the key reached %s", p)
			}
		}
		return nil
	})
	if got, _ := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/.stratus-ctx")); string(got) == "overwritten" {
		t.Errorf("the ctx marker was overwritten")
	}
}

// On every authenticated route the credential is checked before the
// parameters and the body: a caller without one gets 401, whatever else is
// wrong with the request.
func TestWorkerAPI_CredentialBeforeParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dispatch(t, "planning", "tok-1")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/worker/prompt?task_id=../x&attempt=-1", ""},
		{"POST", "/v1/worker/submit?part=%00", "x"},
		{"POST", "/v1/worker/result", "{not json"},
		{"POST", "/v1/worker/artifact?name=../../etc", "x"},
		{"POST", "/v1/worker/stats", `{"steps":-5}`},
		{"GET", "/v1/worker/prompt/system", ""},
		{"GET", "/v1/worker/prompt/system?task_id=x&attempt=zero", ""},
		{"POST", "/v1/worker/degradation", `{}`},
		{"GET", "/v1/worker/workspace/blob?key=../../.stratus/hmac.key", ""},
		{"PUT", "/v1/worker/workspace/blob?key=", "x"},
		{"POST", "/v1/worker/workspace/head", "{"},
		{"POST", "/v1/runs/r1/nodes/x/hitl", "{"},
	} {
		if code, body := b.do(t, c.method, c.path, "", c.body); code != 401 {
			t.Errorf("%s %s without a credential: %d %s; want 401", c.method, c.path, code, body)
		}
	}
}

// fullSink is a sink on a disk that just filled up.
type fullSink struct{ sink.Sink }

func (fullSink) Put(context.Context, string, []byte) error {
	return fmt.Errorf("fs sink: put: %w", &fs.PathError{Op: "write", Path: "/work/ctx/.stratus-tmp-1", Err: syscall.ENOSPC})
}

// docs/security.md § Output that did not persist: a write the disk refuses is
// a 507 whose JSON says the disk is full (a bare 500 "internal" before), the
// server's OnError sees it (an embedded run stops on it), and what was
// accepted before stays.
func TestWorkerAPI_FullDiskIs507(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.dispatch(t, "planning", "tok-1")
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=first.md", "Bearer "+h, "kept"); code != 204 && code != 200 {
		t.Fatalf("first artifact: %d %s", code, body)
	}
	b.svc.Sink = fullSink{b.svc.Sink}
	code, body := b.do(t, "POST", "/v1/worker/artifact?name=second.md", "Bearer "+h, "lost to the full disk")
	if code != 507 || !strings.Contains(body, `"code":"insufficient_storage"`) || !strings.Contains(body, "disk is full") || strings.Contains(body, "/work/ctx") {
		t.Errorf("artifact on a full disk: %d %s; want 507 saying the disk is full, no path", code, body)
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/first.md")); string(got) != "kept" {
		t.Errorf("the artifact accepted before holds %q", got)
	}
}
