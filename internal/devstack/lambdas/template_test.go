package lambdas_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/testenv"
)

func readTemplate(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The worker API's routes are the HttpApi events of WorkerApiFunction in
// template.yaml, path parameters as written.
func TestRoutesFromTemplate_AreTheWorkerAPIFunctionsHttpApiEvents(t *testing.T) {
	routes, err := lambdas.RoutesFromTemplate(readTemplate(t), "WorkerApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range routes {
		keys = append(keys, r.Key())
	}
	for _, want := range []string{"GET /v1/healthz", "POST /v1/worker/submit", "GET /v1/worker/prompt", "PUT /v1/worker/workspace/blob", "GET /v1/agents/{name}/render-size", "POST /v1/runs/{run_id}/nodes/{node}/hitl"} {
		if !slices.Contains(keys, want) {
			t.Errorf("no route %q in %v", want, keys)
		}
	}
	if len(routes) < 15 {
		t.Errorf("%d routes; template.yaml has at least 15", len(routes))
	}
	if _, err := lambdas.RoutesFromTemplate(readTemplate(t), "NoSuchFunction"); err == nil || !strings.Contains(err.Error(), "WorkerApiFunction") {
		t.Errorf("an unknown function: %v; want an error listing the functions", err)
	}
}

// A route's authorizer is its event's Auth.Authorizer over its API's
// DefaultAuthorizer: in template.yaml the operator's reply route alone is
// AWS_IAM. An authorizer the front does not emulate, or AWS_IAM on an API
// that does not enable it, is refused naming the event.
func TestRoutesFromTemplate_ReadTheIAMAuthorizer(t *testing.T) {
	routes, err := lambdas.RoutesFromTemplate(readTemplate(t), "WorkerApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	var iam []string
	for _, r := range routes {
		if r.Auth != "" {
			iam = append(iam, r.Auth+" "+r.Key())
		}
	}
	if !slices.Equal(iam, []string{"AWS_IAM POST /v1/operator/runs/{run_id}/nodes/{node}/hitl"}) {
		t.Errorf("authorised routes %v; want the operator's reply route alone, AWS_IAM", iam)
	}
	const tmpl = `Resources:
  Api:
    Type: AWS::Serverless::HttpApi
    Properties:
      Auth: API_AUTH
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/fn
      Events:
        Open:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: /open, Auth: {Authorizer: NONE}}
        Default:
          Type: HttpApi
          Properties: {ApiId: !Ref Api, Method: GET, Path: /default}
`
	for _, c := range []struct {
		apiAuth, want, err string
	}{
		{"{EnableIamAuthorizer: true, DefaultAuthorizer: AWS_IAM}", "GET /default=AWS_IAM GET /open=", ""},
		{"{EnableIamAuthorizer: true}", "GET /default= GET /open=", ""},
		{"{DefaultAuthorizer: AWS_IAM}", "", "does not set Auth.EnableIamAuthorizer"},
		{"{DefaultAuthorizer: MyJwt}", "", `Auth.Authorizer "MyJwt" is not emulated`},
	} {
		routes, err := lambdas.RoutesFromTemplate([]byte(strings.Replace(tmpl, "API_AUTH", c.apiAuth, 1)), "Fn")
		var got []string
		for _, r := range routes {
			got = append(got, r.Key()+"="+r.Auth)
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "event Default") {
				t.Errorf("API Auth %s: %v; want an error naming event Default and %q", c.apiAuth, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("API Auth %s: %v %v; want %s", c.apiAuth, got, err, c.want)
		}
	}
}

// The dispatch function's SQS event: the dispatch queue, batches of 5,
// ReportBatchItemFailures.
func TestSQSMappingFromTemplate_IsTheDispatchQueuesMapping(t *testing.T) {
	m, err := lambdas.SQSMappingFromTemplate(readTemplate(t), "DispatchFunction")
	if err != nil {
		t.Fatal(err)
	}
	if m.QueueLogicalID != "DispatchQueue" || m.BatchSize != 5 || !m.ReportBatchItemFailures {
		t.Errorf("mapping %+v; want DispatchQueue, batch 5, ReportBatchItemFailures", m)
	}
	if _, err := lambdas.SQSMappingFromTemplate(readTemplate(t), "WorkerApiFunction"); err == nil {
		t.Error("WorkerApiFunction has no SQS event; want an error")
	}
}

// Each function's memory size and timeout are its own over Globals', and
// its environment merges both.
func TestFunctionsFromTemplate_MergeGlobals(t *testing.T) {
	fns, err := lambdas.FunctionsFromTemplate(readTemplate(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lambdas.FunctionSpec{}
	for _, f := range fns {
		got[f.LogicalID] = f
	}
	for id, want := range map[string]struct {
		code    string
		mem     int
		timeout time.Duration
	}{
		"WorkerApiFunction": {"functions/workerapi", 512, 28 * time.Second}, // its own, under Globals' 30
		"DispatchFunction":  {"functions/dispatch", 256, 120 * time.Second},
		"EventsFunction":    {"functions/events", 256, 120 * time.Second},
	} {
		f, ok := got[id]
		if !ok {
			t.Errorf("no %s in %v", id, fns)
			continue
		}
		if f.CodeURI != want.code || f.MemoryMB != want.mem || f.Timeout != want.timeout {
			t.Errorf("%s: %s %d MB %v; want %s %d MB %v", id, f.CodeURI, f.MemoryMB, f.Timeout, want.code, want.mem, want.timeout)
		}
		if f.Env["STRATUS_TABLE"] == nil || !slices.Equal(f.Architectures, []string{"arm64"}) {
			t.Errorf("%s: env %v, architectures %v; want Globals' STRATUS_TABLE and arm64", id, f.Env, f.Architectures)
		}
	}
	if got["WorkerApiFunction"].Env["STRATUS_MAX_UPLOAD_BYTES"] == nil {
		t.Error("WorkerApiFunction lacks its own STRATUS_MAX_UPLOAD_BYTES")
	}
}
