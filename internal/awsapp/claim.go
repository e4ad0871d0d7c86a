package awsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus/internal/awspool"
	"github.com/stratusflow/stratus/internal/executor/sfn"
)

// The claim function (functions/claim) serves the stack's task pool
// (README.md § Task pool): each wake — a message of the claim queue, a task
// file written under tasks/pending/, the schedule — runs one claim
// (awspool.Pool.Tick).

// LoadClaim is what the claim function's main calls: Config from the
// environment, the SDK's default configuration and NewClaim.
func LoadClaim(ctx context.Context, getenv func(string) string, o Options) (*App, error) {
	cfg, awsCfg, err := fromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return NewClaim(cfg, awsCfg, o)
}

// NewClaim builds the part of an App the claim function uses: the DynamoDB
// store, the S3 sink and Step Functions, to start the executions of the
// runs `stratus submit` prepared and to prepare those of task files
// written straight under tasks/pending/ (with Config.Tasks' state machine
// role and prefix: it then creates their state machines), and the pool
// (Config.Tasks: how many at once, which queue). It reads no secret and
// launches no worker. Nothing is called.
// Required: Table and Bucket. Errors: EINVALID naming the variable that
// is missing.
func NewClaim(cfg Config, awsCfg aws.Config, o Options) (*App, error) {
	a, err := newRecords(cfg, awsCfg, o)
	if err != nil {
		return nil, err
	}
	// The role and substitutions let it create the state machine of a run
	// it prepares itself (a task file written straight under
	// tasks/pending/), as `stratus run --target aws` does.
	opts := sfn.Options{}
	if cfg.Tasks.StateMachineRole != "" {
		opts.RoleARN, opts.Substitutions = cfg.Tasks.StateMachineRole, map[string]string{"DispatchQueueUrl": cfg.QueueURL}
	}
	a.Tokens = sfn.New(sfn.NewClient(awsCfg), opts)
	a.region = awsCfg.Region
	return a, nil
}

// Pool is the stack's task pool as this function serves it.
func (a *App) Pool() *awspool.Pool {
	t := a.Config.Tasks
	p := &awspool.Pool{Ports: awspool.Ports{Store: a.Store, Sink: a.Sink, Exec: a.Tokens}, Queue: t.Queue, Max: t.MaxConcurrent, Log: a.Logger}
	if t.StateMachineRole != "" && t.StateMachinePrefix != "" && a.Config.QueueURL != "" {
		p.Machines = awspool.Machines{RoleARN: t.StateMachineRole, Prefix: t.StateMachinePrefix, Region: a.region,
			HeartbeatSeconds: t.HeartbeatSeconds, Deploy: a.Tokens.Deploy}
	}
	return p
}

// Claim is one claim of the pool (awspool.Pool.Tick), logged. Errors:
// Tick's, awspool.ErrBusy among them: the wake is delivered again.
func (a *App) Claim(ctx context.Context) error {
	res, err := a.Pool().Tick(ctx)
	if errors.Is(err, awspool.ErrBusy) {
		a.Logger.Info(err.Error() + "; this wake is delivered again")
		return err
	} else if err != nil {
		return err
	}
	a.Logger.Info(fmt.Sprintf("claim: %d started, %d settled, %d running (at most %d)", len(res.Started), len(res.Settled), res.Running, max(a.Config.Tasks.MaxConcurrent, 1)),
		"started", len(res.Started), "settled", len(res.Settled), "running", res.Running)
	return nil
}

// wakeClaim sends the claim queue a message (why, for its log) when the
// stack has a task pool: a run's end frees a slot of the pool, or a lock
// a pending task waited on.
func (a *App) wakeClaim(ctx context.Context, why string) error {
	if a.claimQueue == nil || a.Config.Tasks.ClaimQueueURL == "" {
		return nil
	}
	body, _ := json.Marshal(map[string]string{"wake": why})
	if _, err := a.claimQueue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(a.Config.Tasks.ClaimQueueURL), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("wake the task pool's claim: %w", err)
	}
	return nil
}
