package awsrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/worker"
)

// ExecuteAPIService is the SigV4 signing name of an API Gateway API's
// routes (API Gateway Developer Guide § Control access to HTTP APIs with
// IAM authorization).
const ExecuteAPIService = "execute-api"

// OperatorHITLRoute is the path of the worker API's IAM-authorised reply
// route under the stack's ApiUrl (httpapi.OperatorHITLPath, filled).
func OperatorHITLRoute(runID, node string) string {
	return "/v1/operator/runs/" + url.PathEscape(runID) + "/nodes/" + url.PathEscape(node) + "/hitl"
}

// replyTimeout bounds one reply: API Gateway's integration timeout is
// 30 s (docs/architecture.md § Limits).
const replyTimeout = 35 * time.Second

// Reply answers node of run runID for a human (docs/security.md § Operator
// replies on AWS): it posts r to the worker API's IAM-authorised route,
// POST <ApiUrl>/v1/operator/runs/<run>/nodes/<node>/hitl, signed with
// SigV4 (service execute-api, the target's region) with the credentials
// of the SDK configuration the target was opened with, through its HTTP
// client (a custom CA bundle included). API Gateway verifies the
// signature and the caller's execute-api:Invoke permission; the step
// records the caller's ARN. Nothing of the stack's HMAC key is read.
//
// Errors: the store's ENOTFOUND for an unknown run; ECONFLICT (field
// run_id) for a run that is not running; EINVALID when the stack's worker
// API is not known (no --stack); ECONFLICT when the API does not answer;
// *orchestrator.ReplyError for a refusal — the worker API's (as
// orchestrator.DecodeReply reads it), or API Gateway's 403 with what
// grants the call.
func (t *Target) Reply(ctx context.Context, runID, node string, r worker.Reply) (*worker.HITLValue, error) {
	run, err := t.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if stratus.RunTerminal(run.Status) {
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "run_id", "run %s is not running: it ended %s; nothing waits for a human", runID, run.Status)
	}
	if t.APIURL == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "stack", "the stack's worker API is not known, and a reply goes there; give --stack NAME (its %s output names the API)", OutputAPIURL)
	}
	if t.cfg.Credentials == nil {
		return nil, stratus.Errorf(stratus.EINVALID, "no AWS credentials to sign the reply with: the reply route is authorised by your AWS identity (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	target := strings.TrimSuffix(t.APIURL, "/") + OperatorHITLRoute(runID, node)
	ctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "stack", "the stack's worker API URL %q: %v", t.APIURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := t.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS credentials to sign the reply with: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), ExecuteAPIService, t.region, time.Now().UTC()); err != nil {
		return nil, fmt.Errorf("sign the reply (SigV4): %w", err)
	}
	var client aws.HTTPClient = t.cfg.HTTPClient
	if client == nil {
		client = awshttp.NewBuildableClient()
	}
	resp, err := client.Do(req)
	var unknownCA x509.UnknownAuthorityError
	switch {
	case errors.As(err, &unknownCA):
		// It answered, with a certificate this machine does not trust: a
		// stand-in's own CA (`stratus dev aws` prints its --ca-bundle).
		return nil, stratus.Errorf(stratus.ECONFLICT, "run %s cannot be replied to: the worker API at %s answers with a certificate signed by an authority this machine does not trust (%v); give that authority's PEM file as --ca-bundle FILE (or AWS_CA_BUNDLE): stratus dev aws prints its own", runID, t.APIURL, err)
	case err != nil:
		return nil, stratus.Errorf(stratus.ECONFLICT, "run %s cannot be replied to: its worker API at %s does not answer (%v)", runID, t.APIURL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	v, err := orchestrator.DecodeReply(resp.StatusCode, data, runID, node, r)
	var re *orchestrator.ReplyError
	if errors.As(err, &re) && re.Status == http.StatusForbidden && re.Field == "" {
		// API Gateway's own refusal: the signature, or the permission.
		re.Err = fmt.Errorf("%w; the reply is signed with your AWS credentials (access key %s), which must be valid and allowed execute-api:Invoke on the route: attach the stack's operator policy (its OperatorPolicyArn output)", re.Err, creds.AccessKeyID)
	}
	return v, err
}
