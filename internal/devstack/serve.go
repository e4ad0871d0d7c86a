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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/fargate"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/httpapi"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsapp"
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
	// executions, and the claim function's S3 rule stand-in for task
	// files written; 0 = 1 s.
	EventsPoll time.Duration
	// ClaimSchedule is the period of the claim function's schedule
	// stand-in; 0 = DefaultClaimSchedule.
	ClaimSchedule time.Duration
	// PoolRunners, when the stack has a pool (CreateOptions.Pool), is how
	// many `stratus runner pool` processes serve each network profile's
	// queue (README.md § Warm runners (pool mode)), each in a fresh directory
	// of its own under WorkRoot with a Fargate task's environment and moto's
	// credentials.
	PoolRunners int
	// Lambdas locate the functions' bootstraps and the emulator.
	Lambdas LambdaOptions
	// Runners runs each task RunTask places (nil: a
	// fargate.ProcessBackend of Self in WorkRoot).
	Runners fargate.Backend
	// FunctionsEndpoint is where the functions' SDK calls go (and what
	// the URLs they presign name): "" = cfg's endpoint.
	FunctionsEndpoint string
	// CA, when set, is the CA whose certificate the worker API serves:
	// runners started as local processes trust it (CA.Env).
	CA *CA
	// OnTaskStarted, when set, is told each task the Fargate stand-in
	// started (the demo prints the image each step ran in).
	OnTaskStarted func(fargate.Container, fargate.Running)
}

// DefaultClaimSchedule is the period at which the stand-in ticks the claim
// function's Schedule event: the template's rate(5 minutes) shortened, so
// that the backstop shows within a test's or a demo's patience.
const DefaultClaimSchedule = 30 * time.Second

// Functions plays, on this machine, what a stand-in such as moto cannot
// run, from what the stack deployed: its Lambda functions as shipped —
// each `bootstrap` under the Lambda Runtime Interface Emulator with the
// environment, memory size and timeout the stack gives it (functions.go);
// the worker API function behind the HTTP API's routes (API Gateway
// payload 2.0), the dispatch function behind its queue's event source
// mapping, the events function fed each execution's status change (moto
// sends no EventBridge events: the running runs' executions are polled
// and matched against the function's rule), the claim function behind its
// queue's event source mapping, its S3 rule (the bucket's pending task
// files polled: moto sends S3 no further than its own notifications) and
// its schedule (every ServeOptions.ClaimSchedule) — and Fargate (Agent): each
// task ecs:RunTask places on the stand-in runs, through ServeOptions.Runners,
// with the environment its task definition and RunTask's overrides give
// it, nothing else of the operator's, and its stop goes to the dispatch
// queue as the stack's WorkerTaskStoppedRule sends it. No handler runs in
// this process.
type Functions struct {
	st  *Stack
	cfg aws.Config
	// reader reads the store and describes executions for the events
	// rule's stand-in (the events function itself runs under the
	// emulator).
	reader *awsapp.App
	Agent  *fargate.Agent
	fns    map[string]*lambdas.Function
	specs  []lambdas.FunctionSpec
	rule   lambdas.ExecutionRule
	srv    *http.Server
	log    io.Writer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   []*pooled // the pooled runners (ServeOptions.PoolRunners)
	fetch  *firstFetch
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
// the worker API on ln (whose address st.APIURL names), and the Fargate
// stand-in. Stop ends them. Errors: ErrNoLambdas (the bootstraps or the
// emulator are not built), a function that would not start, the
// stand-in's API.
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
	if err := o.Lambdas.Check(); err != nil {
		return nil, err
	}
	tmpl := o.Lambdas.template()
	routes, err := lambdas.RoutesFromTemplate(tmpl, WorkerAPIFunction)
	if err != nil {
		return nil, err
	}
	mapping, err := lambdas.SQSMappingFromTemplate(tmpl, DispatchFunction)
	if err != nil {
		return nil, err
	}
	rule, err := lambdas.ExecutionRuleFromTemplate(tmpl, EventsFunction)
	if err != nil {
		return nil, err
	}
	env := map[string]string{awsapp.EnvTable: st.Table, awsapp.EnvBucket: st.Bucket, awsapp.EnvBucketPrefix: "stratus/"}
	c, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	f := &Functions{st: st, cfg: cfg, log: log, rule: rule, fetch: &firstFetch{}}
	if f.reader, err = awsapp.NewEvents(c, cfg, awsapp.Options{Log: io.Discard}); err != nil {
		return nil, err
	}
	backend := o.Runners
	if backend == nil {
		backend = ProcessRunners(self, o)
	}
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &moto.ECSClient{}
	f.Agent = &fargate.Agent{ECS: awsecs.NewFromConfig(ecsCfg), Secrets: awssm.NewFromConfig(cfg), IAM: awsiam.NewFromConfig(cfg), Cluster: st.Cluster, Log: log,
		OnlineSubnets: st.NetworkSubnets, Backend: backend}
	// The stack's WorkerTaskStoppedRule: a stopped task's state change
	// goes to the dispatch queue.
	q := sqs.NewFromConfig(cfg)
	f.Agent.OnStopped = func(ctx context.Context, ev json.RawMessage) {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURL), MessageBody: aws.String(string(ev))}); err != nil {
			fmt.Fprintf(log, "fargate: the task state change could not be queued: %v\n", err)
		}
	}
	f.Agent.OnStarted = func(tc fargate.Container, r fargate.Running) {
		f.fetch.start(tc)
		if o.OnTaskStarted != nil {
			o.OnTaskStarted(tc, r)
		}
	}
	if f.fns, f.specs, err = startFunctions(ctx, cfg, st, o.Lambdas, o.FunctionsEndpoint, log); err != nil {
		return nil, err
	}
	claim, err := claimSources(tmpl, st, f.fns[ClaimFunction], cfg.Region)
	if err != nil {
		f.stopFunctions()
		return nil, err
	}
	operator, err := OperatorPrincipal(ctx, cfg)
	if err != nil {
		f.stopFunctions()
		return nil, err
	}
	f.srv = httpapi.NewServer(f.fetch.wrap(lambdas.APIFront(routes, f.fns[WorkerAPIFunction],
		lambdas.WithIAM(lambdas.IAM{Region: cfg.Region, Principals: []lambdas.IAMPrincipal{operator}}))))
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	poll := o.EventsPoll
	if poll <= 0 {
		poll = time.Second
	}
	// The pool's runners: with containers, its services' tasks, placed as
	// ECS places them and run by the Fargate stand-in; with processes,
	// local `stratus runner pool` processes.
	_, processes := backend.(*fargate.ProcessBackend)
	if !processes && o.PoolRunners > 0 {
		f.Agent.TaskRoleEnv = []string{"AWS_ENDPOINT_URL=" + o.FunctionsEndpoint, "AWS_REGION=" + cfg.Region, "AWS_DEFAULT_REGION=" + cfg.Region,
			"AWS_ACCESS_KEY_ID=" + PoolAccessKeyID, "AWS_SECRET_ACCESS_KEY=" + PoolSecretAccessKey}
		if o.FunctionsEndpoint == "" {
			f.Agent.TaskRoleEnv[0] = "AWS_ENDPOINT_URL=" + aws.ToString(cfg.BaseEndpoint)
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			runServices(lctx, awsecs.NewFromConfig(ecsCfg), st, o.PoolRunners, time.Second, log)
		}()
	} else if err := f.startPool(cfg, self, o); err != nil {
		cancel()
		f.stopPool()
		f.stopFunctions()
		return nil, err
	}
	f.wg.Add(4)
	go func() { defer f.wg.Done(); f.Agent.Run(lctx) }()
	go func() { defer f.wg.Done(); f.srv.Serve(ln) }()
	go func() {
		defer f.wg.Done()
		lambdas.RunSQSSource(lctx, q, st.QueueURL, f.fns[DispatchFunction], mapping, lambdas.SQSOptions{Pollers: 2, OnError: func(err error) {
			if lctx.Err() == nil {
				fmt.Fprintf(log, "dispatch: %v\n", err)
			}
		}})
	}()
	go func() { defer f.wg.Done(); f.watchExecutions(lctx, poll) }()
	if claim != nil {
		every := o.ClaimSchedule
		if every <= 0 {
			every = DefaultClaimSchedule
		}
		claim.run(lctx, &f.wg, q, awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true }), poll, every, log)
	}
	return f, nil
}

// claimSource is the task pool's claim function with its three event
// sources as the template declares them (README.md § Task pool).
type claimSource struct {
	fn       *lambdas.Function
	queueURL string
	mapping  lambdas.SQSMapping
	bucket   string // the rule's bucket, physical name
	rule     lambdas.ObjectCreatedRule
	ruleARN  string // the schedule rule's ARN
	region   string
}

// claimSources reads the claim function's events from the template, for a
// stack that has the function and its queue; nil when it has not (a stack
// of an older template). Errors: the template's events are not the ones
// emulated (an SQS event, an S3 Object Created rule, a schedule).
func claimSources(tmpl []byte, st *Stack, fn *lambdas.Function, region string) (*claimSource, error) {
	if fn == nil || st.ClaimQueueURL == "" {
		return nil, nil
	}
	c := &claimSource{fn: fn, queueURL: st.ClaimQueueURL, region: region}
	var err error
	if c.mapping, err = lambdas.SQSMappingFromTemplate(tmpl, ClaimFunction); err != nil {
		return nil, err
	}
	if c.rule, err = lambdas.ObjectCreatedRuleFromTemplate(tmpl, ClaimFunction); err != nil {
		return nil, err
	}
	if c.bucket = st.Resources[c.rule.Bucket]; c.rule.Bucket == "" || c.bucket == "" {
		return nil, fmt.Errorf("%s event %s: its bucket %q is no resource of the stack %s", ClaimFunction, c.rule.Event, c.rule.Bucket, st.Name)
	}
	event, _, err := lambdas.ScheduleFromTemplate(tmpl, ClaimFunction)
	if err != nil {
		return nil, err
	}
	// SAM names the schedule's rule <function><event>; its physical id is
	// the rule's name (an ARN on some stand-ins).
	c.ruleARN = st.Resources[ClaimFunction+event]
	if !strings.HasPrefix(c.ruleARN, "arn:") {
		c.ruleARN = "arn:aws:events:" + region + ":123456789012:rule/" + c.ruleARN
	}
	return c, nil
}

// run starts the claim's sources: one poller of its queue (the function's
// reserved concurrency is 1), the S3 rule every poll, the schedule every
// period; each reports to log.
func (c *claimSource) run(ctx context.Context, wg *sync.WaitGroup, q *sqs.Client, s3c *awss3.Client, poll, period time.Duration, log io.Writer) {
	say := func(what string) func(error) {
		return func(err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(log, "claim (%s): %v\n", what, err)
			}
		}
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		lambdas.RunSQSSource(ctx, q, c.queueURL, c.fn, c.mapping, lambdas.SQSOptions{Pollers: 1, OnError: say("queue")})
	}()
	go func() {
		defer wg.Done()
		lambdas.RunObjectCreatedSource(ctx, s3c, c.bucket, c.region, c.rule, c.fn, poll, say("task files"))
	}()
	go func() {
		defer wg.Done()
		lambdas.RunSchedule(ctx, c.fn, c.ruleARN, c.region, period, say("schedule"))
	}()
}

// OperatorPrincipal is the AWS identity the stand-in's worker API takes a
// SigV4-signed request from on an AWS_IAM route (the operator's gate
// replies): the stand-in's own credentials, cfg's — those moto takes, and
// those `stratus … --target aws --endpoint-url` signs with when no
// AWS_ACCESS_KEY_ID or AWS_PROFILE is set (test/test) — named as moto's
// STS names the caller of a key it did not issue (GetCallerIdentity:
// arn:aws:sts::123456789012:user/moto, user id AKIAIOSFODNN7EXAMPLE).
// Errors: cfg's credentials cannot be read.
func OperatorPrincipal(ctx context.Context, cfg aws.Config) (lambdas.IAMPrincipal, error) {
	c, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return lambdas.IAMPrincipal{}, fmt.Errorf("the stand-in's credentials: %w", err)
	}
	return lambdas.IAMPrincipal{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken,
		AccountID: "123456789012", UserARN: "arn:aws:sts::123456789012:user/moto", UserID: "AKIAIOSFODNN7EXAMPLE"}, nil
}

// EngineSecrets are the variables the stack's task definition fills from
// Secrets Manager (template.yaml: AnthropicApiKeySecretArn,
// OpenAIApiKeySecretArn, DeepseekSecretArn); EngineSettings are what a
// runner image built for an engine would set (its model endpoint, its
// config dir). The stand-in passes both from the operator's environment
// when set, so an engine — a real CLI against the scripted model server
// included — runs on it as on Fargate.
var (
	EngineSecrets  = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK"}
	EngineSettings = []string{"ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CONFIG_DIR", "CODEX_HOME"}
)

// ProcessRunners is the Fargate stand-in's backend of --runners process:
// each task a local `self runner` in a directory of its own under
// o.WorkRoot, with fargateEnv and what makes it trust o.CA.
func ProcessRunners(self string, o ServeOptions) *fargate.ProcessBackend {
	return &fargate.ProcessBackend{Self: self, Root: o.WorkRoot, Env: o.processEnv()}
}

// processEnv is fargateEnv and what makes a process trust o.CA.
func (o ServeOptions) processEnv() []string {
	env := fargateEnv()
	if o.CA != nil {
		env = append(env, o.CA.Env())
	}
	return env
}

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

// watchExecutions is the EventBridge rule of the events function: every
// poll it describes the execution of each run not yet delivered and, once
// it has ended and the function's rule matches it, invokes the function
// with its "Step Functions Execution Status Change" event, once per
// execution (a failed invocation is tried again next poll).
func (f *Functions) watchExecutions(ctx context.Context, poll time.Duration) {
	delivered := map[string]bool{} // execution ARNs
	events := f.fns[EventsFunction]
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
		runs, err := f.reader.Store.ListRuns(ctx, 200)
		if err != nil {
			continue
		}
		for _, r := range runs {
			if r.Execution == "" || delivered[r.Execution] {
				continue
			}
			x, err := f.reader.Tokens.DescribeExecution(ctx, r.Execution)
			if err != nil {
				continue
			}
			// A run cancelled (recorded interrupted) whose execution moto
			// still reports running — moto aborts a waiting execution only
			// when its task wakes — is delivered as AWS delivers it: ABORTED.
			if r.Status == stratus.RunInterrupted && !x.Done() {
				x.Status, x.StopDate = executor.StatusAborted, time.Now()
			} else if !x.Done() {
				continue
			}
			if !f.rule.Matches(x, f.st.Name) {
				delivered[r.Execution] = true
				fmt.Fprintf(f.log, "events: the %s execution of run %s is not one the events rule matches; not delivered\n", x.Status, r.ID)
				continue
			}
			ev, err := lambdas.ExecutionStatusChange(x, "", f.cfg.Region)
			if err == nil {
				_, err = events.Invoke(ctx, ev)
			}
			if err != nil {
				fmt.Fprintf(f.log, "events: run %s: %v (tried again)\n", r.ID, err)
				continue
			}
			delivered[r.Execution] = true
		}
	}
}

// PoolAccessKeyID and PoolSecretAccessKey are the AWS credentials the
// stand-in gives its pooled runners, where ECS gives a pool service's task
// its task role's (the stand-in's services take any). They are found
// nowhere else — not "test", which every other client of the stand-in
// uses — so a test can look for them wherever an engine could read them
// (docs/security.md § A pooled runner's AWS credentials).
const (
	PoolAccessKeyID     = "AKIASTRATUSDEVPOOL01"
	PoolSecretAccessKey = "stratus-dev-pool-runner-secret-7f3a9c1e"
)

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
			env := append(o.processEnv(), "HOME="+dir, "AWS_ENDPOINT_URL="+endpoint, "AWS_REGION="+cfg.Region,
				"AWS_ACCESS_KEY_ID="+PoolAccessKeyID, "AWS_SECRET_ACCESS_KEY="+PoolSecretAccessKey)
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
	f.stopFunctions()
}

// stopFunctions stops the emulators and their runtimes.
func (f *Functions) stopFunctions() {
	for _, fn := range f.fns {
		fn.Stop()
	}
}

// Reports are the figures of each function's invocations so far (the
// emulator's REPORT lines: init duration, max memory used), beside the
// memory size the stack gives it.
func (f *Functions) Reports() []lambdas.Summary {
	var out []lambdas.Summary
	for _, s := range f.specs {
		fn := f.fns[s.LogicalID]
		if fn == nil {
			continue
		}
		out = append(out, lambdas.Summarize(s.LogicalID, fn.Config().MemoryMB, fn.Reports()))
	}
	return out
}

// FirstFetches are, for each task started so far, how long its container
// took from its start to its runner's first call of the worker API (the
// bootstrap exchange before its prompt fetch), by task id.
func (f *Functions) FirstFetches() map[string]time.Duration { return f.fetch.took() }
