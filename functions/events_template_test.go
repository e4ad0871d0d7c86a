package functions_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
)

// serviceFunctions build a worker.Service (awsapp.New): they read the HMAC
// key, launch workers and complete task tokens.
var serviceFunctions = []string{"DispatchFunction", "WorkerApiFunction"}

// eventsFunction is built by awsapp.NewEvents: the table and the bucket,
// nothing else.
const eventsFunction = "EventsFunction"

// Every function is a service function, the events function or the claim
// function, so each falls under the checks of one of them (a new function
// cannot slip past the least-privilege checks).
func TestTemplate_EveryFunctionIsAServiceOrTheEventsFunction(t *testing.T) {
	tp := loadTemplate(t)
	want := append([]string{eventsFunction, claimFunction}, serviceFunctions...)
	sort.Strings(want)
	if got := tp.ofType("AWS::Serverless::Function"); !slices.Equal(got, want) {
		t.Errorf("functions %v; the checks know %v", got, want)
	}
	if uri := filepath.Clean(str(tp.props(eventsFunction)["CodeUri"])); uri != filepath.Join("functions", "events") {
		t.Errorf("%s deploys %s; want functions/events", eventsFunction, uri)
	}
}

// A run nobody follows: the events function hears the end of
// every execution of each of the stack's state machines and of no other:
// an EventBridge rule on aws.states "Step Functions Execution Status
// Change" with the four terminal statuses and the stack's state machine
// ARNs; and an hourly schedule runs the store's Sweep.
func TestTemplate_EventsFunctionHearsEveryStateMachineEndAndTheHourlySweep(t *testing.T) {
	tp := loadTemplate(t)
	var rule, schedule map[string]any
	for name, ev := range asMap(tp.props(eventsFunction)["Events"]) {
		e := asMap(ev)
		switch str(e["Type"]) {
		case "EventBridgeRule":
			if rule != nil {
				t.Errorf("%s has a second EventBridgeRule event %s", eventsFunction, name)
			}
			rule = asMap(e["Properties"])
		case "Schedule":
			if schedule != nil {
				t.Errorf("%s has a second Schedule event %s", eventsFunction, name)
			}
			schedule = asMap(e["Properties"])
		default:
			t.Errorf("%s event %s has type %v; want EventBridgeRule or Schedule", eventsFunction, name, e["Type"])
		}
	}
	if rule == nil || schedule == nil {
		t.Fatalf("%s lacks its EventBridgeRule (%v) or Schedule (%v) event", eventsFunction, rule != nil, schedule != nil)
	}
	p := asMap(rule["Pattern"])
	strs := func(v any) []string {
		var out []string
		for _, x := range asList(v) {
			out = append(out, str(x))
		}
		sort.Strings(out)
		return out
	}
	if got := strs(p["source"]); !slices.Equal(got, []string{"aws.states"}) {
		t.Errorf("pattern source %v; want [aws.states]", got)
	}
	if got := strs(p["detail-type"]); !slices.Equal(got, []string{handler.DetailExecutionStatusChange}) {
		t.Errorf("pattern detail-type %v; want [%s] (functions/handler)", got, handler.DetailExecutionStatusChange)
	}
	detail := asMap(p["detail"])
	if got := strs(detail["status"]); !slices.Equal(got, []string{"ABORTED", "FAILED", "SUCCEEDED", "TIMED_OUT"}) {
		t.Errorf("pattern detail.status %v; want the four terminal statuses", got)
	}
	// docs/architecture.md § The run lifecycle: runs create state machines of
	// their own under the stack's prefix, so the rule matches that prefix,
	// which the stack's own machines share and the StateMachinePrefix output
	// names.
	const wantPrefix = "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-"
	arns := asList(detail["stateMachineArn"])
	if len(arns) != 1 || fmt.Sprint(asMap(asMap(arns[0])["prefix"])["Fn::Sub"]) != wantPrefix {
		t.Errorf("pattern detail.stateMachineArn %v; want one prefix match %q", arns, wantPrefix)
	}
	if out := fmt.Sprint(asMap(asMap(tp.outputs["StateMachinePrefix"])["Value"])["Fn::Sub"]); out != "${AWS::StackName}-" {
		t.Errorf("Outputs.StateMachinePrefix = %v; want ${AWS::StackName}-", out)
	}
	for _, id := range tp.ofType("AWS::Serverless::StateMachine") {
		if name := fmt.Sprint(asMap(tp.props(id)["Name"])["Fn::Sub"]); !strings.HasPrefix(name, "${AWS::StackName}-") {
			t.Errorf("%s is named %q, outside the prefix the events rule hears", id, name)
		}
	}
	if s := str(schedule["Schedule"]); s != "rate(1 hour)" {
		t.Errorf("schedule %q; want rate(1 hour)", s)
	}
}

// Least privilege: the events function reads and writes the table and the
// bucket's prefix (TestTemplate_LeastPrivilege checks those grants), stops
// the cluster's tasks (docs/architecture.md § The run lifecycle: the workers
// of an execution that ended under them) and is granted nothing else: no
// secret, no RunTask, no token.
func TestTemplate_EventsFunctionGetsTableAndBucketOnly(t *testing.T) {
	tp := loadTemplate(t)
	allowed := []string{"s3:GetObject", "s3:PutObject", "s3:ListBucket", "ecs:StopTask", "ecs:ListTasks", "states:GetExecutionHistory", "sqs:SendMessage"}
	for _, a := range []string{"ecs:StopTask", "ecs:ListTasks", "states:GetExecutionHistory"} {
		found := false
		for _, st := range statements(tp, eventsFunction) {
			found = found || slices.Contains(actionsOf(st), a)
		}
		if !found {
			t.Errorf("%s is not granted %s, which stopping a worker calls", eventsFunction, a)
		}
	}
	for _, pol := range asList(tp.props(eventsFunction)["Policies"]) {
		for kind := range asMap(pol) {
			if kind != "DynamoDBCrudPolicy" && kind != "Statement" {
				t.Errorf("%s has the policy %s; want DynamoDBCrudPolicy and statements only", eventsFunction, kind)
			}
		}
	}
	for _, st := range statements(tp, eventsFunction) {
		for _, a := range actionsOf(st) {
			if !slices.Contains(allowed, a) {
				t.Errorf("%s is granted %s; it needs only %v beyond the table", eventsFunction, a, allowed)
			}
		}
	}
	if v, ok := tp.env(eventsFunction)[awsapp.EnvSecretID]; ok {
		t.Errorf("%s sets %s = %v; it reads no secret", eventsFunction, awsapp.EnvSecretID, v)
	}
}
