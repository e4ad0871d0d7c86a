// Package handler maps Lambda events onto Stratus's own handlers, so each
// functions/<name>/main.go only wires (docs/architecture.md § Layout). It is
// the one place that imports aws-lambda-go's runtime besides those mains: under
// internal/ only the stand-in, internal/devstack/lambdas, imports its events
// types.
//
//   - HTTPAPI: an API Gateway HTTP API event (payload format 2.0) becomes an
//     *http.Request for the same http.Handler the embedded server runs
//     (internal/httpapi), through aws-lambda-go-api-proxy's v2 adapter; the
//     caller an AWS_IAM route's authorizer verified rides in its context.
//   - SQS: a batch of dispatch-queue records, each handed to a dispatch
//     function; the records whose dispatch failed for an infrastructure
//     reason are reported as batch item failures, so SQS redelivers those
//     and only those (the event source mapping sets ReportBatchItemFailures).
//   - Events (events.go): EventBridge events, an execution's status change
//     or the schedule's tick, for the events function.
package handler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/httpapi"
)

// HTTPFunc is the Lambda handler of an HTTP API (payload format 2.0).
type HTTPFunc func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// HTTPAPI returns the Lambda handler serving h. The adapter decodes a
// base64 body (API Gateway sends binary bodies so) and builds the request's
// header from API Gateway's lower-cased names through http.Header.Add, so
// "authorization" reaches h as "Authorization". A body that claims base64
// but is not is answered 400 in the JSON error shape instead of failing
// the invocation. The caller API Gateway's IAM authorizer verified, on an
// AWS_IAM route (requestContext.authorizer.iam), reaches h in the
// request's context (httpapi.IAMIdentityFrom); nothing a client sends
// can put one there. after, when set, runs once h has answered and before
// the handler returns: the Lambda environment is frozen between
// invocations, so work h started in the background (the supervisor's
// observation launches, worker.Service.Drain) must end first.
//
// A request ends before the function's own deadline: h's context ends
// ResponseMargin before it, and a request that failed because its time ran
// out is answered 503 (retry) instead of the 500 it caused, so the worker
// API always answers for itself, never the Lambda timeout, and nothing of
// it goes on after its caller was answered (template.yaml keeps the
// function's timeout under API Gateway's 30 s integration ceiling).
func HTTPAPI(h http.Handler, after func()) HTTPFunc {
	adapter := httpadapter.NewV2(withIAMIdentity(h))
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if after != nil {
			defer after()
		}
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-ResponseMargin))
			defer cancel()
		}
		resp, err := httpAPI(ctx, adapter, ev)
		if err == nil && resp.StatusCode >= 500 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return outOfTime(), nil
		}
		return resp, err
	}
}

// ResponseMargin is how long before the function's deadline a worker API
// request stops (HTTPAPI): time to answer and to run after.
const ResponseMargin = 1500 * time.Millisecond

// outOfTime is the answer to a request whose time ran out: 503, which a
// worker retries (the route's writes are idempotent).
func outOfTime() events.APIGatewayV2HTTPResponse {
	var body httpapi.ErrorBody
	body.Error.Code = stratus.EINTERNAL
	body.Error.Message = "the worker API function ran out of time for this request (its timeout, under API Gateway's 30 s); retry it"
	b, _ := json.Marshal(body)
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusServiceUnavailable,
		Headers:    map[string]string{"Content-Type": "application/json", "Retry-After": "1"},
		Body:       string(b),
	}
}

// httpAPI serves one HTTP API event with adapter.
func httpAPI(ctx context.Context, adapter *httpadapter.HandlerAdapterV2, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return errorResponse(stratus.FieldErrorf(stratus.EINVALID, "body",
				"the request is marked base64-encoded but its body is not standard base64: %v", err))
		}
		ev.Body, ev.IsBase64Encoded = string(b), false
	}
	// The address workers are told to call (awsapp: HTTPHandler) is the
	// domain API Gateway records the request came to, not a header the
	// client wrote.
	if d := ev.RequestContext.DomainName; d != "" {
		if ev.Headers == nil {
			ev.Headers = map[string]string{}
		}
		for k := range ev.Headers {
			if strings.EqualFold(k, "host") {
				delete(ev.Headers, k)
			}
		}
		ev.Headers["host"] = d
	}
	return adapter.ProxyWithContext(ctx, ev)
}

// withIAMIdentity hands h the identity of an IAM-authorised request: the
// adapter keeps the event's request context in the request's context
// (core.GetAPIGatewayV2ContextFromContext), and API Gateway fills its
// authorizer.iam only once it has verified the SigV4 signature and the
// caller's execute-api:Invoke permission on the route (API Gateway
// Developer Guide § Control access to HTTP APIs with IAM authorization).
func withIAMIdentity(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok && rc.Authorizer != nil && rc.Authorizer.IAM != nil {
			iam := rc.Authorizer.IAM
			r = r.WithContext(httpapi.WithIAMIdentity(r.Context(), httpapi.IAMIdentity{AccessKey: iam.AccessKey, AccountID: iam.AccountID,
				CallerID: iam.CallerID, UserARN: iam.UserARN, UserID: iam.UserID, PrincipalOrgID: iam.PrincipalOrgID}))
		}
		h.ServeHTTP(w, r)
	})
}

// errorResponse answers err in the worker API's JSON error shape.
func errorResponse(err error) (events.APIGatewayV2HTTPResponse, error) {
	var body httpapi.ErrorBody
	body.Error.Code = stratus.ErrorCode(err)
	body.Error.Message = stratus.ErrorMessage(err)
	var se *stratus.Error
	if errors.As(err, &se) {
		body.Error.Field = se.Field
	}
	b, _ := json.Marshal(body)
	return events.APIGatewayV2HTTPResponse{
		StatusCode: httpapi.ErrorStatus(body.Error.Code),
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}, nil
}

// DispatchFunc handles one dispatch-queue message body. It returns an error
// only when the message should be delivered again: an infrastructure
// failure (throttling, a capacity error, a service outage). A message that
// can never succeed is dealt with inside (its Task state failed) and
// answers nil.
type DispatchFunc func(ctx context.Context, body string) error

// SQSFunc is the Lambda handler of an SQS event source with
// ReportBatchItemFailures.
type SQSFunc func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// SQS returns the Lambda handler that runs dispatch on each record of a
// batch and reports the message ids of those that failed as batch item
// failures. It never fails the whole batch: the records that succeeded are
// deleted. The records of one step (a message's run_id and node) run in
// their order; those of different steps at once, so no message waits out
// another's pickup window for a pooled runner inside one invocation. A
// record not started when the invocation has less than
// DispatchStartMargin left is reported failed, for redelivery, rather than
// let the invocation time out with the batch. log, when set, gets one
// warning per failed record; after runs before the handler returns (see
// HTTPAPI).
func SQS(dispatch DispatchFunc, log *slog.Logger, after func()) SQSFunc {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if after != nil {
			defer after()
		}
		var groups [][]events.SQSMessage
		index := map[string]int{}
		for _, rec := range ev.Records {
			k := stepKey(rec)
			i, ok := index[k]
			if !ok {
				i = len(groups)
				index[k] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], rec)
		}
		failed := make([]bool, len(ev.Records))
		pos := map[string]int{}
		for i, rec := range ev.Records {
			pos[rec.MessageId] = i
		}
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, rec := range g {
					err := ctx.Err()
					if dl, ok := ctx.Deadline(); ok && err == nil && time.Until(dl) < DispatchStartMargin {
						err = fmt.Errorf("not started: %s left of the invocation", time.Until(dl).Round(time.Millisecond))
					}
					if err == nil {
						err = dispatch(ctx, rec.Body)
					}
					if err != nil {
						if log != nil {
							log.Warn(fmt.Sprintf("dispatch message %s will be redelivered: %v", rec.MessageId, err), "message_id", rec.MessageId)
						}
						failed[pos[rec.MessageId]] = true
					}
				}
			}()
		}
		wg.Wait()
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, rec := range ev.Records {
			if failed[i] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
		}
		return resp, nil
	}
}

// DispatchStartMargin is the least time an invocation must have left for
// SQS to start a record's dispatch (a RunTask with its retries).
const DispatchStartMargin = 10 * time.Second

// stepKey is what orders a record among the batch's: its step (run_id and
// node of a dispatch or stop message), or the record alone.
func stepKey(rec events.SQSMessage) string {
	var m struct {
		RunID string `json:"run_id"`
		Node  string `json:"node"`
	}
	if json.Unmarshal([]byte(rec.Body), &m) == nil && m.RunID != "" && m.Node != "" {
		return m.RunID + "\x00" + m.Node
	}
	return "\x01" + rec.MessageId
}
