//go:build !slim

package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus/internal/launch/local"
	"github.com/stratusflow/stratus/internal/logging"
	sqsqueue "github.com/stratusflow/stratus/internal/queue/sqs"
	"github.com/stratusflow/stratus/internal/reaper"
	"github.com/stratusflow/stratus/internal/runner"
)

// credentialVars are the environment variables through which the AWS SDK
// finds credentials. A pool runner reads them once, at start, and removes
// them from its environment, so no engine inherits them
// (README.md § Warm runners (pool mode): an engine's credential is its step's
// handle only).
var credentialVars = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
}

// runRunnerPool is `stratus runner pool` once its flags are checked.
func runRunnerPool(o *RunnerPoolOptions) error {
	// Before anything else (docs/security.md § A pooled runner's AWS
	// credentials): no file it inherited reaches an engine; no process of
	// this runner holds a capability (this one re-executes itself without
	// any); and its memory and environment — the credentials' variables
	// are in the latter for its whole life, whatever Unsetenv does — are
	// unreadable to every process of its user that has none: its engines.
	if err := runner.CloseInheritedFiles(); err != nil {
		return fmt.Errorf("%w: %v", runner.ErrPoolSetup, err)
	}
	if err := runner.DropPrivileges(); err != nil {
		return fmt.Errorf("%w: %v", runner.ErrPoolSetup, err)
	}
	if err := runner.ProtectCredentials(); err != nil {
		return fmt.Errorf("%w: make this runner non-dumpable (prctl PR_SET_DUMPABLE), without which its engines could read its AWS credentials: %v", runner.ErrPoolSetup, err)
	}
	// The first SIGTERM or Ctrl-C stops taking steps (the one under way
	// has --grace); a second ends it at once.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		stop()
		<-sigs
		close(force)
	}()
	log := logging.New(o.IO.Err, "runner-pool")
	if os.Geteuid() == 0 {
		log.Warn("this runner runs as root: its engines run as root too, without any capability, so they cannot read its memory or environment, but they can change root's files on this host; run a pool as an unprivileged user (the runner image's is uid 10001)")
	}
	var opts []func(*awsconfig.LoadOptions) error
	if ep := queueEndpoint(o.Queue); ep != "" && os.Getenv("AWS_ENDPOINT_URL") == "" && os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		// A queue outside AWS (moto, LocalStack) is reached where its URL
		// says, as the URL of an AWS queue names its Region's endpoint.
		opts = append(opts, awsconfig.WithBaseEndpoint(ep))
	}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		if r := queueRegion(o.Queue); r != "" {
			opts = append(opts, awsconfig.WithRegion(r))
		}
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("AWS SDK configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // a stand-in's queue URL names no region; it answers in any
	}
	if cfg.BaseEndpoint != nil && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "") // a stand-in takes any
	}
	if awsConfigHook != nil {
		awsConfigHook(&cfg)
	}
	// The credentials are resolved now, then their variables leave this
	// process's environment, which engines inherit (the kernel's copy,
	// /proc/PID/environ, keeps them: ProtectCredentials above guards it).
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return fmt.Errorf("AWS credentials for the queue: %w", err)
	}
	for _, v := range credentialVars {
		os.Unsetenv(v)
	}
	if err := runner.BecomeSubreaper(); err != nil {
		log.Warn(fmt.Sprintf("could not become the subreaper of the steps' processes: %v", err))
	}
	q, err := sqsqueue.New(awssqs.NewFromConfig(cfg), o.Queue)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The reaper ends every engine's process group should this process
	// die, SIGKILL included (on ECS the task's end does; on another host
	// nothing else would): the same reaper an embedded run has.
	name, args := local.RunnerFor(self)
	rp, err := reaper.Start(name, append(args, reaper.Arg)...)
	if err != nil {
		log.Warn(fmt.Sprintf("no reaper (%v): an engine's children may outlive this runner if it is killed", err))
	} else {
		defer rp.Close()
		ctx = reaper.NewContext(ctx, rp)
	}
	log.Info(fmt.Sprintf("polling %s for %s steps", o.Queue, o.Profile))
	err = runner.Pool(ctx, runner.PoolOptions{Queue: q, Profile: o.Profile, WorkRoot: o.WorkRoot, Self: self,
		Log: log, MaxSteps: o.MaxSteps, Grace: o.Grace, Force: force, Reap: true})
	log.Info("stopped")
	return poolExit(err)
}

// poolExit is the exit of `stratus runner pool` after runner.Pool
// returned err: 2 for a setup it cannot run with, 5 (ExitSpooled, as a
// runner's) once a report could not be delivered and was spooled (the
// pool stops: README § Warm runners), 1 for any other error.
func poolExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, runner.ErrPoolSetup):
		return usageError{err}
	case errors.Is(err, runner.ErrSpooled):
		return &exitError{code: ExitSpooled, err: err}
	}
	return err
}

// queueEndpoint is the scheme and host of a queue URL outside AWS (moto,
// LocalStack: http://127.0.0.1:5000/123456789012/q), "" for an AWS one.
func queueEndpoint(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil || u.Host == "" || strings.HasSuffix(u.Hostname(), ".amazonaws.com") || strings.HasSuffix(u.Hostname(), ".amazonaws.com.cn") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// queueRegion is the region an SQS queue URL names
// (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME), "" for any other.
func queueRegion(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) >= 4 && parts[0] == "sqs" && parts[2] == "amazonaws" {
		return parts[1]
	}
	return ""
}
