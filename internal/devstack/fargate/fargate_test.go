package fargate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/container/containertest"
	"github.com/stratusflow/stratus/internal/devstack/fargate"
)

// stopped is one "ECS Task State Change" event's detail.
type stopped struct {
	TaskArn       string `json:"taskArn"`
	LastStatus    string `json:"lastStatus"`
	StopCode      string `json:"stopCode"`
	StoppedReason string `json:"stoppedReason"`
	StartedBy     string `json:"startedBy"`
	Containers    []struct {
		Name     string `json:"name"`
		ExitCode *int   `json:"exitCode"`
		Reason   string `json:"reason"`
	} `json:"containers"`
	Overrides struct {
		ContainerOverrides []struct {
			Name        string `json:"name"`
			Environment []struct{ Name, Value string }
		} `json:"containerOverrides"`
	} `json:"overrides"`
}

type events struct {
	mu sync.Mutex
	by map[string]stopped
}

func (e *events) add(_ context.Context, ev json.RawMessage) {
	var m struct {
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
		Detail     json.RawMessage `json:"detail"`
	}
	json.Unmarshal(ev, &m)
	if m.DetailType != fargate.DetailTaskStateChange || m.Source != "aws.ecs" {
		panic("not a task state change: " + string(ev))
	}
	var d stopped
	json.Unmarshal(m.Detail, &d)
	e.mu.Lock()
	e.by[d.TaskArn] = d
	e.mu.Unlock()
}

func (e *events) wait(t *testing.T, arn string) stopped {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		e.mu.Lock()
		d, ok := e.by[arn]
		e.mu.Unlock()
		if ok {
			return d
		}
	}
	t.Fatalf("no state change for task %s", arn)
	return stopped{}
}

// TestAgent_RunsEachTaskWithItsEnvironmentAndReportsItsStop runs tasks on
// moto's ECS and checks the agent plays Fargate: the container gets the
// task definition's environment, its secret resolved from Secrets
// Manager and the RunTask overrides, and nothing else of this process's;
// a container that exits stops its task with ECS's reason and its exit
// code and last lines (not the runner's log records); StopTask stops a running one; a secret that does
// not resolve stops the task before it starts.
func TestAgent_RunsEachTaskWithItsEnvironmentAndReportsItsStop(t *testing.T) {
	t.Setenv("STRATUS_FARGATE_TEST_LEAK", "operator-only")
	sh := func(script string) []string { return []string{"-c", script} }
	testAgent(t, &fargate.ProcessBackend{Self: "/bin/sh", Root: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}, "stratus-runner:test", sh)
}

// The same with each task a container of the runner image (make image):
// its entrypoint runs a program given as the command (sh), and sh as the
// container's first process gets the stop signal.
func TestAgent_RunsEachTaskAsAContainer(t *testing.T) {
	t.Setenv("STRATUS_FARGATE_TEST_LEAK", "operator-only")
	e := containertest.WithImage(t, containertest.RunnerImage)
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	testAgent(t, &fargate.ContainerBackend{Engine: e, Labels: map[string]string{"stratus.test": t.Name()}}, containertest.RunnerImage, sh)
}

// testAgent runs the tasks of TestAgent_RunsEachTaskWithItsEnvironmentAndReportsItsStop
// on backend, their task definition naming image, each task's command
// cmd(script).
func testAgent(t *testing.T, backend fargate.Backend, image string, cmd func(script string) []string) {
	cfg := awstest.Moto(t).Config()
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &awstest.ECSClient{}
	ecs := awsecs.NewFromConfig(ecsCfg)
	sm := awssm.NewFromConfig(cfg)
	ctx := context.Background()
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()) + time.Now().Format("150405.000000")
	name = strings.ReplaceAll(name, ".", "")
	cl, err := ecs.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sm.CreateSecret(ctx, &awssm.CreateSecretInput{Name: aws.String(name + "-key"), SecretString: aws.String(`{"key":"s3cret"}`)})
	if err != nil {
		t.Fatal(err)
	}
	def := func(family, valueFrom string) {
		t.Helper()
		_, err := ecs.RegisterTaskDefinition(ctx, &awsecs.RegisterTaskDefinitionInput{
			Family: aws.String(family), NetworkMode: ecstypes.NetworkModeBridge, Cpu: aws.String("512"), Memory: aws.String("1024"),
			ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("runner"), Image: aws.String(image), Memory: aws.Int32(1024),
				Essential: aws.Bool(true), StopTimeout: aws.Int32(2),
				Environment: []ecstypes.KeyValuePair{{Name: aws.String("FROM_DEF"), Value: aws.String("def")}, {Name: aws.String("OVERRIDDEN"), Value: aws.String("def")}},
				Secrets:     []ecstypes.Secret{{Name: aws.String("API_KEY"), ValueFrom: aws.String(valueFrom)}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	def(name, aws.ToString(sec.ARN)+":key::")
	def(name+"-bad", aws.ToString(sec.ARN)+"-nosuch")

	ev := &events{by: map[string]stopped{}}
	var started sync.Map
	a := &fargate.Agent{ECS: ecs, Secrets: sm, Cluster: aws.ToString(cl.Cluster.ClusterArn),
		Backend: backend,
		Poll:    50 * time.Millisecond, OnStopped: ev.add,
		OnStarted: func(c fargate.Container, r fargate.Running) { started.Store(c.TaskARN, c) }}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(actx); close(done) }()
	defer func() { cancel(); <-done }()

	run := func(family, script string) string {
		t.Helper()
		out, err := ecs.RunTask(ctx, &awsecs.RunTaskInput{Cluster: cl.Cluster.ClusterArn, TaskDefinition: aws.String(family), StartedBy: aws.String("stratus-t1"), LaunchType: ecstypes.LaunchTypeFargate,
			Overrides: &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String("runner"), Command: cmd(script),
				Environment: []ecstypes.KeyValuePair{{Name: aws.String("OVERRIDDEN"), Value: aws.String("run")}, {Name: aws.String("STRATUS_HANDLE"), Value: aws.String("wb-1")}}}}}})
		if err != nil || len(out.Tasks) != 1 {
			t.Fatalf("RunTask: %v %v", out, err)
		}
		return aws.ToString(out.Tasks[0].TaskArn)
	}

	// Exits on its own.
	arn := run(name, `echo "def=$FROM_DEF over=$OVERRIDDEN key=$API_KEY handle=$STRATUS_HANDLE leak=${STRATUS_FARGATE_TEST_LEAK:-none}"; echo second; echo '{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"a runner record","component":"runner"}'; exit 3`)
	d := ev.wait(t, arn)
	if d.StoppedReason != fargate.StoppedReasonExited || d.StopCode != "EssentialContainerExited" || d.StartedBy != "stratus-t1" {
		t.Errorf("stopped %+v; want reason %q, stop code EssentialContainerExited, startedBy stratus-t1", d, fargate.StoppedReasonExited)
	}
	if len(d.Containers) != 1 || d.Containers[0].ExitCode == nil || *d.Containers[0].ExitCode != 3 {
		t.Fatalf("containers %+v; want one with exit code 3", d.Containers)
	}
	// The runner's own log records say what the step's reason says: left
	// out, as an embedded worker's exit reason leaves them.
	if want := "def=def over=run key=s3cret handle=wb-1 leak=none | second"; d.Containers[0].Reason != want {
		t.Errorf("container reason (its last lines but the runner's records) %q; want %q", d.Containers[0].Reason, want)
	}
	if len(d.Overrides.ContainerOverrides) != 1 || len(d.Overrides.ContainerOverrides[0].Environment) != 2 {
		t.Errorf("overrides %+v; want the runner's two variables", d.Overrides)
	}
	desc, err := ecs.DescribeTasks(ctx, &awsecs.DescribeTasksInput{Cluster: cl.Cluster.ClusterArn, Tasks: []string{arn}})
	if err != nil || len(desc.Tasks) != 1 || aws.ToString(desc.Tasks[0].LastStatus) != "STOPPED" || aws.ToString(desc.Tasks[0].StoppedReason) != fargate.StoppedReasonExited {
		t.Errorf("on the stand-in the task is %+v (%v); want STOPPED, %q", desc, err, fargate.StoppedReasonExited)
	}
	if _, ok := started.Load(arn); !ok {
		t.Error("OnStarted was not told of the task")
	}

	// Stopped by StopTask while it runs.
	arn = run(name, `echo up; trap 'echo terminated; exit 143' TERM; while :; do sleep 0.05; done`)
	for i := 0; ; i++ {
		if _, ok := started.Load(arn); ok {
			break
		}
		if i > 400 {
			t.Fatal("the second task never started")
		}
		time.Sleep(25 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // its trap is set
	if _, err := ecs.StopTask(ctx, &awsecs.StopTaskInput{Cluster: cl.Cluster.ClusterArn, Task: aws.String(arn), Reason: aws.String("the run was cancelled")}); err != nil {
		t.Fatal(err)
	}
	d = ev.wait(t, arn)
	if d.StoppedReason != "the run was cancelled" || d.StopCode != "UserInitiated" || d.Containers[0].ExitCode == nil || *d.Containers[0].ExitCode != 143 {
		t.Errorf("stopped %+v %+v; want StopTask's reason, UserInitiated, exit 143 (SIGTERM trapped)", d, d.Containers)
	}

	// A secret that does not resolve: the task never starts.
	arn = run(name+"-bad", `echo started; exit 0`)
	d = ev.wait(t, arn)
	if !strings.HasPrefix(d.StoppedReason, "ResourceInitializationError") || d.StopCode != "TaskFailedToStart" || d.Containers[0].ExitCode != nil {
		t.Errorf("stopped %+v; want ResourceInitializationError, TaskFailedToStart, no exit code", d)
	}
	if _, ok := started.Load(arn); ok {
		t.Error("a task whose secret does not resolve was started")
	}
}

// A task process ended by a signal reports 128+N, as container engines
// report a container's end and ECS passes it on in containers[].exitCode:
// 137 for SIGKILL (an OOM kill, a Spot reclaim past its stopTimeout),
// 143 for SIGTERM untrapped. Where names the pid, so a test can kill it.
// The stand-in said -1 for any signal.
func TestProcessBackend_ASignalledTaskExitsWith128PlusTheSignal(t *testing.T) {
	b := &fargate.ProcessBackend{Self: "/bin/sh", Root: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	for i, tc := range []struct {
		script string
		want   int
	}{{"kill -KILL $$", 137}, {"kill -TERM $$", 143}, {"exit 3", 3}} {
		r, err := b.Start(context.Background(), fargate.Container{TaskID: fmt.Sprint("t", i), Command: []string{"-c", tc.script}})
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^process [1-9][0-9]* in /`).MatchString(r.Where()) {
			t.Errorf("Where() = %q; want the process's pid and directory", r.Where())
		}
		select {
		case <-r.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%q did not end", tc.script)
		}
		if got := r.ExitCode(); got != tc.want {
			t.Errorf("%q: exit code %d; want %d", tc.script, got, tc.want)
		}
	}
}

// ECS reads a container's secrets with the task definition's execution
// role ("Amazon ECS task execution IAM role"): on the stand-in with an IAM
// client, a secret the role may read (an inline Allow of
// secretsmanager:GetSecretValue on its ARN) reaches the container's
// environment; one it may not, or a task definition with no execution
// role, stops the task before it starts with ECS's reason,
// "ResourceInitializationError: unable to pull secrets ...", naming the
// AccessDeniedException; a task definition without the secret gets no
// such variable.
func TestAgent_SecretsAreReadWithTheExecutionRole(t *testing.T) {
	cfg := awstest.Moto(t).Config()
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &awstest.ECSClient{}
	ecs := awsecs.NewFromConfig(ecsCfg)
	sm, iam := awssm.NewFromConfig(cfg), awsiam.NewFromConfig(cfg)
	ctx := context.Background()
	name := strings.ReplaceAll(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())+time.Now().Format("150405.000000"), ".", "")
	cl, err := ecs.CreateCluster(ctx, &awsecs.CreateClusterInput{ClusterName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sm.CreateSecret(ctx, &awssm.CreateSecretInput{Name: aws.String(name + "/git-token"), SecretString: aws.String("ghp_fromsecret")})
	if err != nil {
		t.Fatal(err)
	}
	secARN := aws.ToString(sec.ARN)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ecs-tasks.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	role := func(suffix, resource string) string {
		t.Helper()
		r, err := iam.CreateRole(ctx, &awsiam.CreateRoleInput{RoleName: aws.String(name + suffix), AssumeRolePolicyDocument: aws.String(trust)})
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"` + resource + `"}]}`
		if _, err := iam.PutRolePolicy(ctx, &awsiam.PutRolePolicyInput{RoleName: aws.String(name + suffix), PolicyName: aws.String("secrets"), PolicyDocument: aws.String(doc)}); err != nil {
			t.Fatal(err)
		}
		return aws.ToString(r.Role.Arn)
	}
	publisherRole := role("-publisher", secARN)
	runnerRole := role("-runner", secARN+"-another")
	def := func(family, role string, secret bool) {
		t.Helper()
		cd := ecstypes.ContainerDefinition{Name: aws.String("runner"), Image: aws.String("stratus-runner:test"), Memory: aws.Int32(512), Essential: aws.Bool(true), StopTimeout: aws.Int32(2)}
		if secret {
			cd.Secrets = []ecstypes.Secret{{Name: aws.String("STRATUS_GIT_TOKEN"), ValueFrom: aws.String(secARN)}}
		}
		in := &awsecs.RegisterTaskDefinitionInput{Family: aws.String(family), NetworkMode: ecstypes.NetworkModeBridge, ContainerDefinitions: []ecstypes.ContainerDefinition{cd}}
		if role != "" {
			in.ExecutionRoleArn = aws.String(role)
		}
		if _, err := ecs.RegisterTaskDefinition(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	def(name+"-publisher", publisherRole, true)
	def(name+"-wrongrole", runnerRole, true)
	def(name+"-norole", "", true)
	def(name+"-runner", runnerRole, false)

	ev := &events{by: map[string]stopped{}}
	a := &fargate.Agent{ECS: ecs, Secrets: sm, IAM: iam, Cluster: aws.ToString(cl.Cluster.ClusterArn),
		Backend: &fargate.ProcessBackend{Self: "/bin/sh", Root: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}},
		Poll:    50 * time.Millisecond, OnStopped: ev.add}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(actx); close(done) }()
	defer func() { cancel(); <-done }()
	run := func(family string) stopped {
		t.Helper()
		out, err := ecs.RunTask(ctx, &awsecs.RunTaskInput{Cluster: cl.Cluster.ClusterArn, TaskDefinition: aws.String(family), LaunchType: ecstypes.LaunchTypeFargate,
			Overrides: &ecstypes.TaskOverride{ContainerOverrides: []ecstypes.ContainerOverride{{Name: aws.String("runner"),
				Command: []string{"-c", `echo "token=${STRATUS_GIT_TOKEN:-unset}"`}}}}})
		if err != nil || len(out.Tasks) != 1 {
			t.Fatalf("RunTask %s: %v %v", family, out, err)
		}
		return ev.wait(t, aws.ToString(out.Tasks[0].TaskArn))
	}
	if d := run(name + "-publisher"); len(d.Containers) != 1 || d.Containers[0].Reason != "token=ghp_fromsecret" {
		t.Errorf("the task whose execution role may read the secret: %+v; want it started with token=ghp_fromsecret", d)
	}
	if d := run(name + "-runner"); len(d.Containers) != 1 || d.Containers[0].Reason != "token=unset" {
		t.Errorf("the task without the secret: %+v; want it started with token=unset", d)
	}
	for _, family := range []string{name + "-wrongrole", name + "-norole"} {
		d := run(family)
		if !strings.HasPrefix(d.StoppedReason, "ResourceInitializationError: unable to pull secrets") || !strings.Contains(d.StoppedReason, "AccessDeniedException") ||
			!strings.Contains(d.StoppedReason, secARN) || d.StopCode != "TaskFailedToStart" || d.Containers[0].ExitCode != nil {
			t.Errorf("%s: stopped %+v; want ResourceInitializationError: unable to pull secrets ... AccessDeniedException naming the secret, TaskFailedToStart, never started", family, d)
		}
	}
}
