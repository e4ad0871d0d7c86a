// Command fake is the test bootstrap of package lambdas: a Lambda function
// on the provided.al2023 runtime API whose behaviour its payload chooses.
//
//   - {"echo": X}: returns X
//   - {"sleep_ms": N}: sleeps N ms, then returns {"slept": N}
//   - {"fail": "message"}: returns an error (errorType "errorString")
//   - {"exit": N}: exits with status N mid-invoke
//   - {"child": true}: starts a `sleep 600` child in its own group, returns its pid
//   - {"pids": true}: returns its pid and its parent's (the emulator's)
//   - {"big": N}: returns a string of N bytes
//   - an API Gateway HTTP API 2.0 event (version "2.0"): returns a response
//     echoing what it received (method, path, query, headers, body,
//     base64, path parameters) with status 201, a header and a cookie
//   - {"env": [names]}: returns those environment variables
//   - an SQS event (Records): reports the records whose body is "fail" as
//     batch item failures, and the item "bogus" when a body is "bogus"
package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

type request struct {
	Version string          `json:"version"`
	Echo    json.RawMessage `json:"echo"`
	SleepMS int             `json:"sleep_ms"`
	Fail    string          `json:"fail"`
	Exit    *int            `json:"exit"`
	Child   bool            `json:"child"`
	Pids    bool            `json:"pids"`
	Big     int             `json:"big"`
	Env     []string        `json:"env"`
	Records []struct {
		MessageID string `json:"messageId"`
		Body      string `json:"body"`
	} `json:"Records"`
}

func handle(_ context.Context, raw json.RawMessage) (any, error) {
	var r request
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	switch {
	case r.Records != nil:
		var resp events.SQSEventResponse
		for _, rec := range r.Records {
			switch rec.Body {
			case "fail":
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageID})
			case "bogus":
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: "bogus"})
			}
		}
		return resp, nil
	case r.Version == "2.0":
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, err
		}
		if ev.RawPath == "/v1/fail" {
			return nil, errors.New("asked to fail")
		}
		if ev.RawPath == "/v1/slow" {
			time.Sleep(10 * time.Second)
		}
		body := ev.Body
		if ev.IsBase64Encoded {
			b, _ := base64.StdEncoding.DecodeString(body)
			body = string(b)
		}
		out, _ := json.Marshal(map[string]any{
			"routeKey": ev.RouteKey, "method": ev.RequestContext.HTTP.Method, "path": ev.RawPath,
			"query": ev.RawQueryString, "headers": ev.Headers, "body": body, "base64": ev.IsBase64Encoded,
			"pathParameters": ev.PathParameters, "bodyHex": hex.EncodeToString([]byte(body)), "sourceIp": ev.RequestContext.HTTP.SourceIP, "cookies": ev.Cookies,
		})
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "X-Fake": "yes"},
			Cookies: []string{"a=1; Path=/"}, Body: base64.StdEncoding.EncodeToString(out), IsBase64Encoded: true}, nil
	case r.Echo != nil:
		return r.Echo, nil
	case r.SleepMS > 0:
		// Past the deadline in ctx, as a handler that ignores it would.
		time.Sleep(time.Duration(r.SleepMS) * time.Millisecond)
		return map[string]int{"slept": r.SleepMS}, nil
	case r.Fail != "":
		return nil, errors.New(r.Fail)
	case r.Exit != nil:
		os.Exit(*r.Exit)
	case r.Child:
		c := exec.Command("sleep", "600")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return nil, err
		}
		return map[string]int{"pid": c.Process.Pid, "self": os.Getpid()}, nil
	case r.Pids:
		return map[string]int{"self": os.Getpid(), "parent": os.Getppid()}, nil
	case r.Big > 0:
		return strings.Repeat("x", r.Big), nil
	case r.Env != nil:
		m := map[string]string{}
		for _, k := range r.Env {
			m[k] = os.Getenv(k)
		}
		return m, nil
	}
	return map[string]string{"ok": "true"}, nil
}

func main() { lambda.Start(handle) }
