package functions_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// docs/architecture.md § The run lifecycle: the stack's machines share one
// execution role, and the operator policy grants exactly what `stratus
// run|resume|status|runs|cancel|approve|reject|answer --target aws` calls,
// on the stack's own resources only: creating and running machines under the
// stack's prefix, following and stopping their executions, passing that role
// and no other, the table, the bucket's prefix, the stack itself, and
// invoking the worker API's operator routes
// (docs/security.md § Operator replies on AWS). No wildcard action, no "*"
// resource.
func TestTemplate_OperatorPolicyGrantsWhatTheCLICallsOnTheStackOnly(t *testing.T) {
	tp := loadTemplate(t)
	for _, id := range tp.ofType("AWS::Serverless::StateMachine") {
		if r := tp.props(id)["Role"]; !refTo(r, "StateMachineRole") {
			t.Errorf("%s runs as %v; want StateMachineRole, the role runs' own machines get", id, r)
		}
	}
	if !refTo(asMap(tp.outputs["StateMachineRoleArn"])["Value"], "StateMachineRole") || !refTo(asMap(tp.outputs["OperatorPolicyArn"])["Value"], "OperatorPolicy") {
		t.Errorf("outputs StateMachineRoleArn %v, OperatorPolicyArn %v", tp.outputs["StateMachineRoleArn"], tp.outputs["OperatorPolicyArn"])
	}
	if str(tp.raw["OperatorPolicy"]["Type"]) != "AWS::IAM::ManagedPolicy" {
		t.Fatalf("OperatorPolicy is %v; want an AWS::IAM::ManagedPolicy", tp.raw["OperatorPolicy"]["Type"])
	}
	granted := map[string]string{} // action → its resource, rendered
	for _, s := range asList(asMap(tp.props("OperatorPolicy")["PolicyDocument"])["Statement"]) {
		st := asMap(s)
		for _, a := range actionsOf(st) {
			if strings.Contains(a, "*") {
				t.Errorf("the operator policy grants the wildcard action %s", a)
			}
			if st["Resource"] == "*" {
				t.Errorf("the operator policy grants %s on every resource", a)
			}
			granted[a] = fmt.Sprint(st["Resource"])
		}
	}
	machines := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-*"
	executions := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${AWS::StackName}-*:*"
	for action, resource := range map[string]string{
		"states:CreateStateMachine": machines, "states:UpdateStateMachine": machines, "states:DescribeStateMachine": machines,
		"states:StartExecution": machines, "states:TagResource": machines,
		"states:DescribeExecution": executions, "states:StopExecution": executions, "states:GetExecutionHistory": executions,
		"iam:PassRole": "StateMachineRole",
		// ConditionCheckItem: also a task's lock taken over from a run that
		// ended (dynamodb.Store.CreateRunLocked).
		"dynamodb:ConditionCheckItem": "StoreTable", "dynamodb:GetItem": "StoreTable", "dynamodb:UpdateItem": "StoreTable",
		"dynamodb:Query": "StoreTable", "dynamodb:BatchGetItem": "StoreTable", "dynamodb:PutItem": "StoreTable",
		"s3:GetObject": "${DataBucket.Arn}/stratus/*", "s3:PutObject": "${DataBucket.Arn}/stratus/*", "s3:ListBucket": "DataBucket",
		"cloudformation:DescribeStacks": "AWS::StackId",
		// `stratus submit --target aws` (README.md § Task pool): a task
		// file moved between the pool's prefixes, and the claim woken.
		"s3:DeleteObject": "${DataBucket.Arn}/stratus/tasks/*", "sqs:SendMessage": "ClaimQueue",
		// The worker API's IAM-authorised reply route, and no other route.
		"execute-api:Invoke": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${WorkerApi}/*/POST/v1/operator/*",
	} {
		got, ok := granted[action]
		if !ok || !strings.Contains(got, resource) {
			t.Errorf("the operator policy grants %s on %q; want it on %s", action, got, resource)
		}
	}
	if extra := slices.DeleteFunc(keys(granted), func(a string) bool {
		return strings.HasPrefix(a, "states:") || strings.HasPrefix(a, "dynamodb:") || strings.HasPrefix(a, "s3:") || a == "iam:PassRole" ||
			a == "cloudformation:DescribeStacks" || a == "execute-api:Invoke" || a == "sqs:SendMessage"
	}); len(extra) > 0 {
		t.Errorf("the operator policy grants more than the CLI calls: %v", extra)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// docs/security.md § Operator replies on AWS: the operator's reply route
// is the one route of the worker API behind API Gateway's AWS_IAM
// authorizer — the API enables that authorizer and makes no route use it
// by default (a worker's Bearer routes stay as they are), every route
// under /v1/operator/ names it, and no other route does; the operator
// policy's execute-api:Invoke covers those routes (POST, any stage) of
// that API and nothing else.
func TestTemplate_OperatorReplyRouteIsIAMAuthorised(t *testing.T) {
	tp := loadTemplate(t)
	auth := asMap(tp.props("WorkerApi")["Auth"])
	if auth["EnableIamAuthorizer"] != true {
		t.Errorf("WorkerApi Auth %v: want EnableIamAuthorizer: true (the AWS_IAM authorizer the operator route names)", auth)
	}
	if d, ok := auth["DefaultAuthorizer"]; ok {
		t.Errorf("WorkerApi Auth.DefaultAuthorizer is %v: the workers' routes take a Bearer credential, not an authorizer", d)
	}
	var iamRoutes []string
	for name, ev := range asMap(tp.props("WorkerApiFunction")["Events"]) {
		p := asMap(asMap(ev)["Properties"])
		path, authorizer := str(p["Path"]), str(asMap(p["Auth"])["Authorizer"])
		operator := strings.HasPrefix(path, "/v1/operator/")
		switch {
		case operator && authorizer != "AWS_IAM":
			t.Errorf("event %s (%s %s): Auth.Authorizer %q; want AWS_IAM", name, p["Method"], path, authorizer)
		case !operator && authorizer != "":
			t.Errorf("event %s (%s %s): Auth.Authorizer %q; want none (a Bearer route)", name, p["Method"], path, authorizer)
		case operator:
			iamRoutes = append(iamRoutes, str(p["Method"])+" "+path)
		}
	}
	if !slices.Equal(iamRoutes, []string{"POST /v1/operator/runs/{run_id}/nodes/{node}/hitl"}) {
		t.Errorf("IAM-authorised routes %v; want the operator's reply route", iamRoutes)
	}
	for _, s := range asList(asMap(tp.props("OperatorPolicy")["PolicyDocument"])["Statement"]) {
		st := asMap(s)
		if !slices.Contains(actionsOf(st), "execute-api:Invoke") {
			continue
		}
		if st["Effect"] != "Allow" || len(actionsOf(st)) != 1 {
			t.Errorf("statement %v: want Allow of execute-api:Invoke alone", st)
		}
		want := "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${WorkerApi}/*/POST/v1/operator/*"
		if got := str(asMap(st["Resource"])["Fn::Sub"]); got != want {
			t.Errorf("execute-api:Invoke on %v; want !Sub %q (the operator routes of WorkerApi, POST, any stage)", st["Resource"], want)
		}
	}
}
