package main

import (
	"os"

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
	cmd.AddCommand(&cobra.Command{
		Use:    reaper.Arg,
		Short:  "The reaper of a stratus process whose workers run in process",
		Long:   "reap reads +PGID and -PGID lines on stdin; once stdin closes (its stratus process ended, even killed) it kills every process group still named (issue 16 § 1).",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run:    func(*cobra.Command, []string) { os.Exit(reaper.Main(os.Stdin)) },
	})
	return cmd
}
