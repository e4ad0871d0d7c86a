package functions_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/awsapp"
)

// claimFunction runs the task pool's claim (README.md § Task pool): the
// table, the bucket's prefix and StartExecution of the stack's machines.
const claimFunction = "ClaimFunction"

// The claim function wakes three ways — a message of the claim queue (a
// run ended, `stratus submit` queued a task), a task file written under the
// bucket's tasks/pending/ (S3's "Object Created" through EventBridge, so
// anyone who may write there queues a task), and a five-minute schedule —
// and claims run one at a time (reserved concurrency 1).
func TestTemplate_ClaimFunctionWakesOnQueueTaskFileAndSchedule(t *testing.T) {
	tp := loadTemplate(t)
	p := tp.props(claimFunction)
	if uri := filepath.Clean(str(p["CodeUri"])); uri != filepath.Join("functions", "claim") {
		t.Fatalf("%s deploys %q; want functions/claim", claimFunction, uri)
	}
	if rc, _ := p["ReservedConcurrentExecutions"].(float64); rc != 1 {
		t.Errorf("%s ReservedConcurrentExecutions = %v; want 1 (claims serialize)", claimFunction, p["ReservedConcurrentExecutions"])
	}
	byType := map[string][]map[string]any{}
	for _, ev := range asMap(p["Events"]) {
		e := asMap(ev)
		byType[str(e["Type"])] = append(byType[str(e["Type"])], asMap(e["Properties"]))
	}
	if got := slices.Sorted(maps.Keys(byType)); !slices.Equal(got, []string{"EventBridgeRule", "SQS", "Schedule"}) {
		t.Fatalf("%s event types %v; want one SQS, one EventBridgeRule and one Schedule", claimFunction, got)
	}
	for typ, evs := range byType {
		if len(evs) != 1 {
			t.Errorf("%s has %d %s events; want one", claimFunction, len(evs), typ)
		}
	}

	// The queue: its visibility six times the function's timeout (Lambda's
	// advice for an SQS event source), a dead-letter queue, encrypted.
	sqsEv := byType["SQS"][0]
	queue := refTarget(sqsEv["Queue"])
	if queue != "ClaimQueue" || str(tp.raw[queue]["Type"]) != "AWS::SQS::Queue" {
		t.Fatalf("%s's SQS event is on %v; want the ClaimQueue", claimFunction, sqsEv["Queue"])
	}
	if b, _ := sqsEv["BatchSize"].(float64); b != 10 {
		t.Errorf("%s SQS BatchSize %v; want 10", claimFunction, sqsEv["BatchSize"])
	}
	q := tp.props(queue)
	timeout, _ := tp.fnProp(claimFunction, "Timeout").(float64)
	if vis, _ := q["VisibilityTimeout"].(float64); timeout == 0 || vis < 6*timeout {
		t.Errorf("%s VisibilityTimeout %v is under six times %s's Timeout %v", queue, q["VisibilityTimeout"], claimFunction, timeout)
	}
	if q["SqsManagedSseEnabled"] != true {
		t.Errorf("%s is not encrypted (SqsManagedSseEnabled)", queue)
	}
	redrive := asMap(q["RedrivePolicy"])
	if dlq := refTarget(redrive["deadLetterTargetArn"]); str(tp.raw[dlq]["Type"]) != "AWS::SQS::Queue" || redrive["maxReceiveCount"] == nil {
		t.Errorf("%s has no dead-letter queue with a maxReceiveCount: %v", queue, redrive)
	}
	if !refTo(asMap(tp.outputs["ClaimQueueUrl"])["Value"], queue) {
		t.Errorf("Outputs.ClaimQueueUrl = %v; want !Ref %s", tp.outputs["ClaimQueueUrl"], queue)
	}

	// The task file rule: S3's Object Created of the data bucket under the
	// prefix `stratus submit` writes to, which needs the bucket's events
	// sent to EventBridge.
	pat := asMap(byType["EventBridgeRule"][0]["Pattern"])
	if got := jsonOf(pat["source"]); got != `["aws.s3"]` {
		t.Errorf("rule source %s; want [aws.s3]", got)
	}
	if got := jsonOf(pat["detail-type"]); got != `["Object Created"]` {
		t.Errorf("rule detail-type %s; want [Object Created]", got)
	}
	d := asMap(pat["detail"])
	names := asList(asMap(d["bucket"])["name"])
	if len(names) != 1 || !refTo(names[0], "DataBucket") {
		t.Errorf("rule detail.bucket.name %v; want the DataBucket alone", names)
	}
	prefix := str(tp.env(claimFunction)[awsapp.EnvBucketPrefix]) + "tasks/pending/"
	if got, want := jsonOf(asMap(d["object"])["key"]), fmt.Sprintf(`[{"prefix":%q}]`, prefix); got != want {
		t.Errorf("rule detail.object.key %s; want %s (the bucket prefix's tasks/pending/)", got, want)
	}
	if en := asMap(asMap(tp.props("DataBucket")["NotificationConfiguration"])["EventBridgeConfiguration"])["EventBridgeEnabled"]; en != true {
		t.Errorf("DataBucket EventBridgeEnabled = %v; want true, or no Object Created event reaches the rule", en)
	}
	if s := str(byType["Schedule"][0]["Schedule"]); s != "rate(5 minutes)" {
		t.Errorf("schedule %q; want rate(5 minutes)", s)
	}
}

// The claim function is configured by the table, the bucket and its
// prefix, the task pool's two parameters and what it prepares a run with
// (the dispatch queue a definition names, the state machines' role and
// prefix, the heartbeat window) — no secret, no claim queue (it is what
// the queue wakes), no pool of runners.
func TestTemplate_ClaimFunctionEnvironment(t *testing.T) {
	tp := loadTemplate(t)
	own := asMap(asMap(tp.props(claimFunction)["Environment"])["Variables"])
	want := []string{awsapp.EnvQueueURL, awsapp.EnvHeartbeatSeconds, awsapp.EnvMaxConcurrentTasks, awsapp.EnvStateMachinePrefix, awsapp.EnvStateMachineRole, awsapp.EnvTaskQueue}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(own)); !slices.Equal(got, want) {
		t.Errorf("%s sets %v; want exactly %v (the rest from Globals)", claimFunction, got, want)
	}
	if got := jsonOf(own[awsapp.EnvMaxConcurrentTasks]); got != `{"Fn::Sub":"${MaxConcurrentTasks}"}` {
		t.Errorf("%s = %s; want the MaxConcurrentTasks parameter", awsapp.EnvMaxConcurrentTasks, got)
	}
	if !refTo(own[awsapp.EnvTaskQueue], "TaskQueue") {
		t.Errorf("%s = %v; want !Ref TaskQueue", awsapp.EnvTaskQueue, own[awsapp.EnvTaskQueue])
	}
	if !refTo(own[awsapp.EnvQueueURL], "DispatchQueue") || jsonOf(own[awsapp.EnvStateMachineRole]) != `{"Fn::GetAtt":"StateMachineRole.Arn"}` ||
		jsonOf(own[awsapp.EnvStateMachinePrefix]) != `{"Fn::Sub":"${AWS::StackName}-"}` || jsonOf(own[awsapp.EnvHeartbeatSeconds]) != `{"Fn::Sub":"${HeartbeatSeconds}"}` {
		t.Errorf("%s prepares runs with %v; want the dispatch queue, StateMachineRole, the stack's prefix and HeartbeatSeconds", claimFunction, own)
	}
	env := tp.env(claimFunction)
	if !refTo(env[awsapp.EnvTable], "StoreTable") || !refTo(env[awsapp.EnvBucket], "DataBucket") || str(env[awsapp.EnvBucketPrefix]) != "stratus/" {
		t.Errorf("%s's table, bucket and prefix are %v, %v, %v; want StoreTable, DataBucket, stratus/", claimFunction,
			env[awsapp.EnvTable], env[awsapp.EnvBucket], env[awsapp.EnvBucketPrefix])
	}
	for _, k := range []string{awsapp.EnvSecretID, awsapp.EnvClaimQueueURL, awsapp.EnvAPIURL, awsapp.EnvPoolQueueURL, awsapp.EnvPoolNetworkQueueURL} {
		if v, ok := env[k]; ok {
			t.Errorf("%s sets %s = %v; the claim does not use it", claimFunction, k, v)
		}
	}
	// The parameters: their bounds are awsapp's.
	m := tp.params["MaxConcurrentTasks"]
	if m["Type"] != "Number" || m["Default"] != float64(1) || m["MinValue"] != float64(1) || m["MaxValue"] != float64(awsapp.MaxConcurrentTasks) || str(m["Description"]) == "" {
		t.Errorf("parameter MaxConcurrentTasks %v; want a Number, default 1, 1 to %d, described", m, awsapp.MaxConcurrentTasks)
	}
	q := tp.params["TaskQueue"]
	if q["Type"] != "String" || q["Default"] != "default" || str(q["AllowedPattern"]) == "" || str(q["Description"]) == "" {
		t.Errorf("parameter TaskQueue %v; want a String, default \"default\", with an AllowedPattern, described", q)
	}
}

// Least privilege: the claim function uses the table, reads, writes and
// deletes objects under the bucket's prefix, lists that prefix, creates,
// updates and describes the stack's own state machines (a run it prepares
// itself), starts and describes their executions, passes the state
// machines' role to Step Functions alone, and nothing else: no secret, no
// ECS, no other role, no other queue.
func TestTemplate_ClaimFunctionGetsTableBucketAndOwnExecutionsOnly(t *testing.T) {
	tp := loadTemplate(t)
	for _, pol := range asList(tp.props(claimFunction)["Policies"]) {
		for kind := range asMap(pol) {
			if kind != "DynamoDBCrudPolicy" && kind != "Statement" {
				t.Errorf("%s has the policy %s; want DynamoDBCrudPolicy and statements only", claimFunction, kind)
			}
		}
	}
	machines := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-*"
	executions := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${AWS::StackName}-*:*"
	want := map[string]string{ // action -> its resource, as written
		"s3:GetObject": `{"Fn::Sub":"${DataBucket.Arn}/stratus/*"}`, "s3:PutObject": `{"Fn::Sub":"${DataBucket.Arn}/stratus/*"}`,
		"s3:DeleteObject": `{"Fn::Sub":"${DataBucket.Arn}/stratus/*"}`, "s3:ListBucket": `{"Fn::GetAtt":"DataBucket.Arn"}`,
		"states:StartExecution": jsonOf(map[string]any{"Fn::Sub": machines}), "states:DescribeExecution": jsonOf(map[string]any{"Fn::Sub": executions}),
		"states:CreateStateMachine": jsonOf(map[string]any{"Fn::Sub": machines}), "states:UpdateStateMachine": jsonOf(map[string]any{"Fn::Sub": machines}),
		"states:DescribeStateMachine": jsonOf(map[string]any{"Fn::Sub": machines}), "iam:PassRole": `{"Fn::GetAtt":"StateMachineRole.Arn"}`,
	}
	got := map[string]string{}
	for _, st := range statements(tp, claimFunction) {
		if str(st["Effect"]) != "Allow" {
			continue
		}
		for _, a := range actionsOf(st) {
			if strings.HasPrefix(a, "secretsmanager:") || strings.HasPrefix(a, "ecs:") {
				t.Errorf("%s is granted %s: it reads no secret and launches no worker", claimFunction, a)
			}
			if a == "iam:PassRole" {
				if c := jsonOf(st["Condition"]); c != `{"StringEquals":{"iam:PassedToService":"states.amazonaws.com"}}` {
					t.Errorf("%s passes the role under %s; want to states.amazonaws.com only", claimFunction, c)
				}
			}
			got[a] = jsonOf(st["Resource"])
			if a == "s3:ListBucket" {
				if c := jsonOf(st["Condition"]); c != `{"StringLike":{"s3:prefix":"stratus/*"}}` {
					t.Errorf("%s lists the bucket under %s; want the prefix stratus/* only", claimFunction, c)
				}
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s is granted\n%v\nwant\n%v", claimFunction, got, want)
	}
}

// The events function wakes the claim when a run's end is recorded: it
// is given the claim queue's URL and may send to that queue alone.
func TestTemplate_EventsFunctionWakesTheClaim(t *testing.T) {
	tp := loadTemplate(t)
	if v := tp.env(eventsFunction)[awsapp.EnvClaimQueueURL]; !refTo(v, "ClaimQueue") {
		t.Errorf("%s: %s = %v; want !Ref ClaimQueue", eventsFunction, awsapp.EnvClaimQueueURL, v)
	}
	var sends []string
	for _, st := range statements(tp, eventsFunction) {
		if slices.Contains(actionsOf(st), "sqs:SendMessage") {
			sends = append(sends, jsonOf(st["Resource"]))
		}
	}
	if !slices.Equal(sends, []string{`{"Fn::GetAtt":"ClaimQueue.Arn"}`}) {
		t.Errorf("%s may sqs:SendMessage to %v; want the ClaimQueue alone", eventsFunction, sends)
	}
	// No other function is told the claim queue: only the events function
	// (and the operator's `stratus submit`) wake it.
	for _, id := range tp.ofType("AWS::Serverless::Function") {
		if _, ok := tp.env(id)[awsapp.EnvClaimQueueURL]; ok && id != eventsFunction {
			t.Errorf("%s is given %s", id, awsapp.EnvClaimQueueURL)
		}
	}
}
