package ecs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
)

var offline = ecs.NetworkProfile{Subnets: []string{"subnet-private-a", "subnet-private-b"}, SecurityGroups: []string{"sg-worker-api-only"}}
var online = ecs.NetworkProfile{Subnets: []string{"subnet-egress-a"}, SecurityGroups: []string{"sg-internet"}, AssignPublicIP: true}

// recorder keeps the body of every RunTask request sent through an
// awstest.ECSClient (record is its RunTask hook).
type recorder struct {
	mu      sync.Mutex
	runTask []map[string]any
}

func (r *recorder) record(body []byte) {
	var m map[string]any
	json.Unmarshal(body, &m)
	r.mu.Lock()
	r.runTask = append(r.runTask, m)
	r.mu.Unlock()
}

func (r *recorder) requests() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runTask)
}

var seq atomic.Int64

func uniqueName(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(t.Name(), "-"), time.Now().UnixNano()%1e9, seq.Add(1))
}

// motoECS is a cluster and a registered runner task definition on moto,
// with a client whose RunTask requests are recorded (and whose task
// answers are mended: awstest.ECSClient). The task definition is networkMode
// bridge: moto 5.2.1's RunTask fails with a 500 on an awsvpc task
// definition (its ENI has no private_dns_name), so moto does not look at
// the network configuration, and the test reads it from the recorded
// request instead.
func motoECS(t *testing.T) (*awsecs.Client, *recorder, string, string) {
	t.Helper()
	cfg := awstest.Moto(t).Config()
	rec := &recorder{}
	cfg.HTTPClient = &awstest.ECSClient{RunTask: rec.record}
	c := awsecs.NewFromConfig(cfg)
	ctx := context.Background()
	cluster, family := uniqueName(t), uniqueName(t)
	if _, err := c.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(cluster)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.RegisterTaskDefinition(ctx, &awsecs.RegisterTaskDefinitionInput{
		Family: aws.String(family), NetworkMode: types.NetworkModeBridge,
		ContainerDefinitions: []types.ContainerDefinition{{Name: aws.String("runner"), Image: aws.String("stratus-runner"), Memory: aws.Int32(512)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec, cluster, family
}

func envOf(t *testing.T, c *awsecs.Client, cluster, arn string) (types.Task, map[string]string) {
	t.Helper()
	out, err := c.DescribeTasks(context.Background(), &awsecs.DescribeTasksInput{Cluster: aws.String(cluster), Tasks: []string{arn}})
	if err != nil || len(out.Tasks) != 1 {
		t.Fatalf("DescribeTasks %s: %v %v", arn, out, err)
	}
	task := out.Tasks[0]
	env := map[string]string{}
	for _, co := range task.Overrides.ContainerOverrides {
		if aws.ToString(co.Name) != "runner" {
			t.Errorf("override for container %q, want runner", aws.ToString(co.Name))
		}
		for _, kv := range co.Environment {
			env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
		}
	}
	return task, env
}

// docs/architecture.md § The path of one step, 4, on moto's
// ECS: RunTask with the cluster, the runner's task definition, FARGATE,
// the worker's environment (API URL, handle, task id — no task token, no
// credential) as container overrides, and the awsvpc network of the
// node's network_access: offline nodes in the private subnets behind the
// worker-API-only security group, online nodes in the egress ones. Stop
// stops the task.
func TestLaunch_RunTaskOnMoto(t *testing.T) {
	c, rec, cluster, family := motoECS(t)
	l, err := ecs.New(c, ecs.Config{Cluster: cluster, TaskDefinition: family, Offline: offline, Online: online})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	specs := []launch.Spec{
		{APIURL: "https://api.example.com", Handle: "wh-offline", TaskID: "r1.build.1", Attempt: 1},
		{APIURL: "https://api.example.com", Handle: "wh-online", TaskID: "r1.research.1", Attempt: 1, NetworkAccess: true},
	}
	var arns []string
	for _, s := range specs {
		arn, err := l.Launch(ctx, s)
		if err != nil {
			t.Fatalf("Launch %s: %v", s.TaskID, err)
		}
		arns = append(arns, arn)
		task, env := envOf(t, c, cluster, arn)
		want := map[string]string{launch.EnvAPIURL: s.APIURL, launch.EnvHandle: s.Handle, launch.EnvTaskID: s.TaskID, launch.EnvAttempt: fmt.Sprint(s.Attempt)}
		if fmt.Sprint(env) != fmt.Sprint(want) {
			t.Errorf("%s: environment %v, want exactly %v", s.TaskID, env, want)
		}
		// moto moves lastStatus on at every read (its managed states): the
		// desired status is what RunTask set.
		if task.LaunchType != types.LaunchTypeFargate || aws.ToString(task.StartedBy) != ecs.StartedBy(s.TaskID) || aws.ToString(task.DesiredStatus) != "RUNNING" {
			t.Errorf("%s: task desired %s, launch type %s, started by %q", s.TaskID, aws.ToString(task.DesiredStatus), task.LaunchType, aws.ToString(task.StartedBy))
		}
	}
	reqs := rec.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d RunTask requests, want 2", len(reqs))
	}
	for i, want := range []ecs.NetworkProfile{offline, online} {
		r := reqs[i]
		vpc, _ := r["networkConfiguration"].(map[string]any)["awsvpcConfiguration"].(map[string]any)
		public := "DISABLED"
		if want.AssignPublicIP {
			public = "ENABLED"
		}
		if fmt.Sprint(vpc["subnets"]) != fmt.Sprint(want.Subnets) || fmt.Sprint(vpc["securityGroups"]) != fmt.Sprint(want.SecurityGroups) || vpc["assignPublicIp"] != public {
			t.Errorf("request %d (network_access %v): awsvpc %v, want %+v", i, specs[i].NetworkAccess, vpc, want)
		}
		if r["cluster"] != cluster || r["taskDefinition"] != family || r["launchType"] != "FARGATE" || r["count"] != 1.0 || len(r["clientToken"].(string)) != 64 {
			t.Errorf("request %d: %v", i, r)
		}
		if b, _ := json.Marshal(r); strings.Contains(string(b), "task_token") || strings.Contains(string(b), "AWS_") {
			t.Errorf("request %d carries more than the worker's environment: %s", i, b)
		}
	}

	if err := l.Stop(ctx, arns[0]); err != nil {
		t.Fatal(err)
	}
	if task, _ := envOf(t, c, cluster, arns[0]); aws.ToString(task.DesiredStatus) != "STOPPED" || !strings.Contains(aws.ToString(task.StoppedReason), "stratus") {
		t.Errorf("stopped task: desired %s, reason %q", aws.ToString(task.DesiredStatus), aws.ToString(task.StoppedReason))
	}
	if task, _ := envOf(t, c, cluster, arns[1]); aws.ToString(task.DesiredStatus) != "RUNNING" {
		t.Errorf("the other task: desired %s, want RUNNING", aws.ToString(task.DesiredStatus))
	}
}

// A stop message is handled by whichever dispatch invocation receives
// it, not the one that launched the worker: StopTask finds the worker's
// task by the dispatch task id (its startedBy) and stops it, leaving the
// other workers running; a task id with no running worker is not an error.
func TestStopTask_FindsTheWorkerByItsTaskID(t *testing.T) {
	c, _, cluster, family := motoECS(t)
	cfg := ecs.Config{Cluster: cluster, TaskDefinition: family, Offline: offline, Online: online}
	launcher, err := ecs.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	build, err := launcher.Launch(ctx, launch.Spec{APIURL: "https://api", Handle: "wh-a", TaskID: "r-1.build.1"})
	if err != nil {
		t.Fatal(err)
	}
	review, err := launcher.Launch(ctx, launch.Spec{APIURL: "https://api", Handle: "wh-b", TaskID: "r-1.review.1"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ecs.New(c, cfg) // another invocation: it never launched anything
	if err := other.StopTask(ctx, "r-1.build.1"); err != nil {
		t.Fatal(err)
	}
	if task, _ := envOf(t, c, cluster, build); aws.ToString(task.DesiredStatus) != "STOPPED" {
		t.Errorf("build's task: desired %s, want STOPPED", aws.ToString(task.DesiredStatus))
	}
	if task, _ := envOf(t, c, cluster, review); aws.ToString(task.DesiredStatus) != "RUNNING" {
		t.Errorf("review's task: desired %s, want RUNNING", aws.ToString(task.DesiredStatus))
	}
	if err := other.StopTask(ctx, "r-1.never.1"); err != nil {
		t.Errorf("StopTask with no worker: %v", err)
	}
}

// ECS allows 8192 characters of overrides JSON: the launcher refuses a
// larger one before calling (ETOOLARGE, naming the size), and accepts one
// of exactly 8192. A refused launch makes no RunTask request.
func TestLaunch_OverridesOver8192AreRefusedBeforeRunTask(t *testing.T) {
	c, rec, cluster, family := motoECS(t)
	l, err := ecs.New(c, ecs.Config{Cluster: cluster, TaskDefinition: family, Offline: offline, Online: online})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(n int) launch.Spec {
		return launch.Spec{APIURL: "https://api.example.com/" + strings.Repeat("p", n), Handle: "wh-h", TaskID: "r1.build.1"}
	}
	// The longest URL accepted, found through the request builder.
	lo, hi := 0, 2*ecs.MaxOverrideChars
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, err := l.Request(spec(mid), 1); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	in, err := l.Request(spec(lo), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(apiJSON(t, in.Overrides)); got != ecs.MaxOverrideChars {
		t.Errorf("the largest accepted overrides are %d characters, want exactly %d", got, ecs.MaxOverrideChars)
	}
	if _, err := l.Launch(context.Background(), spec(lo)); err != nil {
		t.Errorf("overrides of exactly %d characters: %v", ecs.MaxOverrideChars, err)
	}
	// As sent on the wire, too.
	reqs := rec.requests()
	if wire, _ := json.Marshal(reqs[len(reqs)-1]["overrides"]); len(wire) != ecs.MaxOverrideChars {
		t.Errorf("the RunTask request's overrides are %d characters, want %d", len(wire), ecs.MaxOverrideChars)
	}
	before := len(reqs)
	_, err = l.Launch(context.Background(), spec(lo+1))
	if stratus.ErrorCode(err) != stratus.ETOOLARGE || !strings.Contains(err.Error(), "8193") || !strings.Contains(err.Error(), "8192") {
		t.Errorf("overrides of 8193 characters: %v, want ETOOLARGE naming 8193 and 8192", err)
	}
	if len(rec.requests()) != before {
		t.Error("a refused launch still called RunTask")
	}
}

// apiJSON is the overrides as the RunTask request's JSON spells them.
func apiJSON(t *testing.T, o *types.TaskOverride) string {
	t.Helper()
	type kv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	var cos []map[string]any
	for _, c := range o.ContainerOverrides {
		var env []kv
		for _, e := range c.Environment {
			env = append(env, kv{aws.ToString(e.Name), aws.ToString(e.Value)})
		}
		cos = append(cos, map[string]any{"name": aws.ToString(c.Name), "environment": env})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"containerOverrides": cos})
	return strings.TrimSuffix(b.String(), "\n")
}

// fakeECS answers RunTask from a script, one answer per call (the last
// repeats), and records the calls.
type fakeECS struct {
	mu      sync.Mutex
	answers []answer
	calls   []*awsecs.RunTaskInput
	stopErr error
	stopped []string
}

type answer struct {
	err      error
	failures []string // failures[] reasons
}

func (f *fakeECS) RunTask(_ context.Context, in *awsecs.RunTaskInput, _ ...func(*awsecs.Options)) (*awsecs.RunTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, in)
	a := f.answers[min(len(f.calls), len(f.answers))-1]
	if a.err != nil {
		return nil, a.err
	}
	out := &awsecs.RunTaskOutput{}
	for _, r := range a.failures {
		out.Failures = append(out.Failures, types.Failure{Reason: aws.String(r)})
	}
	if len(a.failures) == 0 {
		out.Tasks = []types.Task{{TaskArn: aws.String(fmt.Sprintf("arn:aws:ecs:us-east-1:1:task/c/%d", len(f.calls)))}}
	}
	return out, nil
}

func (f *fakeECS) ListTasks(context.Context, *awsecs.ListTasksInput, ...func(*awsecs.Options)) (*awsecs.ListTasksOutput, error) {
	return &awsecs.ListTasksOutput{}, nil
}

func (f *fakeECS) StopTask(_ context.Context, in *awsecs.StopTaskInput, _ ...func(*awsecs.Options)) (*awsecs.StopTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, aws.ToString(in.Task))
	return &awsecs.StopTaskOutput{}, f.stopErr
}

func apiErr(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }

// RunTask answers that mean "not now" — throttling (after the SDK's own
// retries), a ServerException, failures[] of capacity (RESOURCE:CPU,
// Fargate's "Capacity is unavailable") — are retried with jittered
// exponential backoff; when the attempts run out the error is an
// infrastructure failure (launch.ErrInfrastructure), which dispatch reports
// so the machine parks the run and charges no budget. Anything else fails at
// once, as an ordinary launch error.
func TestLaunch_RetriesThrottlingAndCapacityThenLabelsThem(t *testing.T) {
	const attempts = 4
	base, maxDelay := 10*time.Millisecond, 25*time.Millisecond
	throttled := answer{err: apiErr("ThrottlingException", "Rate exceeded")}
	cpu := answer{failures: []string{"RESOURCE:CPU"}}
	fargate := answer{failures: []string{"Capacity is unavailable at this time. Please try again later or in a different availability zone"}}
	ok := answer{}
	cases := []struct {
		name    string
		answers []answer
		calls   int
		infra   bool   // the error is launch.ErrInfrastructure
		started bool   // a task was started
		reason  string // the error names it
	}{
		{"throttled then started", []answer{throttled, throttled, ok}, 3, false, true, ""},
		{"capacity then started", []answer{cpu, fargate, ok}, 3, false, true, ""},
		{"server error then started", []answer{{err: apiErr("ServerException", "oops")}, ok}, 2, false, true, ""},
		// EC2's throttling behind awsvpc, as ECS passes it on.
		{"EC2 request limit then started", []answer{{err: apiErr("InvalidParameterException", "Error retrieving subnet information for [subnet-1]: Request limit exceeded. (Service: AmazonEC2; Status Code: 503; Error Code: RequestLimitExceeded)")}, ok}, 2, false, true, ""},
		{"always the EC2 request limit", []answer{{err: apiErr("InvalidParameterException", "Request limit exceeded (RequestLimitExceeded)")}}, attempts, true, false, "RequestLimitExceeded"},
		{"service unavailable then started", []answer{{err: apiErr("ServiceUnavailableException", "try later")}, ok}, 2, false, true, ""},
		{"always throttled", []answer{throttled}, attempts, true, false, "ThrottlingException"},
		{"never capacity", []answer{cpu}, attempts, true, false, "RESOURCE:CPU"},
		{"fargate capacity", []answer{fargate}, attempts, true, false, "Capacity is unavailable"},
		{"cluster missing", []answer{{err: apiErr("ClusterNotFoundException", "Cluster not found.")}}, 1, false, false, "ClusterNotFoundException"},
		{"bad subnet", []answer{{err: apiErr("InvalidParameterException", "subnet-x does not exist")}}, 1, false, false, "subnet-x"},
		{"missing attribute", []answer{{failures: []string{"MISSING"}}}, 1, false, false, "MISSING"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeECS{answers: c.answers}
			var delays []time.Duration
			l, err := ecs.New(f, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: online,
				Retry: ecs.RetryPolicy{Attempts: attempts, BaseDelay: base, MaxDelay: maxDelay, Sleep: func(_ context.Context, d time.Duration) error {
					delays = append(delays, d)
					return nil
				}}})
			if err != nil {
				t.Fatal(err)
			}
			waits := 0
			arn, err := l.Launch(context.Background(), launch.Spec{APIURL: "https://api", Handle: "wh-1", TaskID: "r1.build.1", Waiting: func() error { waits++; return nil }})
			if waits != len(delays) {
				t.Errorf("Waiting called %d times for %d waits: the task token is not heartbeaten while RunTask retries", waits, len(delays))
			}
			if len(f.calls) != c.calls {
				t.Errorf("%d RunTask calls, want %d", len(f.calls), c.calls)
			}
			if (arn != "") != c.started || (err == nil) != c.started {
				t.Errorf("Launch = %q, %v; want started %v", arn, err, c.started)
			}
			if got := errors.Is(err, launch.ErrInfrastructure); got != c.infra {
				t.Errorf("%v: infrastructure %v, want %v", err, got, c.infra)
			}
			if c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)) {
				t.Errorf("%v does not name %q", err, c.reason)
			}
			// One delay per retry, each within its full-jitter ceiling.
			if len(delays) != c.calls-1 {
				t.Errorf("%d waits for %d calls", len(delays), c.calls)
			}
			for i, d := range delays {
				if ceiling := min(maxDelay, base<<i); d < 0 || d > ceiling {
					t.Errorf("wait %d: %v, want within [0, %v]", i+1, d, ceiling)
				}
			}
			// Each try its own idempotency token; the SDK's retries of one try share it.
			tokens := map[string]bool{}
			for _, in := range f.calls {
				tokens[aws.ToString(in.ClientToken)] = true
			}
			if len(tokens) != len(f.calls) {
				t.Errorf("%d distinct client tokens for %d calls", len(tokens), len(f.calls))
			}
		})
	}
}

// The wait between tries is jittered: over many draws the delays are not
// all the same (full jitter, not a fixed schedule).
func TestLaunch_BackoffIsJittered(t *testing.T) {
	f := &fakeECS{answers: []answer{{failures: []string{"RESOURCE:MEMORY"}}}}
	var delays []time.Duration
	l, _ := ecs.New(f, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: online,
		Retry: ecs.RetryPolicy{Attempts: 40, BaseDelay: time.Second, MaxDelay: time.Second, Sleep: func(_ context.Context, d time.Duration) error {
			delays = append(delays, d)
			return nil
		}}})
	l.Launch(context.Background(), launch.Spec{APIURL: "https://api", Handle: "wh-1"})
	distinct := map[time.Duration]bool{}
	for _, d := range delays {
		distinct[d] = true
	}
	if len(delays) != 39 || len(distinct) < 2 {
		t.Errorf("%d waits, %d distinct: want 39 jittered waits", len(delays), len(distinct))
	}
}

// A cancelled launch is not an infrastructure failure: the caller went away.
func TestLaunch_CancelledWhileWaitingIsNotInfrastructure(t *testing.T) {
	f := &fakeECS{answers: []answer{{failures: []string{"RESOURCE:CPU"}}}}
	ctx, cancel := context.WithCancel(context.Background())
	l, _ := ecs.New(f, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: online,
		Retry: ecs.RetryPolicy{Attempts: 5, Sleep: func(ctx context.Context, _ time.Duration) error {
			cancel()
			return ctx.Err()
		}}})
	_, err := l.Launch(ctx, launch.Spec{APIURL: "https://api", Handle: "wh-1"})
	if err == nil || errors.Is(err, launch.ErrInfrastructure) || !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled and not an infrastructure failure", err)
	}
}

// Stop calls ecs:StopTask on the launcher's cluster; a task ECS no longer
// knows is not an error (launch.Launcher: a finished worker is not an
// error); other errors are returned.
func TestStop_CallsStopTask(t *testing.T) {
	f := &fakeECS{}
	l, _ := ecs.New(f, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: online})
	if err := l.Stop(context.Background(), "arn:task/1"); err != nil || !slices.Equal(f.stopped, []string{"arn:task/1"}) {
		t.Errorf("Stop: %v, stopped %v", err, f.stopped)
	}
	f.stopErr = apiErr("InvalidParameterException", "The referenced task was not found.")
	if err := l.Stop(context.Background(), "arn:task/2"); err != nil {
		t.Errorf("Stop of a task ECS no longer knows: %v", err)
	}
	f.stopErr = apiErr("AccessDeniedException", "no")
	if err := l.Stop(context.Background(), "arn:task/3"); err == nil {
		t.Error("Stop hid an access error")
	}
}

// New refuses an incomplete configuration, naming the field.
func TestNew_RefusesIncompleteConfig(t *testing.T) {
	good := ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: online}
	cases := map[string]func(c *ecs.Config){
		"Cluster":                func(c *ecs.Config) { c.Cluster = "" },
		"TaskDefinition":         func(c *ecs.Config) { c.TaskDefinition = "" },
		"Offline.Subnets":        func(c *ecs.Config) { c.Offline.Subnets = nil },
		"Online.SecurityGroups":  func(c *ecs.Config) { c.Online.SecurityGroups = nil },
		"Offline.SecurityGroups": func(c *ecs.Config) { c.Offline.SecurityGroups = nil },
	}
	for field, mutate := range cases {
		c := good
		mutate(&c)
		if _, err := ecs.New(&fakeECS{}, c); stratus.ErrorCode(err) != stratus.EINVALID || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("without %s: %v", field, err)
		}
	}
	if _, err := ecs.New(&fakeECS{}, good); err != nil {
		t.Error(err)
	}
}

// template.yaml NetworkRunnerTaskDefinition: a node with network_access
// runs the online profile's task definition (its own image) when the
// profile names one; otherwise, and for every other node, the runner's.
func TestRequest_TheOnlineProfileRunsItsOwnTaskDefinition(t *testing.T) {
	t.Parallel()
	on := online
	on.TaskDefinition = "runner-network"
	for _, tc := range []struct {
		online  ecs.NetworkProfile
		network bool
		want    string
	}{{on, true, "runner-network"}, {on, false, "runner"}, {online, true, "runner"}} {
		l, err := ecs.New(&fakeECS{}, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: tc.online})
		if err != nil {
			t.Fatal(err)
		}
		in, err := l.Request(launch.Spec{APIURL: "https://api", Handle: "wh-1", TaskID: "r1.build.1", NetworkAccess: tc.network}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(in.TaskDefinition); got != tc.want {
			t.Errorf("online %q, network_access %v: task definition %q, want %q", tc.online.TaskDefinition, tc.network, got, tc.want)
		}
	}
}

// docs/architecture.md § Publishing: a publisher runs the publisher task
// definition (the one container that gets the git token secret) on the
// online profile, whatever its node's network_access, with the same
// overrides as any worker (no token among them); every other worker runs
// its profile's runner; a publisher with no publisher task definition
// configured is refused, never run on a runner without the token.
func TestRequest_APublisherRunsThePublisherTaskDefinitionOnline(t *testing.T) {
	t.Parallel()
	on := online
	on.TaskDefinition = "runner-network"
	l, err := ecs.New(&fakeECS{}, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: on, PublisherTaskDefinition: "publisher:4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		publisher, network bool
		wantTD             string
		wantNet            ecs.NetworkProfile
	}{
		{true, false, "publisher:4", on},
		{true, true, "publisher:4", on},
		{false, false, "runner", offline},
		{false, true, "runner-network", on},
	} {
		in, err := l.Request(launch.Spec{APIURL: "https://api", Handle: "wh-1", TaskID: "r1.publish.1", Attempt: 1, NetworkAccess: tc.network, Publisher: tc.publisher}, 1)
		if err != nil {
			t.Fatal(err)
		}
		vpc := in.NetworkConfiguration.AwsvpcConfiguration
		wantPublic := types.AssignPublicIpDisabled
		if tc.wantNet.AssignPublicIP {
			wantPublic = types.AssignPublicIpEnabled
		}
		if got := aws.ToString(in.TaskDefinition); got != tc.wantTD || !slices.Equal(vpc.Subnets, tc.wantNet.Subnets) ||
			!slices.Equal(vpc.SecurityGroups, tc.wantNet.SecurityGroups) || vpc.AssignPublicIp != wantPublic {
			t.Errorf("publisher %v, network_access %v: task definition %q on %v %v %v; want %q on %v", tc.publisher, tc.network,
				got, vpc.Subnets, vpc.SecurityGroups, vpc.AssignPublicIp, tc.wantTD, tc.wantNet)
		}
		for _, kv := range in.Overrides.ContainerOverrides[0].Environment {
			if aws.ToString(kv.Name) == launch.GitTokenEnv {
				t.Errorf("publisher %v: the overrides carry %s", tc.publisher, launch.GitTokenEnv)
			}
		}
	}
	none, err := ecs.New(&fakeECS{}, ecs.Config{Cluster: "c", TaskDefinition: "runner", Offline: offline, Online: on})
	if err != nil {
		t.Fatal(err)
	}
	_, err = none.Request(launch.Spec{APIURL: "https://api", Handle: "wh-1", TaskID: "r1.publish.1", Publisher: true}, 1)
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.HasPrefix(err.Error(), "PublisherTaskDefinition:") {
		t.Errorf("a publisher without a publisher task definition: %v; want EINVALID naming PublisherTaskDefinition", err)
	}
}
