package httpapi_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/worker"
)

// setupHITL serves a flow whose "gate" (approval) and "ask" (question)
// hitl nodes wait for a human, and dispatches both.
func setupHITL(t *testing.T) *bundle {
	t.Helper()
	b := setupFlow(t, map[string]string{
		"implementation.yaml": `flow:
  name: implementation
  task_type: implementation
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: draft, kind: agent, role_file: implementation/draft.md }
    - { id: ask, kind: hitl, signal: question }
    - { id: gate, kind: hitl, signal: approval }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: draft, to: ask }
    - { from: ask, to: gate }
    - { from: gate, to: publish, outcome: route:approve }
    - { from: gate, to: publish, outcome: route:deny }
`,
		"implementation/draft.md": "Draft {task_id}.\n",
	})
	for _, n := range [][2]string{{"gate", "hitl"}, {"ask", "hitl"}, {"draft", "agent"}} {
		if err := b.svc.Dispatch(context.Background(), worker.Message{RunID: "r1", Node: n[0], Kind: n[1], TaskToken: "tok-" + n[0]}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b *bundle) operatorToken(t *testing.T, run string) string {
	t.Helper()
	tok, _, err := b.svc.Minter.MintOperator(run)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The reply route takes an operator token for the run and nothing a
// worker holds (README.md § A human gate, step by step: minted from the run's
// HMAC key; a worker handle or token gets 403).
func TestHITLRoute_OperatorTokenOnly(t *testing.T) {
	t.Parallel()
	b := setupHITL(t)
	specs := b.launch.Launched()
	handle := specs[len(specs)-1].Handle
	workerTok, _, _ := b.svc.Minter.Mint("r1", specs[len(specs)-1].TaskID, 1)
	other := &captoken.Minter{Key: []byte("ffffffffffffffffffffffffffffffff")}
	forged, _, _ := other.MintOperator("r1")
	const path, body = "/v1/runs/r1/nodes/gate/hitl", `{"decision":"approve"}`
	for _, c := range []struct {
		name, auth string
		want       int
	}{
		{"no credential", "", 401},
		{"another key's operator token", "Bearer " + forged, 401},
		{"a worker handle", "Bearer " + handle, 403},
		{"a worker token", "Bearer " + workerTok, 403},
		{"another run's operator token", "Bearer " + b.operatorToken(t, "r2"), 403},
	} {
		code, got := b.do(t, "POST", path, c.auth, body)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, got, c.want)
		}
	}
	if ok, _ := b.tokens.Counts(); ok != 0 {
		t.Fatalf("a refused credential completed %d task tokens", ok)
	}
	code, got := b.do(t, "POST", path, "Bearer "+b.operatorToken(t, "r1"), body)
	var v worker.HITLValue
	if code != 200 || json.Unmarshal([]byte(got), &v) != nil || v.Outcome != "route:approve" || v.StepRef != "gate#1" {
		t.Fatalf("operator reply: %d %s", code, got)
	}
	var sv worker.StepValue
	json.Unmarshal(b.tokens.Success("tok-gate"), &sv)
	if sv.Outcome != "route:approve" {
		t.Errorf("task token completed with %s", b.tokens.Success("tok-gate"))
	}
	// An operator token reaches no worker route.
	if code, _ := b.do(t, "GET", "/v1/worker/prompt?task_id="+specs[len(specs)-1].TaskID, "Bearer "+b.operatorToken(t, "r1"), ""); code != 403 {
		t.Errorf("operator token on a worker route: %d, want 403", code)
	}
}

// Every refusal is a 4xx naming its field, and the step keeps waiting.
func TestHITLRoute_ErrorsNameTheField(t *testing.T) {
	t.Parallel()
	b := setupHITL(t)
	auth := "Bearer " + b.operatorToken(t, "r1")
	for _, c := range []struct {
		name, node, body string
		status           int
		field            string
	}{
		{"unknown decision", "gate", `{"decision":"maybe"}`, 400, "decision"},
		{"unknown body field", "gate", `{"decision":"approve","why":"x"}`, 400, ""},
		{"an answer to an approval", "gate", `{"decision":"answer","text":"yes"}`, 422, "decision"},
		{"an empty answer", "ask", `{"decision":"answer","text":""}`, 422, "text"},
		{"unknown node", "nope", `{"decision":"approve"}`, 404, "node"},
		{"a node waiting for nothing", "draft", `{"decision":"approve"}`, 404, "node"},
	} {
		code, got := b.do(t, "POST", "/v1/runs/r1/nodes/"+c.node+"/hitl", auth, c.body)
		var eb httpapi.ErrorBody
		if code != c.status || json.Unmarshal([]byte(got), &eb) != nil || eb.Error.Field != c.field {
			t.Errorf("%s: %d %s, want %d on field %q", c.name, code, got, c.status, c.field)
		}
	}
	if ok, _ := b.tokens.Counts(); ok != 0 {
		t.Errorf("refused replies completed %d task tokens", ok)
	}
	// The question still takes its answer.
	if code, got := b.do(t, "POST", "/v1/runs/r1/nodes/ask/hitl", auth, `{"decision":"answer","text":"blue"}`); code != 200 {
		t.Errorf("answer after refusals: %d %s", code, got)
	}
	if code, _ := b.do(t, "POST", "/v1/runs/r1/nodes/ask/hitl", auth, `{"decision":"answer","text":"blue"}`); code != 409 {
		t.Errorf("second answer: %d, want 409", code)
	}
}

// The reply route's body and answer schemas list exactly the Go types'
// JSON fields.
func TestOpenAPI_HITLSchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{"HITLReply": worker.Reply{}, "HITLValue": worker.HITLValue{}} {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		var got []string
		for p := range s.Properties {
			got = append(got, p)
		}
		sort.Strings(got)
		if want := jsonFields(reflect.TypeOf(v)); !slices.Equal(got, want) {
			t.Errorf("schema %s properties %v, want %v", name, got, want)
		}
	}
}

// docs/security.md § Operator replies on AWS: the IAM-authorised reply
// route answers only behind API Gateway's AWS_IAM authorizer. The
// embedded server never has a verified identity: it refuses the route
// (403 naming the authorizer and the route that takes an operator token),
// an operator token or not, and nothing completes. Behind the authorizer
// (the Lambda adapter puts the identity in the request's context) the
// reply is applied and records who gave it, in the step's value and its
// reply file.
func TestHITLRoute_IAMRouteAnswersOnlyBehindTheAuthorizer(t *testing.T) {
	t.Parallel()
	b := setupHITL(t)
	const path, body = "/v1/operator/runs/r1/nodes/gate/hitl", `{"decision":"approve"}`
	for _, auth := range []string{"", "Bearer " + b.operatorToken(t, "r1"), "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260101/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=00"} {
		code, got := b.do(t, "POST", path, auth, body)
		var eb httpapi.ErrorBody
		if code != 403 || json.Unmarshal([]byte(got), &eb) != nil || eb.Error.Code != "forbidden" || !strings.Contains(eb.Error.Message, "AWS_IAM") ||
			!strings.Contains(eb.Error.Message, "/v1/runs/{run_id}/nodes/{node}/hitl") {
			t.Errorf("embedded server, Authorization %.20q: %d %s; want 403 naming the AWS_IAM authorizer and the operator token route", auth, code, got)
		}
	}
	if ok, _ := b.tokens.Counts(); ok != 0 {
		t.Fatalf("a refused reply completed %d task tokens", ok)
	}

	const arn = "arn:aws:iam::111122223333:user/alice"
	behind := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.handler.ServeHTTP(w, r.WithContext(httpapi.WithIAMIdentity(r.Context(), httpapi.IAMIdentity{AccessKey: "AKIAEXAMPLE", AccountID: "111122223333", UserARN: arn})))
	}))
	defer behind.Close()
	// A reply naming its own replier is refused: who replied is what the
	// authorizer verified, never the body.
	resp, err := http.Post(behind.URL+path, "application/json", strings.NewReader(`{"decision":"approve","By":"arn:aws:iam::1:user/mallory"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a body naming its replier: %d, want 400", resp.StatusCode)
	}
	resp, err = http.Post(behind.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v worker.HITLValue
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil || v.Outcome != "route:approve" || v.RepliedBy != arn {
		t.Fatalf("reply behind the authorizer: %d %+v; want route:approve replied by %s", resp.StatusCode, v, arn)
	}
	if sv := b.tokens.Success("tok-gate"); !strings.Contains(string(sv), "route:approve") {
		t.Errorf("task token completed with %s", sv)
	}
	st, err := b.svc.Store.ListSteps(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	var recorded bool
	for _, s := range st {
		if s.Node == "gate" && strings.Contains(string(s.Value), `"replied_by":"`+arn+`"`) {
			recorded = true
		}
	}
	if !recorded {
		t.Errorf("the gate's step value does not record who replied: %+v", st)
	}
	var file string
	filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "gate.md" {
			file = p
		}
		return nil
	})
	if data, err := os.ReadFile(file); err != nil || !strings.Contains(string(data), "replied by: "+arn) {
		t.Errorf("the reply file %s does not say who replied (%v):\n%s", file, err, data)
	}
}
