package lambdas_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

// operator is the principal the IAM tests' front knows.
var operator = lambdas.IAMPrincipal{AccessKeyID: "AKIAOPERATOR", SecretAccessKey: "operator-secret", AccountID: "123456789012",
	UserARN: "arn:aws:iam::123456789012:user/alice", UserID: "AIDAALICE"}

// iamFront serves an AWS_IAM route and a Bearer route in front of a
// function that records the events it gets.
func iamFront(t *testing.T, opts ...lambdas.FrontOption) (*httptest.Server, *[]events.APIGatewayV2HTTPRequest) {
	t.Helper()
	var seen []events.APIGatewayV2HTTPRequest
	fn := invokerFunc(func(_ context.Context, p []byte) ([]byte, error) {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(p, &ev); err != nil {
			return nil, err
		}
		seen = append(seen, ev)
		return []byte(`{"statusCode":200,"body":"ok"}`), nil
	})
	routes := []lambdas.Route{
		{Method: "POST", Path: "/v1/operator/runs/{run_id}/nodes/{node}/hitl", Auth: lambdas.AuthIAM},
		{Method: "POST", Path: "/v1/runs/{run_id}/nodes/{node}/hitl"},
	}
	srv := httptest.NewServer(lambdas.APIFront(routes, fn, opts...))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// signed is a POST of body to url, signed with SigV4 as the SDK signs an
// execute-api request: creds, service, region, at.
func signed(t *testing.T, url, body string, creds aws.Credentials, service, region string, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		t.Fatal(err)
	}
	return req
}

func send(t *testing.T, req *http.Request) (int, string, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), string(b)
}

// API Gateway's IAM authorizer (API Gateway Developer Guide § Control
// access to HTTP APIs with IAM authorization): a route whose event names
// AWS_IAM takes only a SigV4-signed request of a known principal, and the
// function never sees anything else; API Gateway's own 403s say why —
// unsigned "Forbidden", an unknown key, a bad signature (a wrong secret,
// a body changed after signing), a credential scoped to another service
// or region, a signature older than five minutes, a Bearer credential.
func TestAPIFront_IAMRouteRefusesWhatAPIGatewayRefuses(t *testing.T) {
	now := time.Now().UTC()
	srv, seen := iamFront(t, lambdas.WithIAM(lambdas.IAM{Region: "us-east-1", Principals: []lambdas.IAMPrincipal{operator}}))
	url := srv.URL + "/v1/operator/runs/r-1/nodes/gate/hitl"
	const body = `{"decision":"approve"}`
	good := aws.Credentials{AccessKeyID: operator.AccessKeyID, SecretAccessKey: operator.SecretAccessKey}
	tampered := signed(t, url, body, good, "execute-api", "us-east-1", now)
	tampered.Body, tampered.ContentLength = io.NopCloser(strings.NewReader(`{"decision":"reject"}`)), int64(len(`{"decision":"reject"}`))
	bearer, _ := http.NewRequest("POST", url, strings.NewReader(body))
	bearer.Header.Set("Authorization", "Bearer op-token")
	unsigned, _ := http.NewRequest("POST", url, strings.NewReader(body))
	for _, c := range []struct {
		name      string
		req       *http.Request
		errorType string
		message   string
	}{
		{"unsigned", unsigned, "", "Forbidden"},
		{"a Bearer credential", bearer, "IncompleteSignatureException", "Authorization header requires 'Credential' parameter."},
		{"an unknown access key", signed(t, url, body, aws.Credentials{AccessKeyID: "AKIAOTHER", SecretAccessKey: operator.SecretAccessKey}, "execute-api", "us-east-1", now),
			"UnrecognizedClientException", "The security token included in the request is invalid."},
		{"a wrong secret", signed(t, url, body, aws.Credentials{AccessKeyID: operator.AccessKeyID, SecretAccessKey: "not-the-secret"}, "execute-api", "us-east-1", now),
			"InvalidSignatureException", "The request signature we calculated does not match the signature you provided."},
		{"a body changed after signing", tampered, "InvalidSignatureException", "The request signature we calculated does not match"},
		{"another service's scope", signed(t, url, body, good, "s3", "us-east-1", now), "InvalidSignatureException", "Credential should be scoped to correct service: 'execute-api'."},
		{"another region's scope", signed(t, url, body, good, "execute-api", "eu-west-1", now), "InvalidSignatureException", "Credential should be scoped to a valid region."},
		{"a stale signature", signed(t, url, body, good, "execute-api", "us-east-1", now.Add(-10*time.Minute)), "InvalidSignatureException", "Signature expired"},
	} {
		code, typ, got := send(t, c.req)
		var msg struct{ Message string }
		if code != 403 || typ != c.errorType || json.Unmarshal([]byte(got), &msg) != nil || !strings.HasPrefix(msg.Message, c.message) {
			t.Errorf("%s: %d %q %s; want 403, x-amzn-ErrorType %q, message %q…", c.name, code, typ, got, c.errorType, c.message)
		}
	}
	if len(*seen) != 0 {
		t.Fatalf("refused requests reached the function: %d", len(*seen))
	}

	// Signed by the principal: the function gets the event, the caller in
	// requestContext.authorizer.iam as API Gateway fills it.
	if code, _, got := send(t, signed(t, url, body, good, "execute-api", "us-east-1", now)); code != 200 || len(*seen) != 1 {
		t.Fatalf("a signed request: %d %s, %d events; want the function's 200", code, got, len(*seen))
	}
	ev := (*seen)[0]
	if a := ev.RequestContext.Authorizer; a == nil || a.IAM == nil || a.IAM.UserARN != operator.UserARN || a.IAM.AccessKey != operator.AccessKeyID ||
		a.IAM.AccountID != operator.AccountID || a.IAM.CallerID != operator.UserID || a.IAM.UserID != operator.UserID {
		t.Errorf("the event's authorizer %+v; want the operator's IAM identity", a)
	}
	if ev.Body != body || ev.PathParameters["run_id"] != "r-1" || ev.Headers["authorization"] == "" {
		t.Errorf("the event %+v; want the body, path parameters and headers as sent", ev)
	}

	// A route without the authorizer takes anything through, and its
	// event carries no identity, signed or not.
	if code, _, _ := send(t, signed(t, srv.URL+"/v1/runs/r-1/nodes/gate/hitl", body, good, "execute-api", "us-east-1", now)); code != 200 || (*seen)[1].RequestContext.Authorizer != nil {
		t.Errorf("a Bearer route: %d, authorizer %+v; want the function's 200 and no identity", code, (*seen)[1].RequestContext.Authorizer)
	}
}

// A front that knows no principal refuses every request to an AWS_IAM
// route: the route is never open.
func TestAPIFront_IAMRouteWithoutPrincipalsIsClosed(t *testing.T) {
	srv, seen := iamFront(t)
	creds := aws.Credentials{AccessKeyID: operator.AccessKeyID, SecretAccessKey: operator.SecretAccessKey}
	if code, _, got := send(t, signed(t, srv.URL+"/v1/operator/runs/r-1/nodes/gate/hitl", "{}", creds, "execute-api", "us-east-1", time.Now())); code != 403 || len(*seen) != 0 {
		t.Errorf("%d %s; want 403 and the function not invoked", code, got)
	}
}
