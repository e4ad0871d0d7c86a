package functions_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/stratusflow/stratus/internal/awsapp"
)

// Pool mode (README.md § Warm runners (pool mode)): per network profile an assignment queue and an ECS service of
// runners that long-poll it, all under the RunnerPool parameter's condition.
const poolCondition = "RunnerPoolOn"

// poolTakeActions are what a pooled runner does with its queue, and all
// its task role may do.
var poolTakeActions = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:ReceiveMessage"}

// rawDoc is template.yaml with intrinsic functions left as written, whole
// (Conditions and Mappings too).
func rawDoc(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// poolCommand returns the queue (logical id) and the network profile of a
// pool runner's task definition, whose one container's command is `pool
// --queue <queue URL> --profile <offline|online>` (`stratus runner pool`:
// the image's entrypoint is `stratus runner`); "" when it is not that.
func poolCommand(tp *tmpl, taskDef string) (queue, profile string) {
	defs := asList(tp.props(taskDef)["ContainerDefinitions"])
	if len(defs) != 1 {
		return "", ""
	}
	cmd := asList(asMap(defs[0])["Command"])
	if len(cmd) != 5 || cmd[0] != "pool" || cmd[1] != "--queue" || cmd[3] != "--profile" {
		return "", ""
	}
	if q := asMap(cmd[2]); len(q) != 1 || str(q["Ref"]) == "" {
		return "", ""
	}
	return str(asMap(cmd[2])["Ref"]), str(cmd[4])
}

// poolService is one pool: its service, runners' task definition, queue
// and network profile.
type poolService struct {
	service, taskDef, queue, profile string
}

// poolServices returns every ECS service of the stack, by profile; each
// must run a pool runner.
func poolServices(t *testing.T, tp *tmpl) map[string]poolService {
	t.Helper()
	out := map[string]poolService{}
	for _, svc := range tp.ofType("AWS::ECS::Service") {
		td := refTarget(tp.props(svc)["TaskDefinition"])
		q, profile := poolCommand(tp, td)
		if q == "" {
			t.Errorf("%s runs %s, which is no pool runner (`pool --queue URL --profile P`)", svc, td)
			continue
		}
		if other, dup := out[profile]; dup {
			t.Errorf("%s and %s both serve the %q profile", svc, other.service, profile)
		}
		out[profile] = poolService{service: svc, taskDef: td, queue: q, profile: profile}
	}
	if got := slices.Sorted(maps.Keys(out)); !slices.Equal(got, []string{"offline", "online"}) {
		t.Fatalf("pool services serve the profiles %v; want one pool each for offline (network_access false) and online", got)
	}
	return out
}

// getAtt reports whether v is {"Fn::GetAtt": [id, attr]} or
// {"Fn::GetAtt": "id.attr"}.
func getAtt(v any, id, attr string) bool {
	switch g := asMap(v)["Fn::GetAtt"].(type) {
	case []any:
		return len(g) == 2 && g[0] == id && g[1] == attr
	case string:
		return g == id+"."+attr
	}
	return false
}

func arnOf(v any, id string) bool { return getAtt(v, id, "Arn") }

// checkPoolTaskRole: role takes assignments from queue (poolTakeActions on
// its ARN) and may do nothing else — no managed policy, no statement on
// anything else, no policy resource attached to it — and only ECS tasks
// assume it.
func checkPoolTaskRole(t *testing.T, tp *tmpl, role, queue string) {
	t.Helper()
	if str(tp.raw[role]["Type"]) != "AWS::IAM::Role" {
		t.Errorf("the pool task role %s is not an AWS::IAM::Role of the stack", role)
		return
	}
	p := tp.props(role)
	for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
		if _, ok := p[k]; ok {
			t.Errorf("%s has %s: a pooled runner's role holds its queue's three actions and nothing else", role, k)
		}
	}
	for _, s := range asList(asMap(p["AssumeRolePolicyDocument"])["Statement"]) {
		if svc := asMap(asMap(s)["Principal"])["Service"]; svc != "ecs-tasks.amazonaws.com" {
			t.Errorf("%s is assumed by %v; want ecs-tasks.amazonaws.com alone", role, svc)
		}
	}
	var actions []string
	for _, pol := range asList(p["Policies"]) {
		for _, s := range asList(asMap(asMap(pol)["PolicyDocument"])["Statement"]) {
			st := asMap(s)
			if str(st["Effect"]) != "Allow" {
				continue
			}
			actions = append(actions, actionsOf(st)...)
			if !arnOf(st["Resource"], queue) {
				t.Errorf("%s may %v on %s; want its own queue %s's ARN alone", role, actionsOf(st), jsonOf(st["Resource"]), queue)
			}
		}
	}
	slices.Sort(actions)
	if !slices.Equal(actions, poolTakeActions) {
		t.Errorf("%s may %v; want exactly %v on %s", role, actions, poolTakeActions, queue)
	}
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"} {
		for _, id := range tp.ofType(typ) {
			if strings.Contains(jsonOf(tp.props(id)), `"`+role+`"`) {
				t.Errorf("%s (%s) grants %s more than its queue", id, typ, role)
			}
		}
	}
}

// subRef matches a ${Name} or ${Name.Attr} of an Fn::Sub string.
var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9]+)[.}]`)

// refsOutside returns the logical ids v refers to (Ref, Fn::GetAtt,
// Fn::Sub) other than inside the true branch of an Fn::If on cond.
func refsOutside(v any, cond string) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if b := asList(x["Fn::If"]); len(b) == 3 && b[0] == cond {
				walk(b[2])
				return
			}
			if id := refTarget(x); id != "" {
				out = append(out, id)
			}
			if s, ok := x["Fn::Sub"]; ok {
				sub := str(s)
				if l := asList(s); len(l) > 0 {
					sub = str(l[0])
				}
				for _, m := range subRef.FindAllStringSubmatch(sub, -1) {
					out = append(out, m[1])
				}
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// README.md § Warm runners (pool mode): pool mode is a parameter, off by
// default (the cold path stays the reference), with its sizes, scale-in
// window and pickup wait, each described with its unit and effect.
func TestTemplate_PoolIsAParameterOffByDefault(t *testing.T) {
	tp := loadTemplate(t)
	doc := rawDoc(t)
	for name, want := range map[string]map[string]any{
		"RunnerPool":                       {"Type": "String", "Default": "off", "AllowedValues": []any{"off", "on"}},
		"RunnerPoolMinTasks":               {"Type": "Number", "Default": 0.0, "MinValue": 0.0},
		"RunnerPoolMaxTasks":               {"Type": "Number", "Default": 4.0, "MinValue": 1.0},
		"RunnerPoolScaleInCooldownSeconds": {"Type": "Number", "Default": 300.0},
		"RunnerPoolPickupSeconds":          {"Type": "Number", "Default": 20.0, "MinValue": 5.0, "MaxValue": 90.0},
	} {
		p, ok := tp.params[name]
		if !ok {
			t.Errorf("no parameter %s", name)
			continue
		}
		for k, v := range want {
			if jsonOf(p[k]) != jsonOf(v) {
				t.Errorf("parameter %s: %s = %s; want %s", name, k, jsonOf(p[k]), jsonOf(v))
			}
		}
		if d := str(p["Description"]); len(d) < 60 {
			t.Errorf("parameter %s: description %q does not say its unit and effect", name, d)
		}
	}
	cond := jsonOf(asMap(doc["Conditions"])[poolCondition])
	if cond != `{"Fn::Equals":[{"Ref":"RunnerPool"},"on"]}` {
		t.Errorf("condition %s = %s; want RunnerPool equal to \"on\"", poolCondition, cond)
	}
}

// README.md § Warm runners (pool mode): everything of the pool exists only
// when it is on. Each ECS service, scalable target, scaling policy, queue
// other than the dispatch queue and its DLQ, and task role carries the
// condition; nothing without it refers to a pool resource except inside !If
// [RunnerPoolOn, ...]; so with the pool off the stack is the cold path's,
// unchanged.
func TestTemplate_PoolResourcesExistOnlyWhenOn(t *testing.T) {
	tp := loadTemplate(t)
	doc := rawDoc(t)
	pool := map[string]bool{}
	for id, r := range tp.raw {
		if str(r["Condition"]) == poolCondition {
			pool[id] = true
		}
	}
	must := map[string]bool{}
	for _, typ := range []string{"AWS::ECS::Service", "AWS::ApplicationAutoScaling::ScalableTarget", "AWS::ApplicationAutoScaling::ScalingPolicy", "AWS::SQS::Queue"} {
		for _, id := range tp.ofType(typ) {
			must[id] = true
		}
	}
	delete(must, "DispatchQueue")
	delete(must, "DispatchDLQ")
	delete(must, "ClaimQueue") // the task pool's, not the runner pool's
	delete(must, "ClaimDLQ")
	for _, td := range tp.ofType("AWS::ECS::TaskDefinition") {
		if r, ok := tp.props(td)["TaskRoleArn"]; ok {
			must[td], must[refTarget(r)] = true, true
		}
	}
	if len(must) < 2*7 { // per profile: queue, DLQ, role, task definition, service, target, 2 policies
		t.Errorf("pool resources %v; want per profile a queue, its DLQ, a task role and definition, a service, a scalable target and its policies", slices.Sorted(maps.Keys(must)))
	}
	for id := range must {
		if !pool[id] {
			t.Errorf("%s (%s) is not under the condition %s: it would exist with the pool off", id, tp.raw[id]["Type"], poolCondition)
		}
	}
	for id, r := range tp.raw {
		if pool[id] {
			continue
		}
		for _, ref := range refsOutside(r, poolCondition) {
			if pool[ref] {
				t.Errorf("%s (not under %s) refers to the pool's %s outside !If [%s, ...]", id, poolCondition, ref, poolCondition)
			}
		}
	}
	for _, ref := range refsOutside(doc["Globals"], poolCondition) {
		if pool[ref] {
			t.Errorf("Globals refers to the pool's %s outside !If [%s, ...]", ref, poolCondition)
		}
	}
	queueOutputs := 0
	for name, o := range tp.outputs {
		refs := refsOutside(o, poolCondition)
		conditional := str(asMap(o)["Condition"]) == poolCondition
		for _, ref := range refs {
			if pool[ref] && !conditional {
				t.Errorf("output %s refers to the pool's %s without the condition %s", name, ref, poolCondition)
			}
			if conditional && str(tp.raw[ref]["Type"]) == "AWS::SQS::Queue" {
				queueOutputs++
			}
		}
	}
	if queueOutputs != 2 {
		t.Errorf("%d outputs name a pool queue; want the two assignment queues' URLs (self-hosted runners poll them)", queueOutputs)
	}
}

// README.md § Warm runners (pool mode): a pooled runner is the cold runner
// with a command: the task definition of each pool service equals its
// profile's cold runner, RunnerTaskDefinition or (online)
// NetworkRunnerTaskDefinition (image, CPU, memory, architecture, execution
// role, engine keys, log group and everything else) but for its family, its
// task role, the `pool --queue URL --profile P` command, the log stream
// prefix and a StopTimeout of up to Fargate's 120 s (a runner told to stop
// lets its step end).
func TestTemplate_PoolRunnersAreTheColdRunner(t *testing.T) {
	tp := loadTemplate(t)
	strip := func(td string) (props, container map[string]any) {
		props = maps.Clone(tp.props(td))
		for _, k := range []string{"Family", "TaskRoleArn", "ContainerDefinitions"} {
			delete(props, k)
		}
		container = maps.Clone(asMap(asList(tp.props(td)["ContainerDefinitions"])[0]))
		for _, k := range []string{"Command", "StopTimeout"} {
			delete(container, k)
		}
		lc := maps.Clone(asMap(container["LogConfiguration"]))
		opts := maps.Clone(asMap(lc["Options"]))
		delete(opts, "awslogs-stream-prefix")
		lc["Options"] = opts
		container["LogConfiguration"] = lc
		return props, container
	}
	for profile, ps := range poolServices(t, tp) {
		cold := "RunnerTaskDefinition"
		if profile == "online" {
			cold = "NetworkRunnerTaskDefinition"
		}
		coldProps, coldContainer := strip(cold)
		coldStop, _ := asMap(asList(tp.props(cold)["ContainerDefinitions"])[0])["StopTimeout"].(float64)
		if n := len(asList(tp.props(ps.taskDef)["ContainerDefinitions"])); n != 1 {
			t.Errorf("%s has %d containers; want the runner alone", ps.taskDef, n)
			continue
		}
		props, container := strip(ps.taskDef)
		if a, b := jsonOf(props), jsonOf(coldProps); a != b {
			t.Errorf("%s (%s) diverges from %s:\n  pool %s\n  cold %s", ps.taskDef, profile, cold, a, b)
		}
		if a, b := jsonOf(container), jsonOf(coldContainer); a != b {
			t.Errorf("%s (%s) runner container diverges from %s's:\n  pool %s\n  cold %s", ps.taskDef, profile, cold, a, b)
		}
		c := asMap(asList(tp.props(ps.taskDef)["ContainerDefinitions"])[0])
		if stop, _ := c["StopTimeout"].(float64); stop < coldStop || stop > 120 {
			t.Errorf("%s StopTimeout %v; want from the cold runner's %v to Fargate's most, 120", ps.taskDef, c["StopTimeout"], coldStop)
		}
		if _, ok := tp.props(ps.taskDef)["TaskRoleArn"]; !ok {
			t.Errorf("%s has no task role: its runners could not receive assignments", ps.taskDef)
		}
	}
}

// docs/security.md § A pooled runner's AWS credentials: in a pool
// service's task the runner is the only process that holds the task
// role's credentials (its environment names the endpoint that hands them
// out), and it keeps them from its engines as a non-dumpable process
// without capabilities of the image's unprivileged user. So its container
// has no init process (InitProcessEnabled: an init would keep that
// environment in a process the engines could read), no capabilities added
// and no user of its own (the image's, uid 10001), and the task shares no
// PID namespace.
func TestTemplate_PoolRunnerIsTheOnlyProcessWithItsCredentials(t *testing.T) {
	tp := loadTemplate(t)
	for profile, ps := range poolServices(t, tp) {
		if pm, ok := tp.props(ps.taskDef)["PidMode"]; ok {
			t.Errorf("%s (%s) has PidMode %v; want none (the task's containers each in their own PID namespace)", ps.taskDef, profile, pm)
		}
		for _, c := range asList(tp.props(ps.taskDef)["ContainerDefinitions"]) {
			for _, k := range []string{"LinuxParameters", "User", "Privileged", "DockerSecurityOptions"} {
				if v, ok := asMap(c)[k]; ok {
					t.Errorf("%s (%s) container %v sets %s %v; want it unset: an init process, a capability or another user would let an engine read the runner's credentials", ps.taskDef, profile, asMap(c)["Name"], k, jsonOf(v))
				}
			}
		}
	}
}

// README.md § Warm runners (pool mode): a node's network profile is honoured
// by routing its step to that profile's pool, so each pool's runners run
// where RunTask starts the profile's cold tasks (the functions' STRATUS_ECS_*
// subnets, security groups and public IP), on Fargate in the runner cluster,
// from RunnerPoolMinTasks; a deployment starts new runners before stopping
// old ones, and no Availability Zone rebalancing stops a busy one.
func TestTemplate_PoolServicesRunWhereTheirProfilesColdTasksRun(t *testing.T) {
	tp := loadTemplate(t)
	env := tp.env("DispatchFunction")
	joined := func(v any) any { // a subnet list as the env var writes it
		if b := asList(asMap(v)["Fn::If"]); len(b) == 3 {
			return map[string]any{"Fn::If": []any{b[0], map[string]any{"Fn::Join": []any{",", b[1]}}, map[string]any{"Fn::Join": []any{",", b[2]}}}}
		}
		return map[string]any{"Fn::Join": []any{",", v}}
	}
	for profile, ps := range poolServices(t, tp) {
		subnetsVar, sgVar := awsapp.EnvSubnets, awsapp.EnvSecurityGroups
		if profile == "online" {
			subnetsVar, sgVar = awsapp.EnvNetworkSubnets, awsapp.EnvNetworkSecurityGroups
		}
		p := tp.props(ps.service)
		net := asMap(asMap(p["NetworkConfiguration"])["AwsvpcConfiguration"])
		if a, b := jsonOf(joined(net["Subnets"])), jsonOf(env[subnetsVar]); a != b {
			t.Errorf("%s (%s) runs in subnets %s; RunTask uses %s = %s", ps.service, profile, jsonOf(net["Subnets"]), subnetsVar, b)
		}
		if sg := asList(net["SecurityGroups"]); len(sg) != 1 || jsonOf(sg[0]) != jsonOf(env[sgVar]) {
			t.Errorf("%s (%s) has security groups %s; RunTask uses %s = %s", ps.service, profile, jsonOf(net["SecurityGroups"]), sgVar, jsonOf(env[sgVar]))
		}
		if jsonOf(net["AssignPublicIp"]) != jsonOf(env[awsapp.EnvAssignPublicIP]) {
			t.Errorf("%s AssignPublicIp %s; RunTask uses %s", ps.service, jsonOf(net["AssignPublicIp"]), jsonOf(env[awsapp.EnvAssignPublicIP]))
		}
		if !refTo(p["Cluster"], "RunnerCluster") || str(p["LaunchType"]) != "FARGATE" || !refTo(p["DesiredCount"], "RunnerPoolMinTasks") {
			t.Errorf("%s: Cluster %v, LaunchType %v, DesiredCount %v; want RunnerCluster, FARGATE, RunnerPoolMinTasks", ps.service, p["Cluster"], p["LaunchType"], p["DesiredCount"])
		}
		dc := asMap(p["DeploymentConfiguration"])
		if dc["MinimumHealthyPercent"] != 100.0 || dc["MaximumPercent"] != 200.0 {
			t.Errorf("%s DeploymentConfiguration %s; want 100/200 %% (new runners before old ones stop)", ps.service, jsonOf(dc))
		}
		if str(p["AvailabilityZoneRebalancing"]) != "DISABLED" {
			t.Errorf("%s AvailabilityZoneRebalancing %v; want DISABLED (rebalancing stops runners that may hold a step)", ps.service, p["AvailabilityZoneRebalancing"])
		}
	}
}

// README.md § Warm runners (pool mode): each assignment queue keeps a message
// in flight 60 s at a time (the runner extends it every ~20 s while its step
// runs), keeps an assignment an hour at most (one older than its pickup
// window was served cold), long-polls by default, is encrypted, and redrives
// to a DLQ of its own after five receives; the DLQ outlives what it receives,
// and an alarm watches it.
func TestTemplate_PoolQueuesRedriveToADeadLetterQueue(t *testing.T) {
	tp := loadTemplate(t)
	dlqs := map[string]string{}
	for profile, ps := range poolServices(t, tp) {
		q := tp.props(ps.queue)
		if str(tp.raw[ps.queue]["Type"]) != "AWS::SQS::Queue" {
			t.Errorf("%s's queue %s is not an AWS::SQS::Queue", ps.service, ps.queue)
			continue
		}
		for k, want := range map[string]any{"VisibilityTimeout": 60.0, "ReceiveMessageWaitTimeSeconds": 20.0, "SqsManagedSseEnabled": true} {
			if q[k] != want {
				t.Errorf("%s (%s) %s = %v; want %v", ps.queue, profile, k, q[k], want)
			}
		}
		retention, _ := q["MessageRetentionPeriod"].(float64)
		if retention == 0 || retention > 3600 {
			t.Errorf("%s MessageRetentionPeriod %v; want at most an hour", ps.queue, q["MessageRetentionPeriod"])
		}
		redrive := asMap(q["RedrivePolicy"])
		dlq := refTarget(redrive["deadLetterTargetArn"])
		if str(tp.raw[dlq]["Type"]) != "AWS::SQS::Queue" || redrive["maxReceiveCount"] != 5.0 {
			t.Errorf("%s RedrivePolicy %s; want a DLQ of the stack after 5 receives", ps.queue, jsonOf(redrive))
			continue
		}
		if other, dup := dlqs[dlq]; dup {
			t.Errorf("%s and %s share the DLQ %s", ps.queue, other, dlq)
		}
		dlqs[dlq] = ps.queue
		if r, _ := tp.props(dlq)["MessageRetentionPeriod"].(float64); r < retention {
			t.Errorf("%s keeps messages %v s, less than %s (%v s): a dead letter would expire on arrival", dlq, tp.props(dlq)["MessageRetentionPeriod"], ps.queue, retention)
		}
		watched := false
		for _, a := range tp.ofType("AWS::CloudWatch::Alarm") {
			p := tp.props(a)
			metrics := []any{p}
			for _, m := range asList(p["Metrics"]) {
				metrics = append(metrics, asMap(asMap(m)["MetricStat"])["Metric"])
			}
			toTopic := slices.ContainsFunc(asList(p["AlarmActions"]), func(v any) bool { return refTo(v, "AlarmTopic") })
			for _, m := range metrics {
				watched = watched || toTopic && queueMetric(asMap(m), dlq, "ApproximateNumberOfMessagesVisible")
			}
		}
		if !watched {
			t.Errorf("no alarm to AlarmTopic watches %s", dlq)
		}
	}
}

// README.md § Warm runners (pool mode): dispatch and the worker API (both
// launch workers) are told the pool's queues and pickup wait through awsapp's
// variables, set under the condition and empty (awsapp: pool off) otherwise,
// and may send to the two assignment queues only then and only those; the
// events function launches nothing and gets neither.
func TestTemplate_PoolAssignmentsAreSentOnlyWhenOn(t *testing.T) {
	tp := loadTemplate(t)
	pools := poolServices(t, tp)
	queues := []string{pools["offline"].queue, pools["online"].queue}
	onOrEmpty := func(v any) string {
		return jsonOf(map[string]any{"Fn::If": []any{poolCondition, v, ""}})
	}
	want := map[string]string{
		awsapp.EnvPoolQueueURL:        onOrEmpty(map[string]any{"Ref": pools["offline"].queue}),
		awsapp.EnvPoolNetworkQueueURL: onOrEmpty(map[string]any{"Ref": pools["online"].queue}),
		awsapp.EnvPoolPickupSeconds:   onOrEmpty(map[string]any{"Fn::Sub": "${RunnerPoolPickupSeconds}"}),
	}
	for _, fn := range serviceFunctions {
		env := tp.env(fn)
		for k, w := range want {
			if got := jsonOf(env[k]); got != w {
				t.Errorf("%s %s = %s; want %s", fn, k, got, w)
			}
		}
		var conditional []map[string]any
		for _, p := range asList(tp.props(fn)["Policies"]) {
			b := asList(asMap(p)["Fn::If"])
			if len(b) == 3 && b[0] == poolCondition {
				if !refTo(b[2], "AWS::NoValue") {
					t.Errorf("%s: its pool policy grants %s when the pool is off", fn, jsonOf(b[2]))
				}
				for _, s := range asList(asMap(b[1])["Statement"]) {
					conditional = append(conditional, asMap(s))
				}
				continue
			}
			for _, q := range queues {
				if slices.Contains(refsOutside(p, poolCondition), q) {
					t.Errorf("%s is granted something on %s whether the pool is on or not: %s", fn, q, jsonOf(p))
				}
			}
		}
		var sent []string
		for _, st := range conditional {
			if a := actionsOf(st); str(st["Effect"]) != "Allow" || !slices.Equal(a, []string{"sqs:SendMessage"}) {
				t.Errorf("%s's pool statement %s; want Allow sqs:SendMessage alone", fn, jsonOf(st))
			}
			rs := asList(st["Resource"])
			if rs == nil {
				rs = []any{st["Resource"]}
			}
			for _, r := range rs {
				if !slices.ContainsFunc(queues, func(q string) bool { return arnOf(r, q) }) {
					t.Errorf("%s sends to %s; want the pool queues' ARNs", fn, jsonOf(r))
				}
				sent = append(sent, refTarget(r))
			}
		}
		slices.Sort(sent)
		if w := slices.Sorted(slices.Values(queues)); !slices.Equal(sent, w) {
			t.Errorf("%s may send to %v when the pool is on; want exactly the assignment queues %v", fn, sent, w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := tp.env(eventsFunction)[k]; ok {
			t.Errorf("%s sets %s = %s; it launches no worker", eventsFunction, k, jsonOf(v))
		}
	}
	for _, st := range statements(tp, eventsFunction) {
		for _, q := range queues {
			if refTo(st["Resource"], q) || strings.Contains(jsonOf(st["Resource"]), `"`+q+`"`) {
				t.Errorf("%s is granted %v on %s", eventsFunction, actionsOf(st), q)
			}
		}
	}
}

// stepBounds is one step adjustment: [lower, upper) relative to the alarm
// threshold (nil = unbounded), and what it does.
type stepBounds struct {
	lower, upper *float64
	adjust       any
}

func steps(policy map[string]any) []stepBounds {
	var out []stepBounds
	for _, s := range asList(asMap(policy["StepScalingPolicyConfiguration"])["StepAdjustments"]) {
		m := asMap(s)
		var b stepBounds
		if v, ok := m["MetricIntervalLowerBound"].(float64); ok {
			b.lower = &v
		}
		if v, ok := m["MetricIntervalUpperBound"].(float64); ok {
			b.upper = &v
		}
		b.adjust = m["ScalingAdjustment"]
		out = append(out, b)
	}
	return out
}

// alarmInvoking returns the one alarm whose actions invoke policy.
func alarmInvoking(t *testing.T, tp *tmpl, policy string) map[string]any {
	t.Helper()
	var found []string
	for _, a := range tp.ofType("AWS::CloudWatch::Alarm") {
		for _, act := range asList(tp.props(a)["AlarmActions"]) {
			if refTo(act, policy) {
				found = append(found, a)
			}
		}
	}
	if len(found) != 1 {
		t.Errorf("alarms %v invoke %s; want one", found, policy)
		return nil
	}
	return tp.props(found[0])
}

// queueMetric reports whether a metric (a MetricStat's Metric, or an
// alarm's own Namespace/MetricName/Dimensions) is the AWS/SQS name of
// queue.
func queueMetric(m map[string]any, queue, name string) bool {
	d := asList(m["Dimensions"])
	return str(m["Namespace"]) == "AWS/SQS" && str(m["MetricName"]) == name && len(d) == 1 &&
		str(asMap(d[0])["Name"]) == "QueueName" && getAtt(asMap(d[0])["Value"], queue, "QueueName")
}

// README.md § Warm runners (pool mode), scaling: each pool's service is a scalable target from
// RunnerPoolMinTasks to RunnerPoolMaxTasks with two step scaling policies
// on its own queue's demand (a busy runner holds one message in flight, an
// idle one none): scale out when an assignment is visible (waiting) — from
// zero too, adding about one runner per waiting assignment and never more
// — and scale in to RunnerPoolMinTasks, and only there, once nothing was
// visible or in flight for every minute of
// RunnerPoolScaleInCooldownSeconds (so no busy runner is scaled in).
func TestTemplate_PoolScalesWithItsQueue(t *testing.T) {
	tp := loadTemplate(t)
	doc := rawDoc(t)
	window := asMap(asMap(doc["Mappings"])["ScaleInWindow"])
	wantWindow := `{"Fn::FindInMap":["ScaleInWindow",{"Ref":"RunnerPoolScaleInCooldownSeconds"},"Minutes"]}`
	for _, v := range asList(tp.params["RunnerPoolScaleInCooldownSeconds"]["AllowedValues"]) {
		secs, _ := v.(float64)
		key := strconv.Itoa(int(secs))
		if m, _ := strconv.Atoi(fmt.Sprint(asMap(window[key])["Minutes"])); secs <= 0 || int(secs)%60 != 0 || m*60 != int(secs) {
			t.Errorf("RunnerPoolScaleInCooldownSeconds may be %v; ScaleInWindow[%q] = %s (want whole minutes, %v/60)", v, key, jsonOf(window[key]), v)
		}
	}
	if len(window) != len(asList(tp.params["RunnerPoolScaleInCooldownSeconds"]["AllowedValues"])) {
		t.Errorf("ScaleInWindow has %d entries for %d allowed values", len(window), len(asList(tp.params["RunnerPoolScaleInCooldownSeconds"]["AllowedValues"])))
	}
	for profile, ps := range poolServices(t, tp) {
		var targets []string
		for _, id := range tp.ofType("AWS::ApplicationAutoScaling::ScalableTarget") {
			if strings.Contains(jsonOf(tp.props(id)["ResourceId"]), "${"+ps.service+".Name}") {
				targets = append(targets, id)
			}
		}
		if len(targets) != 1 {
			t.Errorf("%s (%s) has scalable targets %v; want one", ps.service, profile, targets)
			continue
		}
		target := targets[0]
		tgt := tp.props(target)
		if got := jsonOf(tgt["ResourceId"]); got != jsonOf(map[string]any{"Fn::Sub": "service/${RunnerCluster}/${" + ps.service + ".Name}"}) ||
			str(tgt["ServiceNamespace"]) != "ecs" || str(tgt["ScalableDimension"]) != "ecs:service:DesiredCount" {
			t.Errorf("%s: %s %v %v; want the desired count of service/${RunnerCluster}/${%s.Name}", target, got, tgt["ServiceNamespace"], tgt["ScalableDimension"], ps.service)
		}
		if !refTo(tgt["MinCapacity"], "RunnerPoolMinTasks") || !refTo(tgt["MaxCapacity"], "RunnerPoolMaxTasks") {
			t.Errorf("%s capacity %v..%v; want RunnerPoolMinTasks..RunnerPoolMaxTasks", target, tgt["MinCapacity"], tgt["MaxCapacity"])
		}
		var out, in []string
		for _, id := range tp.ofType("AWS::ApplicationAutoScaling::ScalingPolicy") {
			p := tp.props(id)
			if !refTo(p["ScalingTargetId"], target) {
				continue
			}
			if str(p["PolicyType"]) != "StepScaling" {
				t.Errorf("%s is a %v policy; want StepScaling (target tracking cannot scale from zero)", id, p["PolicyType"])
				continue
			}
			switch str(asMap(p["StepScalingPolicyConfiguration"])["AdjustmentType"]) {
			case "ChangeInCapacity":
				out = append(out, id)
			case "ExactCapacity":
				in = append(in, id)
			default:
				t.Errorf("%s adjusts by %v", id, asMap(p["StepScalingPolicyConfiguration"])["AdjustmentType"])
			}
		}
		if len(out) != 1 || len(in) != 1 {
			t.Errorf("%s has scale-out policies %v and scale-in policies %v; want one of each", target, out, in)
			continue
		}

		// Scale out: an assignment waits.
		if a := alarmInvoking(t, tp, out[0]); a != nil {
			if !queueMetric(a, ps.queue, "ApproximateNumberOfMessagesVisible") || str(a["Statistic"]) != "Maximum" || a["Period"] != 60.0 ||
				str(a["ComparisonOperator"]) != "GreaterThanThreshold" || a["Threshold"] != 0.0 || a["EvaluationPeriods"] != 1.0 {
				t.Errorf("%s's alarm: %s; want the Maximum of %s's ApproximateNumberOfMessagesVisible over a minute > 0", out[0], jsonOf(a), ps.queue)
			}
			prev := 0.0
			st := steps(tp.props(out[0]))
			for i, s := range st {
				add, _ := s.adjust.(float64)
				switch {
				case s.lower == nil || *s.lower != prev:
					t.Errorf("%s step %d starts at %s; want %v (steps cover every waiting count from 1)", out[0], i, jsonOf(s.lower), prev)
				case add < 1 || add > max(1, *s.lower):
					t.Errorf("%s step %d [%v,...) adds %v; want 1 to one per waiting assignment", out[0], i, *s.lower, add)
				}
				if s.upper != nil {
					prev = *s.upper
				} else if i != len(st)-1 {
					t.Errorf("%s step %d is open-ended but not last", out[0], i)
				}
			}
			if len(st) == 0 || st[len(st)-1].upper != nil {
				t.Errorf("%s has no open-ended last step: many waiting assignments would add nothing", out[0])
			}
		}

		// Scale in: nothing waited or ran for the whole window.
		if a := alarmInvoking(t, tp, in[0]); a != nil {
			st := steps(tp.props(in[0]))
			if len(st) != 1 || st[0].lower != nil || st[0].upper == nil || *st[0].upper != 0 || !refTo(st[0].adjust, "RunnerPoolMinTasks") {
				t.Errorf("%s steps %s; want one step (-inf, 0] to exactly RunnerPoolMinTasks", in[0], jsonOf(tp.props(in[0])["StepScalingPolicyConfiguration"]))
			}
			if str(a["ComparisonOperator"]) != "LessThanOrEqualToThreshold" || a["Threshold"] != 0.0 ||
				jsonOf(a["EvaluationPeriods"]) != wantWindow || jsonOf(a["DatapointsToAlarm"]) != wantWindow {
				t.Errorf("%s's alarm %s; want demand <= 0 in each of RunnerPoolScaleInCooldownSeconds' minutes (%s)", in[0], jsonOf(a), wantWindow)
			}
			stats := map[string]string{} // id -> metric name
			var expr string
			for _, m := range asList(a["Metrics"]) {
				mm := asMap(m)
				if e := str(mm["Expression"]); e != "" {
					if mm["ReturnData"] == true {
						expr = e
					}
					continue
				}
				ms := asMap(mm["MetricStat"])
				metric := asMap(ms["Metric"])
				for _, name := range []string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible"} {
					if queueMetric(metric, ps.queue, name) && str(ms["Stat"]) == "Maximum" && ms["Period"] == 60.0 {
						stats[str(mm["Id"])] = name
					}
				}
			}
			var summed []string
			for _, term := range strings.Split(expr, "+") {
				summed = append(summed, stats[strings.TrimSpace(term)])
			}
			slices.Sort(summed)
			if !slices.Equal(summed, []string{"ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesVisible"}) {
				t.Errorf("%s's alarm sums %q = %v; want %s's visible + in-flight messages (Maximum a minute)", in[0], expr, summed, ps.queue)
			}
		}
	}
}

// README.md § Warm runners (pool mode) documents the pool's parameters and `stratus runner pool`, and the
// IAM policy it gives a self-hosted runner is the pool task role's: the three
// actions on one queue.
func TestTemplate_ReadmeDocumentsThePool(t *testing.T) {
	tp := loadTemplate(t)
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Warm runners (pool mode)\n")
	if !ok {
		t.Fatal(`README.md has no "### Warm runners (pool mode)" section`)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	for name := range tp.params {
		if strings.HasPrefix(name, "RunnerPool") && !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the pool section does not document `%s`", name)
		}
	}
	if !strings.Contains(section, "stratus runner pool --queue URL") {
		t.Error("the pool section does not document `stratus runner pool --queue URL [--profile P]`")
	}
	_, block, ok := strings.Cut(section, "```json\n")
	if !ok {
		t.Fatal("the pool section gives no JSON policy for a self-hosted runner")
	}
	block, _, _ = strings.Cut(block, "```")
	var policy struct {
		Statement []struct {
			Effect   string
			Action   []string
			Resource string
		}
	}
	if err := json.Unmarshal([]byte(block), &policy); err != nil {
		t.Fatalf("the pool section's policy is not JSON: %v\n%s", err, block)
	}
	if len(policy.Statement) != 1 {
		t.Fatalf("the policy has %d statements; want one", len(policy.Statement))
	}
	st := policy.Statement[0]
	actions := slices.Sorted(slices.Values(st.Action))
	if st.Effect != "Allow" || !slices.Equal(actions, poolTakeActions) || !strings.HasPrefix(st.Resource, "arn:aws:sqs:") || strings.Contains(st.Resource, "*") {
		t.Errorf("the README's policy %+v; want Allow %v on one queue's ARN", st, poolTakeActions)
	}
}

// docs/runner-image.md § One image per network profile: the cold runner
// of nodes with network_access equals RunnerTaskDefinition but for its
// family, its log stream prefix and its image, NetworkImageUri when given,
// else ImageUri; dispatch is told it as STRATUS_ECS_NETWORK_TASK_DEFINITION.
func TestTemplate_NetworkRunnerIsTheRunnerWithItsOwnImage(t *testing.T) {
	tp := loadTemplate(t)
	strip := func(td string) string {
		props := maps.Clone(tp.props(td))
		delete(props, "Family")
		c := maps.Clone(asMap(asList(props["ContainerDefinitions"])[0]))
		delete(c, "Image")
		lc := maps.Clone(asMap(c["LogConfiguration"]))
		opts := maps.Clone(asMap(lc["Options"]))
		delete(opts, "awslogs-stream-prefix")
		lc["Options"], c["LogConfiguration"] = opts, lc
		props["ContainerDefinitions"] = []any{c}
		return jsonOf(props)
	}
	if a, b := strip("NetworkRunnerTaskDefinition"), strip("RunnerTaskDefinition"); a != b {
		t.Errorf("NetworkRunnerTaskDefinition diverges from RunnerTaskDefinition:\n  network %s\n  runner  %s", a, b)
	}
	for _, td := range []string{"NetworkRunnerTaskDefinition", "NetworkPoolTaskDefinition"} {
		img := asList(asMap(asMap(asList(tp.props(td)["ContainerDefinitions"])[0])["Image"])["Fn::If"])
		if len(img) != 3 || str(img[0]) != "NetworkImageGiven" || !refTo(img[1], "NetworkImageUri") || !refTo(img[2], "ImageUri") {
			t.Errorf("%s's image is %v; want !If [NetworkImageGiven, !Ref NetworkImageUri, !Ref ImageUri]", td, img)
		}
	}
	if v := tp.env("DispatchFunction")[awsapp.EnvNetworkTaskDefinition]; !refTo(v, "NetworkRunnerTaskDefinition") {
		t.Errorf("DispatchFunction's %s is %v; want !Ref NetworkRunnerTaskDefinition", awsapp.EnvNetworkTaskDefinition, v)
	}
}
