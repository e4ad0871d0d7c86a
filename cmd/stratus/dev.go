package main

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// DevAWSOptions are the flags of `stratus dev aws`.
type DevAWSOptions struct {
	IO          IO
	EndpointURL string
	Port        int
	Name        string
	Self        string // the stratus binary workers run as ("" = this one)
	// Pool is how many pooled runners serve each network profile
	// (README.md § Warm runners (pool mode); 0: no pool, every step a cold
	// RunTask); PoolPickup how long dispatch waits for one before it goes
	// cold.
	Pool       int
	PoolPickup time.Duration
	// HeartbeatSeconds is the stack's HeartbeatSeconds (template.yaml's
	// parameter; 0: the compiler's default, 300).
	HeartbeatSeconds int
	// Runners is what runs each Fargate task: "container" (a container of
	// the task definition's image, Image) or "process" (a local `stratus
	// runner`, where no container engine runs).
	Runners string
	// Image is the runner image the stack's task definitions name
	// (ImageUri; make image builds it).
	Image string
	// Lambdas is make lambdas' output directory and RIE the Lambda
	// Runtime Interface Emulator (make rie); "" = beside this binary.
	Lambdas, RIE string
	// Template is a SAM template file to deploy instead of the
	// repository's template.yaml ("": that one, built in).
	Template string
	// Stack, with EndpointURL, serves that existing stack (as its outputs
	// say) instead of deploying one.
	Stack string
	// GitTokenFile is a file holding the git host's token: dev aws stores
	// MaxConcurrentTasks is the stack's MaxConcurrentTasks: how many of
	// its task pool's tasks run at once (1 to awsapp.MaxConcurrentTasks).
	MaxConcurrentTasks int
	// it as a secret of the stand-in's Secrets Manager and deploys the
	// stack with GitTokenSecretArn naming it, so it reaches the publisher
	// alone, as on AWS ("": no token).
	GitTokenFile string

	// ready, when set, is called with the flags line once serving (tests).
	ready func(flags string) //lint:ignore U1000 read by devaws.go, which the slim build has not
	// stop, when set, ends the serving instead of SIGINT/SIGTERM (tests).
	stop <-chan struct{} //lint:ignore U1000 read by devaws.go, which the slim build has not
}

// stackName is CloudFormation's rule for a stack's name.
var stackName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9]{0,127}$`) })

func newDevCmd(io IO) *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Local stand-ins for development: dev aws, dev github",
		Args:  cobra.ArbitraryArgs,
		RunE:  func(c *cobra.Command, args []string) error { return subcommandMissing(c, args) },
	}
	o := &DevAWSOptions{IO: io}
	aws := &cobra.Command{
		Use:   "aws [--endpoint-url URL [--stack NAME]] [--port N] [--name NAME] [--template FILE] [--runners container|process] [--image IMAGE]",
		Short: "Serve a Stratus stack on a local AWS stand-in (moto): run --target aws without an account",
		Long: `dev aws serves a Stratus stack on this machine, with no AWS account: it starts a
moto server (through the launcher the tests use: real Step Functions execution,
moto 5.2.1's fixes; moto comes with pip install 'moto[server]') or uses the one
--endpoint-url names, deploys template.yaml there as sam deploy would (the SAM
translator's transform, created as a CloudFormation stack on moto; README "What
dev aws emulates"; --template deploys another file), and plays the parts moto
cannot run: the Lambda functions as shipped (each bootstrap of make lambdas under
the Lambda Runtime Interface Emulator of make rie, with the environment, memory
size and timeout the deployed stack gives it; the worker API function behind the
HTTP API's routes, served over HTTPS with a certificate of a CA made for the
stack; dispatch behind its queue; events fed each ended execution) and Fargate
(each task ecs:RunTask places runs as a container of its task definition's image,
--image, built by make image, with only the environment and secrets the task
definition and RunTask give it; --runners process runs a local stratus runner
instead, where no container engine runs, and says so for every task).

With --pool N the stack has a warm runner pool (README § Warm runners;
template.yaml RunnerPool=on): an assignment queue per network profile, and N
pooled runners polling each: N tasks of each pool service, as containers (dev aws
places them as the ECS service scheduler would), or with --runners process N local
stratus runner pool processes; dispatch sends each step to the pool of its node's
profile and falls back to RunTask when no pooled runner takes it within
--pool-pickup.

With --endpoint-url URL --stack NAME it deploys nothing: it serves the stack NAME
that an earlier dev aws deployed on that stand-in, as its outputs and resources say,
its worker API where the stack's ApiUrl output names it.

It prints one line on stdout, starting with --target aws, holding the flags
stratus run, resume, status, runs and cancel need; then it serves until Ctrl-C.

Exit status: 0 stopped by Ctrl-C, 1 the stand-in could not start (a template the
SAM translator refuses: its message, naming the resource), 2 bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.EndpointURL != "" {
				if u, err := url.Parse(o.EndpointURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageError{fmt.Errorf("--endpoint-url %q: want an http:// or https:// URL such as http://127.0.0.1:5000", o.EndpointURL)}
				}
			}
			if o.Pool < 0 || o.Pool > 16 {
				return usageError{fmt.Errorf("--pool %d: want 0 (no pool) to 16 runners per network profile", o.Pool)}
			}
			if o.PoolPickup != 0 && (o.PoolPickup < time.Second || o.PoolPickup > 90*time.Second) {
				return usageError{fmt.Errorf("--pool-pickup %s: want 1s to 90s (default 20s; dispatch waits inside its 120 s invocation)", o.PoolPickup)}
			}
			if o.HeartbeatSeconds != 0 && (o.HeartbeatSeconds < 10 || o.HeartbeatSeconds > 3600) {
				return usageError{fmt.Errorf("--heartbeat-seconds %d: want 10 to 3600 seconds (template.yaml allows 120 to 3600 on AWS), or 0 for the default (300)", o.HeartbeatSeconds)}
			}
			if o.Runners != "container" && o.Runners != "process" {
				return usageError{fmt.Errorf("--runners %q: want container (each task a container of the runner image) or process (a local stratus runner)", o.Runners)}
			}
			if o.Stack != "" && o.EndpointURL == "" {
				return usageError{fmt.Errorf("--stack %s: serves an existing stack of a running stand-in; name it with --endpoint-url (a stand-in dev aws starts itself holds no stack yet)", o.Stack)}
			}
			if o.Stack != "" && (o.Name != "" || o.Template != "" || o.HeartbeatSeconds != 0 || o.GitTokenFile != "") {
				return usageError{fmt.Errorf("--stack %s: serves an existing stack; it takes no --name, --template, --heartbeat-seconds or --git-token-file (the stack has them)", o.Stack)}
			}
			for _, f := range []struct{ flag, v string }{{"--name", o.Name}, {"--stack", o.Stack}} {
				if f.v != "" && !stackName().MatchString(f.v) {
					return usageError{fmt.Errorf("%s %q: a CloudFormation stack name: a letter, then letters, digits and hyphens, at most 128 characters", f.flag, f.v)}
				}
			}
			if o.Port != 0 && o.EndpointURL != "" {
				return usageError{fmt.Errorf("--port %d: the port of the moto dev aws starts; with --endpoint-url it starts none", o.Port)}
			}
			if o.PoolPickup != 0 && o.Pool == 0 {
				return usageError{fmt.Errorf("--pool-pickup %s: how long dispatch waits for a pooled runner; give --pool N too", o.PoolPickup)}
			}
			if o.GitTokenFile != "" {
				b, err := os.ReadFile(o.GitTokenFile)
				if err != nil {
					return usageError{fmt.Errorf("--git-token-file: %w", err)}
				}
				if strings.TrimSpace(string(b)) == "" {
					return usageError{fmt.Errorf("--git-token-file %s: the file is empty; want the git host's token (a GitHub token that may push and open pull requests)", o.GitTokenFile)}
				}
			}
			if o.Port < 0 || o.Port > 65535 {
				return usageError{fmt.Errorf("--port %d: want a TCP port, 1-65535, or 0 for any", o.Port)}
			}
			return runDevAWS(o)
		},
	}
	aws.Flags().StringVar(&o.EndpointURL, "endpoint-url", "", "use this AWS stand-in instead of starting moto")
	aws.Flags().IntVar(&o.Port, "port", 0, "the port moto listens on (0: any)")
	aws.Flags().StringVar(&o.Name, "name", "", "the stack's name (default stratus-dev-<6 hex>)")
	aws.Flags().IntVar(&o.Pool, "pool", 0, "a warm runner pool: this many pooled runners per network profile (0: none)")
	aws.Flags().DurationVar(&o.PoolPickup, "pool-pickup", 0, "how long dispatch waits for a pooled runner before RunTask (default 20s)")
	aws.Flags().IntVar(&o.HeartbeatSeconds, "heartbeat-seconds", 0, "the stack's HeartbeatSeconds: a worker silent this long is taken for dead (default 300; template.yaml allows 120 to 3600 and AWS refuses less, the stand-in takes down to 10 for tests and says so; under 20 an engine that prints nothing times out: its runner heartbeats every 20 s)")
	aws.Flags().StringVar(&o.Runners, "runners", "container", "what runs each Fargate task: container (a container of --image on Docker or podman) or process (a local stratus runner, sharing this machine's files and network)")
	aws.Flags().StringVar(&o.Image, "image", "stratus-runner:latest", "the runner image the task definitions name (make image builds stratus-runner:latest, :claude, :codex)")
	aws.Flags().StringVar(&o.Lambdas, "lambdas", "", "make lambdas' output directory: <dir>/<function>/bootstrap (default: lambdas beside this binary, as make puts bin/lambdas)")
	aws.Flags().StringVar(&o.RIE, "rie", "", "the Lambda Runtime Interface Emulator (default: aws-lambda-rie beside this binary, as make rie puts it)")
	aws.Flags().StringVar(&o.Template, "template", "", "deploy this SAM template file instead of the built-in template.yaml, with the parameter_overrides of a samconfig.toml beside it (its functions' code is make lambdas' bootstraps, its state machine definitions the built-in statemachine/ files its DefinitionUri names)")
	aws.Flags().StringVar(&o.GitTokenFile, "git-token-file", "", "a file holding the git host's token: stored as a secret of the stand-in's Secrets Manager and given to the stack as GitTokenSecretArn, so the publisher (the worker of publish nodes) alone gets it as STRATUS_GIT_TOKEN")
	aws.Flags().IntVar(&o.MaxConcurrentTasks, "max-concurrent-tasks", 1, "the stack's MaxConcurrentTasks: how many tasks of its task pool (stratus submit --target aws) run at once (1 to 100)")
	aws.Flags().StringVar(&o.Stack, "stack", "", "with --endpoint-url: serve this existing stack (one an earlier dev aws deployed there), read from its outputs, instead of deploying one")
	dev.AddCommand(aws, newDevGitHubCmd(io))
	return dev
}
