package functions_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// issue 11 § 2: the stack's machines share one execution role, and the
// operator policy grants exactly what `stratus run|resume|status|runs|
// cancel --target aws` calls, on the stack's own resources only: creating
// and running machines under the stack's prefix, following and stopping
// their executions, passing that role and no other, the table, the
// bucket's prefix and the stack itself. No wildcard action, no "*"
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
		"iam:PassRole":                "StateMachineRole",
		"dynamodb:TransactWriteItems": "StoreTable", "dynamodb:GetItem": "StoreTable", "dynamodb:UpdateItem": "StoreTable",
		"dynamodb:Query": "StoreTable", "dynamodb:BatchGetItem": "StoreTable", "dynamodb:PutItem": "StoreTable",
		// A task's lock taken over from a run that ended (dynamodb.Store.CreateRunLocked).
		"dynamodb:ConditionCheckItem": "StoreTable",
		"s3:GetObject":                "${DataBucket.Arn}/stratus/*", "s3:PutObject": "${DataBucket.Arn}/stratus/*", "s3:ListBucket": "DataBucket",
		"cloudformation:DescribeStacks": "AWS::StackId",
	} {
		got, ok := granted[action]
		if !ok || !strings.Contains(got, resource) {
			t.Errorf("the operator policy grants %s on %q; want it on %s", action, got, resource)
		}
	}
	if extra := slices.DeleteFunc(keys(granted), func(a string) bool {
		return strings.HasPrefix(a, "states:") || strings.HasPrefix(a, "dynamodb:") || strings.HasPrefix(a, "s3:") || a == "iam:PassRole" || a == "cloudformation:DescribeStacks"
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
