//go:build !slim

package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/devstack/fargate"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/launch"
)

func runDevAWS(o *DevAWSOptions) error {
	if o.MaxConcurrentTasks < 1 || o.MaxConcurrentTasks > awsapp.MaxConcurrentTasks {
		return usageError{fmt.Errorf("--max-concurrent-tasks %d: valid: 1 to %d (template.yaml MaxConcurrentTasks)", o.MaxConcurrentTasks, awsapp.MaxConcurrentTasks)}
	}
	co := devstack.CreateOptions{HeartbeatSeconds: o.HeartbeatSeconds, Pool: o.Pool > 0, PoolPickupSeconds: int((o.PoolPickup + time.Second - 1) / time.Second)}
	if o.Template != "" {
		b, err := os.ReadFile(o.Template)
		if err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		co.Template = b
		// sam deploy reads samconfig.toml from the template's directory.
		if sc, err := os.ReadFile(filepath.Join(filepath.Dir(o.Template), "samconfig.toml")); err == nil {
			co.SAMConfig = sc
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "stratus-dev-aws-")
	if err != nil {
		return err
	}
	// Its moto data, logs and workers' directories go with the stand-in,
	// however it ends (Ctrl-C and SIGTERM end ctx): deferred first, so it
	// runs after moto, the functions and the runners have stopped.
	defer os.RemoveAll(dir)
	name := o.Name
	if name == "" {
		b := make([]byte, 3)
		rand.Read(b)
		name = "stratus-dev-" + hex.EncodeToString(b)
	}
	if o.Stack != "" {
		name = o.Stack
	}
	self := o.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	lo := devstack.LambdaOptions{Bootstraps: o.Lambdas, RIE: o.RIE, Template: co.Template}
	if lo.Bootstraps == "" {
		lo.Bootstraps = filepath.Join(filepath.Dir(self), "lambdas")
	}
	if lo.RIE == "" {
		lo.RIE = filepath.Join(filepath.Dir(self), "aws-lambda-rie")
	}
	if err := lo.Check(); err != nil {
		if o.Template != "" && !errors.Is(err, devstack.ErrNoLambdas) {
			return fmt.Errorf("--template %s: %w", o.Template, err)
		}
		return err
	}
	code, err := lo.Code()
	if err != nil {
		return err
	}
	// The worker API listens where every worker reaches it: with
	// containers, on the host's address on the offline network (the
	// online one routes there too); with processes, on loopback.
	host := "127.0.0.1"
	var cr *devstack.ContainerRunners
	if o.Runners == "container" {
		eng, err := container.Connect(ctx)
		if err != nil {
			return fmt.Errorf("--runners container: %w; or run each task as a local process: --runners process", err)
		}
		defer eng.Close()
		if cr, err = devstack.StartContainerRunners(ctx, eng, o.Image, name); err != nil {
			return err
		}
		defer func() {
			if err := cr.Close(); err != nil {
				fmt.Fprintf(o.IO.Err, "stratus dev aws: %v (the next start of stack %s removes it)\n", err, name)
			}
		}()
		host = cr.Gateway
	}
	endpoint := o.EndpointURL
	if endpoint == "" {
		m, err := moto.Start(o.Port, dir)
		if err != nil {
			return err
		}
		defer m.Stop()
		endpoint = m.URL
		fmt.Fprintf(o.IO.Err, "stratus dev aws: moto serves on %s (its log: %s)\n", endpoint, m.Log)
	}
	// A worker reaches S3 (the presigned URLs of its bundles and ctx
	// files) at the endpoint the functions sign for: with containers, the
	// stand-in's address on their network, forwarded to moto.
	fnEndpoint := endpoint
	if cr != nil {
		if fnEndpoint, err = cr.Forward(ctx, endpoint); err != nil {
			return err
		}
	}
	ca, err := devstack.NewCA(filepath.Join(dir, "ca"), name, host, "127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	cfg := moto.Config(endpoint)
	ln, err := listenFor(ctx, o, cfg, host)
	if err != nil {
		return err
	}
	var st *devstack.Stack
	if o.Stack != "" {
		st, err = loadStack(ctx, o, cfg)
	} else {
		st, err = createStack(ctx, o, cfg, name, ln, co, code)
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w (on %s)", err, endpoint)
	}
	for _, w := range st.Warnings {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: --heartbeat-seconds: %s\n", w)
	}
	logPath := filepath.Join(dir, "functions.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	so := devstack.ServeOptions{Self: self, WorkRoot: filepath.Join(dir, "workers"), Log: logf,
		PoolRunners: o.Pool, Lambdas: lo, CA: ca, FunctionsEndpoint: fnEndpoint}
	so.Runners = devstack.ProcessRunners(self, so)
	if cr != nil {
		so.Runners = cr.Backend(ca)
	}
	so.OnTaskStarted = func(c fargate.Container, r fargate.Running) {
		step := c.TaskID
		for _, kv := range c.Env {
			if v, ok := strings.CutPrefix(kv, launch.EnvTaskID+"="); ok {
				step = v
			}
		}
		how := r.Where()
		if cr == nil {
			how += " (--runners process: a local process, not a container of " + c.Image + ")"
		}
		fmt.Fprintf(o.IO.Err, "stratus dev aws: task %s of step %s runs in %s\n", c.TaskID, step, how)
	}
	f, err := devstack.Serve(ctx, cfg, st, tls.NewListener(ln, ca.TLS), so)
	if err != nil {
		return err
	}
	defer func() {
		f.Stop()
		// What the figures are: each function's cold starts and
		// memory (the emulator's REPORT lines), each task's start to its
		// first call of the worker API.
		for _, s := range f.Reports() {
			fmt.Fprintf(o.IO.Err, "stratus dev aws: lambda %s\n", s)
		}
		fetches := f.FirstFetches()
		for _, step := range slices.Sorted(maps.Keys(fetches)) {
			fmt.Fprintf(o.IO.Err, "stratus dev aws: step %s: %s start to first worker API call %d ms\n", step, so.Runners.Name(), fetches[step].Milliseconds())
		}
		if cr != nil && len(fetches) > 0 {
			// Its anchor, measured now: the same engine starting a
			// container of the same image whose program is `true`.
			if floor, err := cr.Anchor(context.Background(), o.Image, 3); err == nil {
				all := slices.Sorted(maps.Values(fetches))
				med := all[len(all)/2]
				fmt.Fprintf(o.IO.Err, "stratus dev aws: anchor: a container of %s running true, created to exited: %d ms (median of 3); the tasks' median, %d ms over %d, is %.2fx it\n",
					o.Image, floor.Milliseconds(), med.Milliseconds(), len(all), float64(med)/float64(max(floor, time.Millisecond)))
			}
		}
	}()
	// The worker API serves TLS with the stand-in's own CA: --ca-bundle
	// makes the CLI trust it (a gate's reply goes there).
	flags := fmt.Sprintf("--target aws --endpoint-url %s --region %s --stack %s --ca-bundle %s", endpoint, moto.Region, name, ca.CertFile)
	fmt.Fprintln(o.IO.Out, flags)
	fmt.Fprintf(o.IO.Err, "stratus dev aws: stack %s, worker API %s (TLS: the stack's CA, %s), functions' log %s, workers in %s\n", name, st.APIURL, ca.CertFile, logPath, filepath.Join(dir, "workers"))
	if cr != nil {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: each task runs as a container of its task definition's image (%s) on %s\n", o.Image, eng(cr))
	} else {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: --runners process: each task runs as a local stratus runner process, sharing this machine's files and network, not as a container of %s\n", o.Image)
	}
	if o.Pool > 0 {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: runner pool: %s per network profile on %s and %s (their logs: %s)\n",
			english.Plural(o.Pool, "pooled runner"), st.PoolQueueURL, st.PoolNetworkQueueURL, filepath.Join(dir, "workers", "pool-*", "pool.log"))
	}
	fmt.Fprintf(o.IO.Err, "stratus dev aws: try: stratus run TASK.md --dir DIR %s   (Ctrl-C stops the stand-in)\n", flags)
	if o.ready != nil {
		o.ready(flags)
	}
	select {
	case <-ctx.Done():
	case <-o.stop:
	}
	fmt.Fprintf(o.IO.Err, "stratus dev aws: stopping; removing %s\n", dir)
	return nil
}

// eng names the engine the containers run on.
func eng(cr *devstack.ContainerRunners) string { return cr.Engine.Host() }

// createStack deploys the stack dev aws serves (Create), its worker API
// listening on ln, with the engine keys of this environment as the task
// definitions' secrets, the runner image o.Image and the functions' code.
func createStack(ctx context.Context, o *DevAWSOptions, cfg aws.Config, name string, ln net.Listener, co devstack.CreateOptions, code map[string]string) (*devstack.Stack, error) {
	// The engine keys set here reach the runners as a deployed stack's
	// do: a secret each, named by the task definitions.
	params, err := devstack.CreateEngineSecrets(ctx, cfg, name, os.Getenv)
	if err != nil {
		return nil, err
	}
	for p, arn := range params {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: %s: the secret %s, delivered by the task definitions\n", p, arn)
	}
	if o.GitTokenFile != "" {
		b, err := os.ReadFile(o.GitTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--git-token-file: %w", err)
		}
		arn, err := devstack.CreateGitTokenSecret(ctx, cfg, name, string(b))
		if err != nil {
			return nil, fmt.Errorf("--git-token-file %s: %w", o.GitTokenFile, err)
		}
		params[devstack.GitTokenParameter] = arn
		fmt.Fprintf(o.IO.Err, "stratus dev aws: %s: the secret %s, delivered to the publisher alone\n", devstack.GitTokenParameter, arn)
	}
	params["ImageUri"] = o.Image
	params["MaxConcurrentTasks"] = strconv.Itoa(o.MaxConcurrentTasks)
	co.Parameters = params
	co.Bootstraps = code
	st, err := devstack.Create(ctx, cfg, name, "https://"+ln.Addr().String(), co)
	if err != nil {
		return nil, fmt.Errorf("create the stack: %w", err)
	}
	return st, nil
}

// loadStack reads the existing stack o.Stack (Load), one an earlier dev
// aws deployed on this stand-in: its worker API listens at the address of
// the stack's ApiUrl output (listenFor).
func loadStack(ctx context.Context, o *DevAWSOptions, cfg aws.Config) (*devstack.Stack, error) {
	st, err := devstack.Load(ctx, cfg, o.Stack)
	if err != nil {
		return nil, err
	}
	if o.Pool > 0 && st.PoolQueueURL == "" {
		return nil, fmt.Errorf("--pool %d: the stack %s has no runner pool (RunnerPool off)", o.Pool, o.Stack)
	}
	return st, nil
}

// listenFor is where the worker API listens: for a new stack, any port of
// host; for --stack, the address of the stack's ApiUrl output (an https
// URL of host, as dev aws deploys it).
func listenFor(ctx context.Context, o *DevAWSOptions, cfg aws.Config, host string) (net.Listener, error) {
	if o.Stack == "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("listen for the worker API: %w", err)
		}
		return ln, nil
	}
	st, err := devstack.Load(ctx, cfg, o.Stack)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(st.APIURL)
	if err != nil || u.Scheme != "https" || u.Hostname() != host {
		return nil, fmt.Errorf("the stack %s's ApiUrl output is %q: dev aws --stack serves a stack whose worker API is this stand-in's (https://%s:PORT, the ApiUrlOverride dev aws gives with --runners %s)", o.Stack, st.APIURL, host, o.Runners)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("listen for the stack %s's worker API at its ApiUrl %s: %w", o.Stack, st.APIURL, err)
	}
	return ln, nil
}
