package awsapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/pool"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/queue"
	sqsqueue "github.com/stratusflow/stratus/internal/queue/sqs"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// App is the AWS side of Stratus built from a Config: the worker service
// and what it runs on.
type App struct {
	Config   Config
	Service  *worker.Service
	Store    *dynamodb.Store
	Sink     *s3sink.Sink
	Tokens   *sfn.Executor
	Launcher launch.Launcher
	// Stopper stops the workers of a step by its task id (the events
	// function's part of the launcher); nil when no cluster is configured.
	Stopper launch.TaskStopper
	Log     io.Writer
	// Logger is the functions' structured log (README.md § Logs): JSON lines
	// on Log, which CloudWatch Logs reads, each with the run_id, step_ref and
	// attempt it concerns.
	Logger *slog.Logger

	apiURLOnce sync.Once
	// claimQueue wakes the task pool's claim (the events function, when
	// Config.Tasks.ClaimQueueURL is set).
	claimQueue *awssqs.Client
	region     string // the SDK configuration's (the claim names state machines in it)
}

// Options change what New builds.
type Options struct {
	// Log receives progress events (one JSON object a line) and warnings;
	// nil = os.Stderr, which the Lambda runtime sends to CloudWatch Logs.
	Log io.Writer
	// Component names the function in each record (internal/logging:
	// "workerapi", "dispatch", "events"); "" = "stratus".
	Component string
	// Launcher replaces the ECS launcher built from Config.ECS: a test, or
	// a run against moto whose workers are local processes.
	Launcher launch.Launcher
	// Commits checks each move of a run's workspace head
	// (worker.Service.Commits): the worker API function gives
	// workspace/bundlecheck; a function that serves no worker API (dispatch)
	// gives none and does not link it.
	Commits worker.CommitChecker
}

// Load is what a function's main calls: Config from the environment, the
// SDK's default configuration (region, credentials and AWS_ENDPOINT_URL
// from the environment, as the Lambda runtime sets them) and New.
func Load(ctx context.Context, getenv func(string) string, o Options) (*App, error) {
	cfg, awsCfg, err := fromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, awsCfg, o)
}

// fromEnv is what each function's Load reads: Config from getenv and the
// SDK's default configuration.
func fromEnv(ctx context.Context, getenv func(string) string) (Config, aws.Config, error) {
	cfg, err := FromEnv(getenv)
	if err != nil {
		return cfg, aws.Config{}, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, awsCfg, fmt.Errorf("AWS SDK configuration: %w", err)
	}
	return cfg, awsCfg, nil
}

// New builds the worker service on DynamoDB (the store; large bodies spill
// to the bucket), S3 (the sink: projection files, reports, run bundles, all
// under Config.BucketPrefix), Step Functions (task tokens), ECS (workers)
// and the HMAC key read from Secrets Manager (one read, at start). A
// run's flow, role files, config and task come from its bundle in the
// bucket (internal/runenv), loaded once per function instance.
//
// Required: Table, Bucket, SecretID and, unless o.Launcher is given, the
// ECS cluster, task definition and subnets. Errors: EINVALID naming the
// variable that is missing; the secret's errors (ENOTFOUND for a missing
// secret, EINVALID for a short key).
func New(ctx context.Context, cfg Config, awsCfg aws.Config, o Options) (*App, error) {
	if err := require(EnvTable, cfg.Table, EnvBucket, cfg.Bucket, EnvSecretID, cfg.SecretID); err != nil {
		return nil, err
	}
	a, err := newRecords(cfg, awsCfg, o)
	if err != nil {
		return nil, err
	}
	sk := a.Sink
	a.Tokens = sfn.New(sfn.NewClient(awsCfg), sfn.Options{})
	a.Launcher = o.Launcher
	if a.Launcher == nil {
		if a.Launcher, err = ecsLauncher(awsCfg, cfg.ECS); err != nil {
			return nil, err
		}
	}
	if cfg.Pool.QueueURL != "" || cfg.Pool.NetworkQueueURL != "" {
		if a.Launcher, err = poolLauncher(awsCfg, cfg.Pool, a.Launcher, a.Store, a.Logger); err != nil {
			return nil, err
		}
	}
	// The one read New makes, once the configuration is known to be whole:
	// the current key and, during a rotation, the previous one.
	keys := newKeyring(secretsmanagerSource(awssm.NewFromConfig(awsCfg), cfg.SecretID))
	key, previous, err := keys.load(ctx)
	if err != nil {
		return nil, err
	}
	a.Service = worker.New(worker.Config{
		Store:          a.Store,
		Sink:           sk,
		Tokens:         a.Tokens,
		Launcher:       a.Launcher,
		Minter:         &captoken.Minter{Key: key, Previous: previous, Lookup: keys.lookup, TTL: cfg.TokenTTL},
		APIURL:         cfg.APIURL,
		Env:            runenv.EnvFunc(sk),
		OnEvent:        a.logEvent,
		Log:            a.Logger,
		ResolveFiles:   false, // the worker resolves an @file: body (docs/architecture.md § Limits)
		MaxBodyBytes:   cfg.MaxBodyBytes,
		MaxUploadBytes: cfg.MaxUploadBytes,
		Commits:        o.Commits,
	})
	if cfg.QueueURL != "" {
		// Observation turns leave the request through the dispatch queue.
		if a.Service.Queue, err = sqsqueue.New(awssqs.NewFromConfig(awsCfg), cfg.QueueURL); err != nil {
			return nil, err
		}
	}
	a.Service.Publish = func(ctx context.Context, run stratus.Run, env *worker.RunEnv) ([]string, error) {
		f, err := report.Collect(ctx, a.Store, run, stratus.RunDone, worker.ReportEnv(env))
		if err != nil {
			return nil, err
		}
		return report.Write(ctx, sink.ForRun(sk, run.ID), f)
	}
	return a, nil
}

// poolLauncher sends steps to the warm runner pool
// (README.md § Warm runners (pool mode)), cold launching those no pooled
// runner takes in time. A runner has taken a step once its bootstrap value is
// gone from the store (TakeHandle).
func poolLauncher(awsCfg aws.Config, p Pool, cold launch.Launcher, st store.Store, log *slog.Logger) (launch.Launcher, error) {
	c := pool.Config{Cold: cold, Pickup: p.Pickup, Log: log,
		Taken: func(ctx context.Context, bootstrap string) (bool, error) {
			_, err := st.GetHandle(ctx, bootstrap)
			if stratus.ErrorCode(err) == stratus.ENOTFOUND {
				return true, nil
			}
			return false, err
		}}
	client := awssqs.NewFromConfig(awsCfg)
	for _, q := range []struct {
		url string
		to  *queue.Queue
	}{{p.QueueURL, &c.Offline}, {p.NetworkQueueURL, &c.Online}} {
		if q.url == "" {
			continue
		}
		sq, err := sqsqueue.New(client, q.url)
		if err != nil {
			return nil, err
		}
		*q.to = sq
	}
	return pool.New(c)
}

func component(o Options) string {
	if o.Component == "" {
		return "stratus"
	}
	return o.Component
}

// keyring reads the HMAC secret's versions, and again — at most once per
// KeyReloadInterval — when a token names a key this process does not hold
// (the secret was rotated after it read it).
type keyring struct {
	src interface {
		Versions(ctx context.Context) ([]byte, []byte, error)
	}
	mu   sync.Mutex
	last time.Time
	keys map[string][]byte // by captoken.KeyID
}

// KeyReloadInterval bounds how often a token naming an unknown key makes
// the process read the secret again.
const KeyReloadInterval = 30 * time.Second

func newKeyring(src interface {
	Versions(ctx context.Context) ([]byte, []byte, error)
}) *keyring {
	return &keyring{src: src, keys: map[string][]byte{}}
}

func (k *keyring) load(ctx context.Context) (current []byte, previous [][]byte, err error) {
	cur, prev, err := k.src.Versions(ctx)
	if err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.last = time.Now()
	k.keys[captoken.KeyID(cur)] = cur
	if prev != nil {
		k.keys[captoken.KeyID(prev)] = prev
		previous = [][]byte{prev}
	}
	return cur, previous, nil
}

// lookup is captoken.Minter.Lookup: the key named kid, read again from the
// secret when it is not known and the last read is KeyReloadInterval old.
func (k *keyring) lookup(kid string) ([]byte, bool) {
	k.mu.Lock()
	key, ok := k.keys[kid]
	stale := time.Since(k.last) >= KeyReloadInterval
	k.mu.Unlock()
	if ok || !stale {
		return key, ok
	}
	if _, _, err := k.load(context.Background()); err != nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok = k.keys[kid]
	return key, ok
}

// HandleMessage runs one dispatch-queue message body (see the function
// HandleMessage).
func (a *App) HandleMessage(ctx context.Context, body string) error {
	return HandleMessage(ctx, a.Service, body, a.Logger)
}

// Drain waits for the work a request started in the background (the
// supervisor layer's launches). A Lambda handler calls it before it
// returns: the environment is frozen between invocations.
func (a *App) Drain() { a.Service.Drain() }

// HTTPHandler is the worker API (internal/httpapi) as the worker API
// function serves it. Without a configured API URL (the function cannot
// know its own API's address from the template: the API depends on the
// function), the first request's host is taken for it, "https://" + Host:
// the address the workers called is the one they are told to call.
func (a *App) HTTPHandler() http.Handler {
	api := httpapi.New(a.Service)
	api.OnError = func(r *http.Request, err error) {
		if stratus.ErrorCode(err) == stratus.EINTERNAL {
			a.Logger.Error("worker API request failed", "method", r.Method, "path", r.URL.Path, "err", err.Error())
		}
	}
	if a.Config.APIURL != "" {
		return api
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" {
			a.apiURLOnce.Do(func() { a.Service.APIURL = "https://" + r.Host })
		}
		api.ServeHTTP(w, r)
	})
}

// logEvent writes one progress event as a JSON line.
func (a *App) logEvent(e worker.Event) {
	attrs := []any{"type", e.Type, "run_id", e.RunID, "node", e.Node, "step_ref", e.StepRef, "attempt", e.Attempt}
	for k, v := range map[string]string{"terminal": e.Terminal, "outcome": e.Outcome, "reason": e.Reason} {
		if v != "" {
			attrs = append(attrs, k, v)
		}
	}
	if e.Duration > 0 {
		attrs = append(attrs, "duration_ms", e.Duration.Milliseconds())
	}
	if e.PromptTokens > 0 || e.CompletionTokens > 0 {
		attrs = append(attrs, "prompt_tokens", e.PromptTokens, "completion_tokens", e.CompletionTokens)
	}
	if e.CostUSD != nil {
		attrs = append(attrs, "cost_usd", *e.CostUSD)
	}
	a.Logger.Info("stratus.event", attrs...)
}

// newRecords is the part of an App every function builds: its log, the S3
// sink under the bucket's prefix (by path on a custom endpoint: moto,
// LocalStack) and the DynamoDB store spilling to it.
// Required: Table and Bucket. Errors: EINVALID naming the variable that is
// missing.
func newRecords(cfg Config, awsCfg aws.Config, o Options) (*App, error) {
	if err := require(EnvTable, cfg.Table, EnvBucket, cfg.Bucket); err != nil {
		return nil, err
	}
	a := &App{Config: cfg, Log: o.Log}
	if a.Log == nil {
		a.Log = os.Stderr
	}
	a.Logger = logging.JSON(a.Log, component(o))
	pathStyle := awsCfg.BaseEndpoint != nil
	sk, err := s3sink.New(awss3.NewFromConfig(awsCfg, func(so *awss3.Options) {
		so.UsePathStyle = pathStyle
		so.DisableLogOutputChecksumValidationSkipped = true
	}), cfg.Bucket, cfg.BucketPrefix)
	if err != nil {
		return nil, err
	}
	a.Sink = sk
	if a.Store, err = dynamodb.New(awsdynamodb.NewFromConfig(awsCfg), dynamodb.Options{Table: cfg.Table, Blobs: sk}); err != nil {
		return nil, err
	}
	return a, nil
}
