package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/runner"
)

func newRunnerCmd(io IO) *cobra.Command {
	return &cobra.Command{
		Use:   "runner",
		Short: "Worker entrypoint: fetch the prompt, drive the engine, return the report",
		Long: `runner is what a worker runs (an ECS task, or a local subprocess in embedded
mode). It reads STRATUS_API_URL and STRATUS_HANDLE from the environment, fetches
its prompt, runs the engine through child contract v1 and submits the report.

Exit status: 0 the result was delivered, 4 it was refused (409: the step
moved on without it), 5 it could not be delivered and is kept in a spool file
(named on stderr), 1 any other failure.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// One logger (issue 15 § 5): JSON records on stderr, which is the
			// step's runner.log embedded and CloudWatch Logs on ECS; text on a
			// terminal.
			log := logging.New(io.Err, "runner")
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if v := os.Getenv(launch.EnvParentPID); v != "" {
				pid, err := strconv.Atoi(v)
				if err != nil || pid <= 0 {
					return usageError{fmt.Errorf("%s=%q: want the pid of the process that owns the run", launch.EnvParentPID, v)}
				}
				var cancel context.CancelFunc
				ctx, cancel = runner.WatchParent(ctx, pid, runner.ParentPoll, log)
				defer cancel()
			}
			for _, v := range []string{launch.EnvAPIURL, launch.EnvHandle} {
				if os.Getenv(v) == "" {
					return usageError{fmt.Errorf("%s is not set; `stratus runner` is started by Stratus with %s and %s", v, launch.EnvAPIURL, launch.EnvHandle)}
				}
			}
			err = runner.Run(ctx, runner.Options{
				APIURL: os.Getenv(launch.EnvAPIURL), Handle: os.Getenv(launch.EnvHandle), TaskID: os.Getenv(launch.EnvTaskID),
				Self: self, Log: log,
			})
			if err == nil {
				return nil
			}
			// Said once, as a record of the runner's log, not again by Main.
			log.Error(err.Error())
			switch {
			case errors.Is(err, runner.ErrRefused):
				return &exitError{code: ExitRefused}
			case errors.Is(err, runner.ErrSpooled):
				return &exitError{code: ExitSpooled}
			}
			return &exitError{code: ExitFailed}
		},
	}
}
