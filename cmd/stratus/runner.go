package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/reaper"
	"github.com/stratusflow/stratus/internal/runner"
)

func newRunnerCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runner",
		Short: "Worker entrypoint: fetch the prompt, drive the engine, return the report",
		Long: `runner is what a worker runs (an ECS task, or a local subprocess in embedded
mode). It reads STRATUS_API_URL and STRATUS_HANDLE from the environment, fetches
its prompt, runs the engine through child contract v1 and submits the report.
The stratus-runner binary (make build puts it beside stratus) is the same
runner without the rest of stratus; embedded runs use it when it is there.

Exit status: 0 the result was delivered, 4 it was refused (409: the step
moved on without it), 5 it could not be delivered and is kept in a spool file
(named on stderr), 2 its environment is incomplete, 1 any other failure.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if code := runner.Main(os.Getenv, io.Err); code != runner.ExitOK {
				return &exitError{code: code} // said on stderr, as a record
			}
			return nil
		},
	}
	cmd.AddCommand(newRunnerPoolCmd(io))
	cmd.AddCommand(&cobra.Command{
		Use:    reaper.Arg,
		Short:  "The reaper of a stratus process whose workers run in process",
		Long:   "reap reads +PGID and -PGID lines on stdin; once stdin closes (its stratus process ended, even killed) it kills every process group still named.",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run:    func(*cobra.Command, []string) { os.Exit(reaper.Main(os.Stdin)) },
	})
	return cmd
}

// RunnerPoolOptions are `stratus runner pool`'s.
type RunnerPoolOptions struct {
	IO       IO
	Queue    string // the pool's assignment queue URL
	Profile  string // runner.ProfileOffline | runner.ProfileOnline
	WorkRoot string
	MaxSteps int
	Grace    time.Duration
}

func newRunnerPoolCmd(io IO) *cobra.Command {
	o := &RunnerPoolOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "pool --queue URL [--profile offline|online]",
		Short: "A warm runner: take step after step from a runner pool's queue",
		Long: `pool is a warm runner (README § Warm runners): it long-polls a runner pool's SQS queue and
runs each step assigned to it exactly as a cold worker runs one, one step at a
time, until SIGTERM or SIGINT. Stacks deployed with RunnerPool=on run it as an
ECS service per network profile; it runs as well on any host with HTTPS to the
worker API and AWS credentials (the SDK's usual chain) allowed, on that one
queue, sqs:ReceiveMessage, sqs:DeleteMessage and sqs:ChangeMessageVisibility —
nothing else (README: Warm runners). A queue URL outside AWS (moto, LocalStack)
is reached at its own host unless AWS_ENDPOINT_URL says otherwise.

--profile says which steps the pool serves: offline (nodes without
network_access, the default) or online; an assignment of the other profile is
never run. Each step gets a fresh directory under --work-root (its working
directory, HOME and TMPDIR), removed with every process the step left behind
before the next is taken. The engine gets the step's handle and none of the
pool's AWS credentials. On SIGTERM it takes no more steps and gives the one
under way --grace to end before it stops its engine.

A step whose report the worker API does not take (out of reach through its
retries) has the report kept in a spool file in stratus-spool-<uid>/ under
--work-root, a directory only this user may enter; the pool then
stops taking steps, since every further one would end the same way.

Exit status: 0 stopped by a signal (or after --max-steps), 5 a report could not
be delivered (the spool file is named on stderr), 2 bad flags or a work root it
cannot use, 1 any other failure.`,
		Example: `  stratus runner pool --queue https://sqs.us-east-1.amazonaws.com/123456789012/stratus-pool
  stratus runner pool --queue "$QUEUE" --profile online --work-root /scratch`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runRunnerPool(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Queue, "queue", "", "the pool's SQS queue URL (the stack's PoolQueueUrl or NetworkPoolQueueUrl output)")
	f.StringVar(&o.Profile, "profile", runner.ProfileOffline, "the network profile the pool serves: offline or online")
	f.StringVar(&o.WorkRoot, "work-root", "", "where each step's directory is made (default: the temporary directory)")
	f.IntVar(&o.MaxSteps, "max-steps", 0, "stop after taking this many steps (0: never)")
	f.DurationVar(&o.Grace, "grace", 100*time.Second, "after SIGTERM, how long a step under way may go on before its engine is stopped (ECS gives a task 120 s)")
	return cmd
}

// check refuses options pool cannot run with: a usage error naming the
// flag, its value and what is valid.
func (o *RunnerPoolOptions) check() error {
	switch {
	case o.Queue == "":
		return usageError{fmt.Errorf("--queue is required: the pool's SQS queue URL, such as https://sqs.REGION.amazonaws.com/ACCOUNT/NAME")}
	case !strings.HasPrefix(o.Queue, "https://") && !strings.HasPrefix(o.Queue, "http://"):
		return usageError{fmt.Errorf("--queue %q is not a queue URL; valid: https://sqs.REGION.amazonaws.com/ACCOUNT/NAME", o.Queue)}
	case o.Profile != runner.ProfileOffline && o.Profile != runner.ProfileOnline:
		return usageError{fmt.Errorf("--profile %q is not valid; valid: %s (nodes without network_access), %s (nodes with it)", o.Profile, runner.ProfileOffline, runner.ProfileOnline)}
	case o.MaxSteps < 0:
		return usageError{fmt.Errorf("--max-steps %d is not valid; valid: 0 (never stop) or more", o.MaxSteps)}
	case o.Grace < 0:
		return usageError{fmt.Errorf("--grace %s is not valid; valid: 0 (stop the engine at once) or more", o.Grace)}
	}
	return nil
}
