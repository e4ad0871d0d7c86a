// Package fargate plays AWS Fargate for the local AWS stand-in (stratus dev
// aws): an ECS stand-in such as moto records what ecs:RunTask asks for and
// starts nothing, so Agent watches the stand-in's cluster and starts every
// task placed there itself, through a Backend: a container of the task
// definition's image (ContainerBackend, in the container package) or a
// local process (ProcessBackend).
//
// It follows the ECS task lifecycle as AWS documents it ("Amazon ECS task
// lifecycle", and "Amazon ECS task state change events" for what a
// stopped task reports):
//
//   - a task with desiredStatus RUNNING is started once, with the
//     environment ECS gives its container: the task definition's
//     environment, its secrets resolved from Secrets Manager (valueFrom an
//     ARN, or "ARN:json-key::") with the task definition's execution role
//     (Agent.IAM), then the RunTask overrides' environment; nothing of the
//     operator's; a secret that cannot be read stops the task before it
//     starts, "ResourceInitializationError: unable to pull secrets ...";
//   - a task StopTask set to desiredStatus STOPPED is stopped: SIGTERM,
//     then SIGKILL after the task definition's stopTimeout (30 s if unset,
//     Fargate's default);
//   - a task whose essential container exits on its own is stopped on the
//     stand-in with ECS's stoppedReason, "Essential container in task
//     exited", and the container's exit code and last lines of output go
//     with the "ECS Task State Change" event the agent hands to
//     OnStopped, as the stack's WorkerTaskStoppedRule hands it to the
//     dispatch queue.
package fargate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stratusflow/stratus/internal/awsapp"
)

// ECS is what Agent calls on the ECS stand-in.
type ECS interface {
	ListTasks(ctx context.Context, in *awsecs.ListTasksInput, o ...func(*awsecs.Options)) (*awsecs.ListTasksOutput, error)
	DescribeTasks(ctx context.Context, in *awsecs.DescribeTasksInput, o ...func(*awsecs.Options)) (*awsecs.DescribeTasksOutput, error)
	DescribeTaskDefinition(ctx context.Context, in *awsecs.DescribeTaskDefinitionInput, o ...func(*awsecs.Options)) (*awsecs.DescribeTaskDefinitionOutput, error)
	StopTask(ctx context.Context, in *awsecs.StopTaskInput, o ...func(*awsecs.Options)) (*awsecs.StopTaskOutput, error)
}

// Secrets resolves a task definition's secrets (the Secrets Manager
// stand-in).
type Secrets interface {
	GetSecretValue(ctx context.Context, in *awssm.GetSecretValueInput, o ...func(*awssm.Options)) (*awssm.GetSecretValueOutput, error)
}

// Container is what a Backend starts: the essential container of one task.
type Container struct {
	TaskARN string
	TaskID  string // the last part of TaskARN
	Family  string // the task definition's family
	Name    string // the container's name in the task definition
	Image   string
	// Env is the container's whole environment, KEY=VALUE, sorted.
	Env []string
	// User is the task definition's user ("" = the image's own).
	User    string
	Command []string // the task definition's command, or RunTask's override of it (none: the image's)
	// CPU (units of 1/1024 vCPU) and MemoryMiB are the task's size.
	CPU, MemoryMiB int
	// Networked is false for a task of the offline network profile, whose
	// only reachable endpoint is the worker API.
	Networked bool
	// Starting is when the agent asked its Backend to start it (before the
	// container was created).
	Starting time.Time
}

// Backend starts containers.
type Backend interface {
	// Start starts c; its error stops the task at once, its message the
	// stoppedReason ("CannotPullContainerError: ...", as ECS says when an
	// image is missing).
	Start(ctx context.Context, c Container) (Running, error)
	// Name says what a task runs as, for the log: "container", "process".
	Name() string
}

// Running is one started container.
type Running interface {
	// Stop sends SIGTERM, then SIGKILL after grace; it returns at once.
	Stop(grace time.Duration)
	// Done is closed once it has exited.
	Done() <-chan struct{}
	// ExitCode is its exit status once Done: 128+N when signal N ended
	// it, as container engines and ECS report it (137: SIGKILL); -1 when
	// not known.
	ExitCode() int
	// LastLines is the end of its output, at most n lines, the runner's
	// own log records left out (what is new beside the step's reason: the
	// engine's stderr, a crash).
	LastLines(n int) []string
	// Where says where it runs: the container id, or the process's
	// directory.
	Where() string
}

// StoppedReasonExited is ECS's stoppedReason for a task whose essential
// container exited ("Amazon ECS task state change events").
const StoppedReasonExited = "Essential container in task exited"

// DetailTaskStateChange is the detail-type of the events ECS sends through
// EventBridge when a task changes state: the one the dispatch function
// reads (awsapp.TaskStopped).
const DetailTaskStateChange = awsapp.DetailTaskStateChange

// Agent is the Fargate stand-in for one cluster. Set its fields, then Run.
type Agent struct {
	ECS     ECS
	Secrets Secrets
	// IAM, when set, is the IAM stand-in a task's secrets are checked
	// against: ECS reads them with the task definition's execution role,
	// so a secret that role may not read fails the task's start
	// (mayReadSecret). Nil: every secret the Secrets Manager stand-in
	// holds is delivered.
	IAM     IAM
	Cluster string // the cluster's name or ARN
	// OnlineSubnets are the subnets of the online network profile: a
	// task placed in one is Networked.
	OnlineSubnets []string
	// TaskRoleEnv is added to the environment of a task whose task
	// definition has a task role (taskRoleArn): the stand-in's credentials,
	// region and endpoint, where ECS gives the container its role's
	// credentials through AWS_CONTAINER_CREDENTIALS_RELATIVE_URI. A task
	// without a role gets none.
	TaskRoleEnv []string
	Backend     Backend
	// Poll is how often the stand-in's tasks are listed (0: 200 ms).
	Poll time.Duration
	// OnStopped receives the "ECS Task State Change" event of each task
	// that stopped (detail-type DetailTaskStateChange, source aws.ecs),
	// as EventBridge would deliver it to the stack's events function.
	OnStopped func(ctx context.Context, event json.RawMessage)
	// OnStarted, when set, is told each task started (the demo prints
	// where each step ran).
	OnStarted func(c Container, r Running)
	Log       io.Writer

	mu      sync.Mutex
	tasks   map[string]*task // task ARN → its container
	defs    map[string]ecstypes.TaskDefinition
	stopped map[string]bool // task ARNs ended: never started again
	wg      sync.WaitGroup
}

// task is one task the agent started.
type task struct {
	arn      string
	c        Container
	r        Running
	detail   ecstypes.Task
	stopping bool // StopTask was called on the stand-in
	grace    time.Duration
}

// Run watches the cluster until ctx ends, then stops every task it
// started (SIGTERM, SIGKILL after their grace) and returns once they have
// exited. Errors of the stand-in's API are logged and retried.
func (a *Agent) Run(ctx context.Context) {
	poll := a.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	a.mu.Lock()
	a.tasks, a.defs, a.stopped = map[string]*task{}, map[string]ecstypes.TaskDefinition{}, map[string]bool{}
	a.mu.Unlock()
	for {
		a.sync(ctx)
		select {
		case <-ctx.Done():
			a.stopAll("the stand-in stopped")
			a.wg.Wait()
			return
		case <-time.After(poll):
		}
	}
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, "fargate: "+format+"\n", args...)
	}
}

// sync starts the tasks newly RUNNING and stops the ones set STOPPED.
func (a *Agent) sync(ctx context.Context) {
	running := map[string]bool{}
	var next *string
	for {
		out, err := a.ECS.ListTasks(ctx, &awsecs.ListTasksInput{Cluster: aws.String(a.Cluster), DesiredStatus: ecstypes.DesiredStatusRunning, NextToken: next})
		if err != nil {
			if ctx.Err() == nil {
				a.logf("ListTasks: %v", err)
			}
			return
		}
		for _, arn := range out.TaskArns {
			running[arn] = true
		}
		if next = out.NextToken; next == nil {
			break
		}
	}
	a.mu.Lock()
	var fresh []string
	for arn := range running {
		if a.tasks[arn] == nil && !a.stopped[arn] {
			fresh = append(fresh, arn)
		}
	}
	for arn, t := range a.tasks {
		if !running[arn] && !t.stopping {
			// StopTask came from elsewhere (the dispatch or events
			// function): the task is stopped as ECS stops it.
			t.stopping = true
			t.r.Stop(t.grace)
		}
	}
	a.mu.Unlock()
	sort.Strings(fresh)
	for len(fresh) > 0 {
		n := min(len(fresh), 100) // DescribeTasks takes 100 at most
		a.start(ctx, fresh[:n])
		fresh = fresh[n:]
	}
}

// start describes the tasks and starts each one's essential container.
func (a *Agent) start(ctx context.Context, arns []string) {
	out, err := a.ECS.DescribeTasks(ctx, &awsecs.DescribeTasksInput{Cluster: aws.String(a.Cluster), Tasks: arns})
	if err != nil {
		a.logf("DescribeTasks: %v", err)
		return
	}
	for _, tk := range out.Tasks {
		arn := aws.ToString(tk.TaskArn)
		c, grace, err := a.container(ctx, tk)
		if err == nil {
			var r Running
			c.Starting = time.Now()
			if r, err = a.Backend.Start(ctx, c); err == nil {
				t := &task{arn: arn, c: c, r: r, detail: tk, grace: grace}
				a.mu.Lock()
				a.tasks[arn] = t
				a.mu.Unlock()
				a.logf("task %s (%s) started as a %s: %s", c.TaskID, c.Family, a.Backend.Name(), r.Where())
				if a.OnStarted != nil {
					a.OnStarted(c, r)
				}
				a.wg.Add(1)
				go a.wait(ctx, t)
				continue
			}
		}
		// ECS stops a task it could not start, saying why.
		a.mu.Lock()
		a.stopped[arn] = true
		a.mu.Unlock()
		a.logf("task %s could not start: %v", arn, err)
		a.stopTask(ctx, tk, err.Error(), nil, nil)
	}
}

// wait waits for t to exit, then stops its task on the stand-in (unless
// StopTask did) and delivers its state change.
func (a *Agent) wait(ctx context.Context, t *task) {
	defer a.wg.Done()
	<-t.r.Done()
	code := t.r.ExitCode()
	lines := t.r.LastLines(5)
	a.mu.Lock()
	stopping := t.stopping
	delete(a.tasks, t.arn)
	a.stopped[t.arn] = true
	a.mu.Unlock()
	reason := StoppedReasonExited
	if stopping {
		reason = "" // StopTask's reason stays
	}
	a.logf("task %s exited with code %d", t.c.TaskID, code)
	a.stopTask(context.WithoutCancel(ctx), t.detail, reason, &code, lines)
}

// stopTask records task tk stopped on the stand-in (reason "" keeps the
// one StopTask gave) and hands its state change to OnStopped.
func (a *Agent) stopTask(ctx context.Context, tk ecstypes.Task, reason string, code *int, lines []string) {
	if reason != "" {
		if _, err := a.ECS.StopTask(ctx, &awsecs.StopTaskInput{Cluster: aws.String(a.Cluster), Task: tk.TaskArn, Reason: aws.String(reason)}); err != nil {
			a.logf("StopTask %s: %v", aws.ToString(tk.TaskArn), err)
		}
	}
	if d, err := a.ECS.DescribeTasks(ctx, &awsecs.DescribeTasksInput{Cluster: aws.String(a.Cluster), Tasks: []string{aws.ToString(tk.TaskArn)}}); err == nil && len(d.Tasks) == 1 {
		tk = d.Tasks[0]
	}
	if a.OnStopped == nil {
		return
	}
	ev, err := StateChangeEvent(tk, code, lines)
	if err != nil {
		a.logf("the state change of %s: %v", aws.ToString(tk.TaskArn), err)
		return
	}
	a.OnStopped(ctx, ev)
}

// stopAll stops every task still running (SIGTERM, SIGKILL after grace),
// as ECS does when the service or cluster goes away.
func (a *Agent) stopAll(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tasks {
		if !t.stopping {
			t.stopping = true
			a.logf("task %s: %s", t.c.TaskID, why)
			t.r.Stop(t.grace)
		}
	}
}

// container is what task tk's essential container runs with: its task
// definition's image, user and environment, its secrets, and the
// overrides RunTask gave; and its stop grace (the container's
// stopTimeout, 30 s when unset).
func (a *Agent) container(ctx context.Context, tk ecstypes.Task) (Container, time.Duration, error) {
	def, err := a.definition(ctx, aws.ToString(tk.TaskDefinitionArn))
	if err != nil {
		return Container{}, 0, err
	}
	var cd *ecstypes.ContainerDefinition
	for i := range def.ContainerDefinitions {
		d := &def.ContainerDefinitions[i]
		if cd == nil || aws.ToBool(d.Essential) {
			cd = d
		}
	}
	if cd == nil {
		return Container{}, 0, fmt.Errorf("task definition %s has no container", aws.ToString(def.TaskDefinitionArn))
	}
	arn := aws.ToString(tk.TaskArn)
	c := Container{TaskARN: arn, TaskID: arn[strings.LastIndex(arn, "/")+1:], Family: aws.ToString(def.Family), Name: aws.ToString(cd.Name),
		Image: aws.ToString(cd.Image), User: aws.ToString(cd.User), Command: cd.Command}
	fmt.Sscan(aws.ToString(def.Cpu), &c.CPU)
	fmt.Sscan(aws.ToString(def.Memory), &c.MemoryMiB)
	env := map[string]string{}
	for _, kv := range cd.Environment {
		env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
	}
	for _, s := range cd.Secrets {
		v, err := a.secret(ctx, aws.ToString(s.ValueFrom), aws.ToString(def.ExecutionRoleArn))
		if err != nil {
			// ECS: "ResourceInitializationError: unable to pull secrets".
			return Container{}, 0, fmt.Errorf("ResourceInitializationError: unable to pull secrets or registry auth: secret %s (%s): %v", aws.ToString(s.Name), aws.ToString(s.ValueFrom), err)
		}
		env[aws.ToString(s.Name)] = v
	}
	if tk.Overrides != nil {
		for _, o := range tk.Overrides.ContainerOverrides {
			if aws.ToString(o.Name) != c.Name {
				continue
			}
			for _, kv := range o.Environment {
				env[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
			}
			if len(o.Command) > 0 {
				c.Command = o.Command
			}
		}
	}
	if def.TaskRoleArn != nil {
		for _, kv := range a.TaskRoleEnv {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	for k, v := range env {
		c.Env = append(c.Env, k+"="+v)
	}
	sort.Strings(c.Env)
	c.Networked = a.networked(tk)
	grace := 30 * time.Second
	if cd.StopTimeout != nil {
		grace = time.Duration(*cd.StopTimeout) * time.Second
	}
	return c, grace, nil
}

// networked says whether task tk is of the online network profile: its
// ENI is in one of a.OnlineSubnets (the stack's NetworkWorkerSubnetIds).
// A task the stand-in cannot tell is offline: the closed profile is the
// default.
func (a *Agent) networked(tk ecstypes.Task) bool {
	for _, at := range tk.Attachments {
		for _, d := range at.Details {
			if aws.ToString(d.Name) == "subnetId" && slices.Contains(a.OnlineSubnets, aws.ToString(d.Value)) {
				return true
			}
		}
	}
	return false
}

// definition describes a task definition once.
func (a *Agent) definition(ctx context.Context, arn string) (ecstypes.TaskDefinition, error) {
	a.mu.Lock()
	d, ok := a.defs[arn]
	a.mu.Unlock()
	if ok {
		return d, nil
	}
	out, err := a.ECS.DescribeTaskDefinition(ctx, &awsecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(arn)})
	if err != nil {
		return d, fmt.Errorf("describe task definition %s: %w", arn, err)
	}
	a.mu.Lock()
	a.defs[arn] = *out.TaskDefinition
	a.mu.Unlock()
	return *out.TaskDefinition, nil
}

// secret resolves a secret's valueFrom as ECS does, reading it with the
// task's execution role (role, an ARN; checked when a.IAM is set): a
// Secrets Manager ARN is the whole secret string;
// "ARN:json-key:version-stage:version-id" picks the JSON key of it (ECS
// "Pass Secrets Manager secrets through Amazon ECS environment
// variables").
func (a *Agent) secret(ctx context.Context, valueFrom, role string) (string, error) {
	if a.Secrets == nil {
		return "", fmt.Errorf("no Secrets Manager stand-in")
	}
	id, key := valueFrom, ""
	// arn:aws:secretsmanager:region:account:secret:name-abc123[:key:stage:version]
	if parts := strings.Split(valueFrom, ":"); len(parts) > 7 && parts[2] == "secretsmanager" {
		id, key = strings.Join(parts[:7], ":"), parts[7]
	}
	if a.IAM != nil {
		if err := mayReadSecret(ctx, a.IAM, role, id); err != nil {
			return "", err
		}
	}
	out, err := a.Secrets.GetSecretValue(ctx, &awssm.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", err
	}
	v := aws.ToString(out.SecretString)
	if key == "" {
		return v, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return "", fmt.Errorf("json-key %q: the secret is not a JSON object", key)
	}
	s, ok := m[key]
	if !ok {
		return "", fmt.Errorf("json-key %q: not in the secret", key)
	}
	if str, ok := s.(string); ok {
		return str, nil
	}
	b, _ := json.Marshal(s)
	return string(b), nil
}

// StateChangeEvent is the EventBridge event of task tk's stop: source
// aws.ecs, detail-type "ECS Task State Change", and the task as ECS
// describes it in the detail, with its essential container's exit code
// and, in the container's reason, its last lines of output (Running's
// LastLines; ECS puts the container's own reason there, such as
// "OutOfMemoryError: Container killed due to memory usage"; the stand-in
// has the output at hand, where AWS would have it in CloudWatch Logs).
func StateChangeEvent(tk ecstypes.Task, code *int, lines []string) (json.RawMessage, error) {
	type kv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	type override struct {
		Name        string `json:"name"`
		Environment []kv   `json:"environment,omitempty"`
	}
	type ctr struct {
		Name       string `json:"name"`
		LastStatus string `json:"lastStatus"`
		ExitCode   *int   `json:"exitCode,omitempty"`
		Reason     string `json:"reason,omitempty"`
	}
	detail := struct {
		ClusterArn        string `json:"clusterArn"`
		TaskArn           string `json:"taskArn"`
		TaskDefinitionArn string `json:"taskDefinitionArn"`
		LastStatus        string `json:"lastStatus"`
		DesiredStatus     string `json:"desiredStatus"`
		StartedBy         string `json:"startedBy,omitempty"`
		Group             string `json:"group,omitempty"`
		StopCode          string `json:"stopCode,omitempty"`
		StoppedReason     string `json:"stoppedReason,omitempty"`
		StoppedAt         string `json:"stoppedAt"`
		Containers        []ctr  `json:"containers"`
		Overrides         struct {
			ContainerOverrides []override `json:"containerOverrides"`
		} `json:"overrides"`
	}{ClusterArn: aws.ToString(tk.ClusterArn), TaskArn: aws.ToString(tk.TaskArn), TaskDefinitionArn: aws.ToString(tk.TaskDefinitionArn),
		LastStatus: "STOPPED", DesiredStatus: "STOPPED", StartedBy: aws.ToString(tk.StartedBy), Group: aws.ToString(tk.Group),
		StoppedReason: aws.ToString(tk.StoppedReason), StoppedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	switch {
	case strings.HasPrefix(detail.StoppedReason, StoppedReasonExited):
		detail.StopCode = "EssentialContainerExited"
	case code == nil:
		detail.StopCode = "TaskFailedToStart"
	default:
		detail.StopCode = "UserInitiated"
	}
	name := ""
	if tk.Overrides != nil {
		for _, o := range tk.Overrides.ContainerOverrides {
			ov := override{Name: aws.ToString(o.Name)}
			for _, e := range o.Environment {
				ov.Environment = append(ov.Environment, kv{aws.ToString(e.Name), aws.ToString(e.Value)})
			}
			detail.Overrides.ContainerOverrides = append(detail.Overrides.ContainerOverrides, ov)
			name = ov.Name
		}
	}
	c := ctr{Name: name, LastStatus: "STOPPED", ExitCode: code}
	if len(lines) > 0 {
		c.Reason = strings.Join(lines, " | ")
	}
	detail.Containers = []ctr{c}
	d, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"version": "0", "id": detail.TaskArn + "/stopped", "detail-type": DetailTaskStateChange, "source": "aws.ecs",
		"time": detail.StoppedAt, "resources": []string{detail.TaskArn}, "detail": json.RawMessage(d),
	})
}
