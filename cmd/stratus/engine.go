package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/engine"
)

func newEngineCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Bundled child-contract v1 engines",
		Args:  cobra.ArbitraryArgs,
		RunE:  func(_ *cobra.Command, args []string) error { return subcommandMissing("engine", args) },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "echo",
		Short: "Echo the input as the report (openseek's echo kind)",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return engine.Echo(io.In, io.Out) },
	})
	var scenario string
	script := &cobra.Command{
		Use:   "script --scenario FILE",
		Short: "Answer per node and visit from a scenario file",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			s, err := engine.LoadScenario(scenario)
			if err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return engine.Script(ctx, s, io.In, io.Out)
		},
	}
	script.Flags().StringVar(&scenario, "scenario", "", "scenario file (YAML)")
	script.MarkFlagRequired("scenario")
	cmd.AddCommand(script)
	cmd.AddCommand(newEngineConformCmd(io))
	return cmd
}
