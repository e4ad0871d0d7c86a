package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/fargate"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/httpapi"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// Self is the stratus binary the Fargate stand-in runs as `stratus
	// runner` ("" = this process's executable).
	Self string
	// WorkRoot holds one fresh directory per worker (its working
	// directory and home, as a Fargate task's would be).
	WorkRoot string
	// Log receives what the functions log; nil = discard.
	Log io.Writer
	// EventsPoll is how often the events stand-in looks for ended
	// executions; 0 = 1 s.
	EventsPoll time.Duration
	// PoolRunners, when the stack has a pool (CreateOptions.Pool), is how
	// many `stratus runner pool` processes serve each network profile's
	// queue (issue 17), each in a fresh directory of its own under
	// WorkRoot with a Fargate task's environment and moto's credentials.
	PoolRunners int
	// PoolPickup is how long dispatch waits for a pooled runner before it
	// falls back to RunTask (0: pool.DefaultPickup, 20 s).
	PoolPickup time.Duration
}

// Functions plays, on this machine, what a stand-in such as moto cannot
// run: the Lambdas — the worker API served on ln, the dispatch function
// consuming the dispatch queue, the events function recording each ended
// execution (moto sends no EventBridge events: the running runs'
// executions are polled) — and Fargate (Fargate.Agent): each task
// ecs:RunTask placed on the stand-in runs with the environment its task
// definition and RunTask's overrides give it, nothing else of the
// operator's, and its stop goes to the dispatch queue as the
// WorkerTaskStopped rule sends it.
type Functions struct {
	st      *Stack
	cfg     aws.Config
	app     *awsapp.App // worker API and dispatch
	events  *awsapp.App
	Fargate *Fargate
	srv     *http.Server
	serving sync.Mutex
	log     io.Writer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	aborted map[string]bool // executions delivered ABORTED for a cancel (watchExecutions only)
	pool    []*pooled       // the pooled runners (ServeOptions.PoolRunners)
}

// pooled is one pooled runner: its process, restarted when it exits
// until stop (an exited runner is waited for: no zombie while the
// stand-in serves on).
type pooled struct {
	dir   string
	start func() (*exec.Cmd, error)

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped bool
	done    chan struct{} // closed once the last process exited after stop
}

// run starts the runner and keeps it running until stop.
func (p *pooled) run(log io.Writer) error {
	cmd, err := p.start()
	if err != nil {
		return err
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		for {
			err := cmd.Wait()
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				close(p.done)
				return
			}
			fmt.Fprintf(log, "pool: the pooled runner in %s exited (%v); another takes its place, as an ECS service's would\n", p.dir, err)
			time.Sleep(time.Second)
			next, serr := p.start()
			if serr != nil {
				p.stopped = true
				p.mu.Unlock()
				fmt.Fprintf(log, "pool: the pooled runner in %s could not be replaced: %v\n", p.dir, serr)
				close(p.done)
				return
			}
			p.cmd, cmd = next, next
			p.mu.Unlock()
		}
	}()
	return nil
}

// stop sends the runner SIGTERM (its step under way gets its grace).
func (p *pooled) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.cmd.Process.Signal(syscall.SIGTERM)
}

// Serve starts the functions of stack st on the stand-in cfg points at,
// the worker API on ln (whose address st.APIURL names). Stop ends them.
func Serve(ctx context.Context, cfg aws.Config, st *Stack, ln net.Listener, o ServeOptions) (*Functions, error) {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	self := o.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &moto.ECSClient{}
	el, err := ecs.New(awsecs.NewFromConfig(ecsCfg), ecs.Config{Cluster: st.Cluster, TaskDefinition: st.TaskDef,
		Offline: ecs.NetworkProfile{Subnets: st.Subnets, SecurityGroups: st.SecurityGroups},
		Online:  ecs.NetworkProfile{Subnets: st.NetworkSubnets, SecurityGroups: st.NetworkSecurityGroups}})
	if err != nil {
		return nil, err
	}
	ecsc := awsecs.NewFromConfig(ecsCfg)
	fg := &Fargate{ecs: el, Agent: &fargate.Agent{ECS: ecsc, Secrets: awssm.NewFromConfig(cfg), Cluster: st.Cluster, Log: log,
		OnlineSubnets: []string{"subnet-dev-online"},
		Backend:       &fargate.ProcessBackend{Self: self, Root: o.WorkRoot, Env: fargateEnv()}}}
	// EventBridge's WorkerTaskStopped rule: a stopped task's state change
	// goes to the dispatch queue (template.yaml).
	q := sqs.NewFromConfig(cfg)
	fg.Agent.OnStopped = func(ctx context.Context, ev json.RawMessage) {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURL), MessageBody: aws.String(string(ev))}); err != nil {
			fmt.Fprintf(log, "fargate: the task state change could not be queued: %v\n", err)
		}
	}
	env := map[string]string{
		awsapp.EnvTable: st.Table, awsapp.EnvBucket: st.Bucket, awsapp.EnvBucketPrefix: "stratus/",
		awsapp.EnvQueueURL: st.QueueURL, awsapp.EnvSecretID: st.SecretARN, awsapp.EnvAPIURL: st.APIURL,
		awsapp.EnvPoolQueueURL: st.PoolQueueURL, awsapp.EnvPoolNetworkQueueURL: st.PoolNetworkQueueURL,
	}
	if o.PoolPickup > 0 {
		env[awsapp.EnvPoolPickupSeconds] = fmt.Sprint(max(int(o.PoolPickup.Seconds()), 1))
	}
	c, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	f := &Functions{st: st, cfg: cfg, Fargate: fg, log: log}
	if f.app, err = awsapp.New(ctx, c, cfg, awsapp.Options{Launcher: fg, Log: log, Commits: bundlecheck.Checker{}}); err != nil {
		return nil, err
	}
	if f.events, err = awsapp.NewEvents(c, cfg, awsapp.Options{Launcher: fg, Log: log}); err != nil {
		return nil, err
	}
	handler := f.app.HTTPHandler()
	f.srv = httpapi.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As the worker API function does: the request's background work
		// is drained before the answer returns.
		f.serving.Lock()
		defer f.serving.Unlock()
		handler.ServeHTTP(w, r)
		f.app.Drain()
	}))
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	poll := o.EventsPoll
	if poll <= 0 {
		poll = time.Second
	}
	if err := f.startPool(cfg, self, o); err != nil {
		cancel()
		f.stopPool()
		return nil, err
	}
	f.wg.Add(4)
	go func() { defer f.wg.Done(); fg.Agent.Run(lctx) }()
	go func() { defer f.wg.Done(); f.srv.Serve(ln) }()
	go func() { defer f.wg.Done(); f.dispatch(lctx) }()
	go func() { defer f.wg.Done(); f.watchExecutions(lctx, poll) }()
	return f, nil
}

// EngineSecrets are the variables the stack's task definition fills from
// Secrets Manager (template.yaml: AnthropicApiKeySecretArn,
// OpenAIApiKeySecretArn, DeepseekSecretArn); EngineSettings are what a
// runner image built for an engine would set (its model endpoint, its
// config dir). The stand-in passes both from the operator's environment
// when set, so an engine — a real CLI against the scripted model server
// included — runs on it as on Fargate (issue 13 § 7).
var (
	EngineSecrets  = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK"}
	EngineSettings = []string{"ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CONFIG_DIR", "CODEX_HOME"}
)

// fargateEnv is the environment a Fargate task of the runner image has
// besides what RunTask overrides: a PATH (the engines the operator
// configured must be found), the engine secrets and settings that are set
// (EngineSecrets, EngineSettings), nothing else of the operator's.
func fargateEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, k := range append(slices.Clone(EngineSecrets), EngineSettings...) {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// dispatch is the dispatch function's SQS event source: each message is
// one invocation, deleted once handled; a failed one is left for
// redelivery (and, after five, the DLQ).
func (f *Functions) dispatch(ctx context.Context) {
	q := sqs.NewFromConfig(f.cfg)
	for ctx.Err() == nil {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.st.QueueURL), MaxNumberOfMessages: 5, WaitTimeSeconds: 1})
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(f.log, "dispatch: ReceiveMessage: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		for _, m := range out.Messages {
			err := f.app.HandleMessage(ctx, aws.ToString(m.Body))
			f.app.Drain()
			if err != nil {
				fmt.Fprintf(f.log, "dispatch: %v (left for redelivery)\n", err)
				continue
			}
			q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.st.QueueURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// watchExecutions is the events function's EventBridge rule: every poll
// it describes the execution of each run recorded running, and hands one
// that has ended to ExecutionEnded.
func (f *Functions) watchExecutions(ctx context.Context, poll time.Duration) {
	f.aborted = map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
		runs, err := f.events.Store.ListRuns(ctx, 200)
		if err != nil {
			continue
		}
		for _, r := range runs {
			// A run cancelled (recorded interrupted) whose execution moto
			// still reports running — moto aborts a waiting execution only
			// when its task wakes — is delivered as AWS delivers it: ABORTED.
			stopped := r.Status == stratus.RunInterrupted && !f.aborted[r.Execution]
			if (stratus.RunTerminal(r.Status) && !stopped) || r.Execution == "" {
				continue
			}
			x, err := f.app.Tokens.DescribeExecution(ctx, r.Execution)
			if err != nil {
				continue
			}
			if stopped {
				// Delivered either way: the events function stops the
				// workers of the run's canceled steps even when the run
				// is recorded ended already.
				f.aborted[r.Execution] = true
				if !x.Done() {
					x.Status, x.StopDate = executor.StatusAborted, time.Now()
				}
			} else if !x.Done() {
				continue
			}
			if err := f.events.ExecutionEnded(ctx, x); err != nil {
				fmt.Fprintf(f.log, "events: run %s: %v\n", r.ID, err)
			}
		}
	}
}

// startPool starts o.PoolRunners pooled runners on each of the stack's
// pool queues: `self runner pool --queue URL --profile P` in a fresh
// directory (its working directory, HOME and work root), with what a
// Fargate task of the pool's service has — fargateEnv, the region and
// credentials for its queue (moto's: any) — and its log in pool.log there.
// As an ECS service does, a runner that exits while the stand-in serves is
// replaced (its exit said in the functions' log).
func (f *Functions) startPool(cfg aws.Config, self string, o ServeOptions) error {
	if o.PoolRunners <= 0 || f.st.PoolQueueURL == "" {
		return nil
	}
	endpoint := aws.ToString(cfg.BaseEndpoint)
	for _, p := range []struct{ profile, url string }{{"offline", f.st.PoolQueueURL}, {"online", f.st.PoolNetworkQueueURL}} {
		for i := 1; i <= o.PoolRunners; i++ {
			dir := filepath.Join(o.WorkRoot, fmt.Sprintf("pool-%s-%d", p.profile, i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// The stand-in stops its runners within 10 s: a step under way
			// gets 5 of them (a Fargate runner's --grace is 100 s of 120).
			args := []string{"runner", "pool", "--queue", p.url, "--profile", p.profile, "--work-root", dir, "--grace", "5s"}
			env := append(fargateEnv(), "HOME="+dir, "AWS_ENDPOINT_URL="+endpoint, "AWS_REGION="+cfg.Region,
				"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
			r := &pooled{dir: dir, start: func() (*exec.Cmd, error) {
				logf, err := os.OpenFile(filepath.Join(dir, "pool.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return nil, err
				}
				defer logf.Close() // the runner holds its own
				cmd := exec.Command(self, args...)
				cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, logf, logf, env
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
				return cmd, cmd.Start()
			}}
			if err := r.run(f.log); err != nil {
				return fmt.Errorf("start a pooled runner: %w", err)
			}
			f.pool = append(f.pool, r)
		}
	}
	return nil
}

// stopPool ends the pooled runners as ECS ends a service's tasks: SIGTERM
// (a step under way is stopped), then SIGKILL to the group after 10 s.
func (f *Functions) stopPool() {
	for _, p := range f.pool {
		p.stop()
	}
	for _, p := range f.pool {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.mu.Lock()
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			p.mu.Unlock()
			<-p.done
		}
	}
	f.pool = nil
}

// Stop stops the workers still running, then the functions.
func (f *Functions) Stop() {
	f.stopPool()
	f.cancel() // the agent stops the tasks still running
	f.srv.Close()
	f.wg.Wait()
}

// Fargate is the dispatch function's launcher on the stand-in: RunTask,
// StopTask and the rest go to the ECS stand-in as on AWS; Agent plays
// Fargate and starts what RunTask placed there.
type Fargate struct {
	ecs *ecs.Launcher
	// Agent starts the stand-in's tasks (Serve runs it).
	Agent *fargate.Agent
}

var _ launch.TaskStopper = (*Fargate)(nil)

// Launch sends RunTask to the stand-in; the agent starts the task.
func (l *Fargate) Launch(ctx context.Context, s launch.Spec) (string, error) {
	return l.ecs.Launch(ctx, s)
}

// Stop stops the task on the stand-in; the agent stops what runs it.
func (l *Fargate) Stop(ctx context.Context, id string) error {
	return l.ecs.Stop(ctx, id)
}

// StopTask stops the workers of a dispatch task (the stop message, the
// events function), found on the stand-in by startedBy.
func (l *Fargate) StopTask(ctx context.Context, taskID string) error {
	return l.ecs.StopTask(ctx, taskID)
}
