package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	awssm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/devstack/fargate"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/launch"
)

// LambdaOptions locate what runs the stack's functions as shipped: each
// function's `bootstrap` (make lambdas) under the AWS Lambda Runtime
// Interface Emulator (make rie).
type LambdaOptions struct {
	// Bootstraps is make lambdas' output directory: a function's
	// bootstrap is <Bootstraps>/<name>/bootstrap, name the last element
	// of its CodeUri (functions/workerapi → workerapi).
	Bootstraps string
	// RIE is the emulator's executable (bin/aws-lambda-rie).
	RIE string
	// Template is the SAM template the stack was deployed from (nil:
	// stratus.SAMTemplate): its functions, the HTTP API's routes, the
	// dispatch queue's event source mapping and the events rule.
	Template []byte
}

// ErrNoLambdas is returned (wrapped, naming the file) when a function's
// bootstrap or the emulator is not built.
var ErrNoLambdas = errors.New("the Lambda functions or their emulator are not built")

// template is o.Template, else the repository's.
func (o LambdaOptions) template() []byte {
	if o.Template != nil {
		return o.Template
	}
	return stratus.SAMTemplate
}

// Check says whether every function's bootstrap and the emulator are
// there. Errors: the template's functions could not be read; ErrNoLambdas,
// naming what is missing and the make target that builds it.
func (o LambdaOptions) Check() error {
	specs, err := lambdas.FunctionsFromTemplate(o.template())
	if err != nil {
		return err
	}
	executable := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	for _, s := range specs {
		if p := o.bootstrap(s); !executable(p) {
			return fmt.Errorf("%w: no executable %s (%s's bootstrap): build them with `make lambdas` (as sam build makes them), or point --lambdas at their directory", ErrNoLambdas, p, s.LogicalID)
		}
	}
	if !executable(o.RIE) {
		return fmt.Errorf("%w: no executable %s (the Lambda Runtime Interface Emulator): build it with `make rie`, or point --rie at it", ErrNoLambdas, o.RIE)
	}
	return nil
}

// Code maps each function's logical id to its bootstrap: what Create
// uploads as its code (CreateOptions.Bootstraps), as sam package does.
// Errors: the template's functions could not be read.
func (o LambdaOptions) Code() (map[string]string, error) {
	specs, err := lambdas.FunctionsFromTemplate(o.template())
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, s := range specs {
		m[s.LogicalID] = o.bootstrap(s)
	}
	return m, nil
}

func (o LambdaOptions) bootstrap(s lambdas.FunctionSpec) string {
	return filepath.Join(o.Bootstraps, path.Base(s.CodeURI), "bootstrap")
}

// workerAPIInstances is how many instances of the worker API function run
// at once: Lambda scales a function per concurrent request; runners'
// heartbeats, output tails and long steps' polls arrive together.
const workerAPIInstances = 4

// startFunctions starts each function of the stack under the emulator with
// what the deployed stack gives it — the environment, memory size and
// timeout GetFunctionConfiguration returns for its physical name — and
// the credentials of cfg (as its execution role's would be on AWS), its
// SDK calls going to endpoint ("" = cfg's). Errors: a function the stack lacks,
// the stand-in's API, or lambdas.Start's.
func startFunctions(ctx context.Context, cfg aws.Config, st *Stack, o LambdaOptions, endpoint string, log io.Writer) (map[string]*lambdas.Function, []lambdas.FunctionSpec, error) {
	specs, err := lambdas.FunctionsFromTemplate(o.template())
	if err != nil {
		return nil, nil, err
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("the functions' credentials: %w", err)
	}
	if endpoint == "" {
		endpoint = aws.ToString(cfg.BaseEndpoint)
	}
	lc := awslambda.NewFromConfig(cfg)
	fns := map[string]*lambdas.Function{}
	stop := func() {
		for _, fn := range fns {
			fn.Stop()
		}
	}
	for _, s := range specs {
		name := st.Functions[s.LogicalID]
		if name == "" {
			stop()
			return nil, nil, fmt.Errorf("the stack %s has no function %s", st.Name, s.LogicalID)
		}
		out, err := lc.GetFunctionConfiguration(ctx, &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("GetFunctionConfiguration %s (%s): %w", name, s.LogicalID, err)
		}
		env := map[string]string{}
		if out.Environment != nil {
			env = out.Environment.Variables
		}
		n := 1
		if s.LogicalID == WorkerAPIFunction {
			n = workerAPIInstances
		}
		fn, err := lambdas.Start(ctx, lambdas.Config{Name: name, Bootstrap: o.bootstrap(s), Env: env,
			MemoryMB: int(aws.ToInt32(out.MemorySize)), Timeout: time.Duration(aws.ToInt32(out.Timeout)) * time.Second,
			Region: cfg.Region, AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken,
			Endpoint: endpoint, RIE: o.RIE, Concurrency: n, LogWriter: log})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("start %s: %w", s.LogicalID, err)
		}
		fns[s.LogicalID] = fn
	}
	return fns, specs, nil
}

// The logical ids of the stack's functions (template.yaml).
const (
	WorkerAPIFunction = "WorkerApiFunction"
	DispatchFunction  = "DispatchFunction"
	EventsFunction    = "EventsFunction"
	ClaimFunction     = "ClaimFunction"
)

// firstFetch measures, for each task the Fargate stand-in starts, the
// time from its start (Container.Starting: before its container is
// created) to its runner's first call of the
// worker API: the exchange of the bootstrap value its environment holds
// (launch.EnvHandle), the first thing a runner does before it fetches its
// prompt.
type firstFetch struct {
	mu      sync.Mutex
	started map[string]time.Time     // bootstrap value → when its task started
	task    map[string]string        // bootstrap value → the step's task id
	done    map[string]time.Duration // the step's task id → start to first call
	// called holds the first call of a bootstrap value not yet known to
	// start: a runner may call before the agent has told of its start.
	called map[string]time.Time
}

// start records task c started now.
func (m *firstFetch) start(c fargate.Container) {
	var handle, tid string
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case launch.EnvHandle:
			handle = v
		case launch.EnvTaskID:
			tid = v
		}
	}
	if handle == "" {
		return
	}
	if tid == "" {
		tid = c.TaskID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if t, ok := m.called[handle]; ok {
		m.done[tid] = t.Sub(c.Starting)
		delete(m.called, handle)
		return
	}
	m.started[handle], m.task[handle] = c.Starting, tid
}

func (m *firstFetch) init() {
	if m.task == nil {
		m.started, m.task, m.done, m.called = map[string]time.Time{}, map[string]string{}, map[string]time.Duration{}, map[string]time.Time{}
	}
}

// wrap is h, noting each started task's first call.
func (m *firstFetch) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && strings.HasPrefix(v, captoken.BootstrapPrefix) {
			now := time.Now()
			m.mu.Lock()
			m.init()
			if t, ok := m.started[v]; ok {
				m.done[m.task[v]] = now.Sub(t)
				delete(m.started, v)
			} else if _, ok := m.called[v]; !ok && len(m.called) < 10000 {
				m.called[v] = now
			}
			m.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// took is what has been measured so far.
func (m *firstFetch) took() map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.done)
}

// EngineSecretParameters maps each engine key a runner may need (as its
// environment variable) to the template parameter naming the Secrets
// Manager secret the task definitions deliver it from.
var EngineSecretParameters = map[string]string{
	"ANTHROPIC_API_KEY": "AnthropicApiKeySecretArn",
	"OPENAI_API_KEY":    "OpenAIApiKeySecretArn",
	"DEEPSEEK":          "DeepseekSecretArn",
}

// GitTokenParameter is the template parameter naming the Secrets Manager
// secret of the git host's token, which only the publisher task
// definition delivers (template.yaml GitTokenSecretArn).
const GitTokenParameter = "GitTokenSecretArn"

// CreateGitTokenSecret stores token (its surrounding white space, such as
// a file's last newline, dropped) on the stand-in cfg points at as the
// secret "<stack>/git-token", as an operator stores it before sam deploy,
// and returns its ARN, for GitTokenParameter. Errors: an empty token; the
// stand-in's.
func CreateGitTokenSecret(ctx context.Context, cfg aws.Config, stack, token string) (string, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return "", errors.New("the git token is empty; valid: the git host's token (a GitHub token that may push and open pull requests)")
	}
	out, err := awssm.NewFromConfig(cfg).CreateSecret(ctx, &awssm.CreateSecretInput{Name: aws.String(stack + "/git-token"), SecretString: aws.String(token)})
	if err != nil {
		return "", fmt.Errorf("the secret of the git token: %w", err)
	}
	return aws.ToString(out.ARN), nil
}

// CreateEngineSecrets makes, on the stand-in cfg points at, a secret
// "<stack>/<VAR>" for each engine key getenv gives a value, as an operator
// stores a provider key before sam deploy, and returns the template
// parameters that name them: the task definitions then deliver each key
// to the runners as ECS delivers a secret. Errors: the stand-in's.
func CreateEngineSecrets(ctx context.Context, cfg aws.Config, stack string, getenv func(string) string) (map[string]string, error) {
	sm := awssm.NewFromConfig(cfg)
	params := map[string]string{}
	for _, v := range slices.Sorted(maps.Keys(EngineSecretParameters)) {
		val := getenv(v)
		if val == "" {
			continue
		}
		out, err := sm.CreateSecret(ctx, &awssm.CreateSecretInput{Name: aws.String(stack + "/" + v), SecretString: aws.String(val)})
		if err != nil {
			return nil, fmt.Errorf("the secret of %s: %w", v, err)
		}
		params[EngineSecretParameters[v]] = aws.ToString(out.ARN)
	}
	return params, nil
}
