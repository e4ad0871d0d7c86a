package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

// Bad --target aws flags are usage errors (exit 2) caught before anything
// is uploaded or started: a --ca-bundle that is not a PEM file of
// certificates included.
func TestRunTargetAWS_MalformedEndpointOrARNRefusedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, dir+"/task.md", "---\nid: t1\ntitle: x\n---\nbody\n")
	for _, c := range []struct{ flag, value, want string }{
		{"--endpoint-url", "notaurl", "--endpoint-url"},
		{"--state-machine", "garbage", "--state-machine"},
		{"--ca-bundle", dir + "/no-such.pem", "--ca-bundle " + dir + "/no-such.pem"},
		{"--ca-bundle", dir + "/task.md", "holds no PEM certificate"},
	} {
		r := runCLI(t, "run", dir+"/task.md", "--dir", dir, "--target", "aws", "--bucket", "b", "--table", "t", c.flag, c.value)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q", c.flag, c.value, r.code, r.stderr)
		}
	}
}

// docs/architecture.md § The run lifecycle: a call the operator's credentials
// may not make is named by the AWS error, and the CLI says which policy
// grants it.
func TestMain_AccessDeniedNamesTheOperatorPolicy(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("start an execution: %w", &smithy.GenericAPIError{Code: "AccessDeniedException",
		Message: "User: arn:aws:iam::1:user/op is not authorized to perform: states:CreateStateMachine on resource: arn:aws:states:us-east-1:1:stateMachine:s-implementation-abc"})
	if h := deniedHint(err); !strings.Contains(h, "OperatorPolicyArn") {
		t.Errorf("hint %q", h)
	}
	if h := deniedHint(errors.New(`Step Functions DescribeExecution: operation error SFN: DescribeExecution, https response error: Post "http://127.0.0.1:44757/": dial tcp 127.0.0.1:44757: connect: connection refused`)); !strings.Contains(h, "stratus dev aws") {
		t.Errorf("hint for a stand-in that is gone = %q", h)
	}
	if h := deniedHint(errors.New("something else")); h != "" {
		t.Errorf("hint for another error: %q", h)
	}
}

// An AWS_PROFILE that no shared file holds is the caller's input: exit 2,
// naming the profile and where profiles are read, not the SDK's words.
func TestTargetAWS_UnknownProfileIsAUsageError(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	r := runCLIEnv(t, []string{"AWS_PROFILE=nonexistent", "HOME=" + home, "AWS_CONFIG_FILE=", "AWS_SHARED_CREDENTIALS_FILE="},
		"runs", "--target", "aws", "--stack", "x", "--endpoint-url", "http://127.0.0.1:9")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `AWS profile "nonexistent" (AWS_PROFILE) is in neither`) || strings.Contains(r.stderr, "failed to get shared config profile") {
		t.Errorf("an unknown AWS_PROFILE: exit %d\n%s", r.code, r.stderr)
	}
}
