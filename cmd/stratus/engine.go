package main

import (
	"context"
	"fmt"
	stdio "io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/engine"
)

func newEngineCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Bundled child-contract v1 engines",
		Args:  cobra.ArbitraryArgs,
		RunE:  func(c *cobra.Command, args []string) error { return subcommandMissing(c, args) },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "echo [-- IGNORED…]",
		Short: "Echo the input as the report (openseek's echo kind)",
		Long: `echo answers the v1 envelope on stdin with its input as the report (openseek's echo
kind). Arguments after -- (a node's extra_args) are accepted and ignored.`,
		Args: extraArgsOnly,
		RunE: func(_ *cobra.Command, args []string) error {
			ignoreExtraArgs(io.Err, "echo", args)
			return engine.Echo(io.In, io.Out)
		},
	})
	var scenario string
	script := &cobra.Command{
		Use:   "script --scenario FILE [-- IGNORED…]",
		Short: "Answer per node and visit from a scenario file",
		Long: `script answers per node and visit from a scenario file: docs/script-engine.md
describes every key, examples/scenario.yaml is one. A supervisor turn the
scenario does not answer (no entry, no default) gets a built-in answer.
Arguments after -- (a node's extra_args) are accepted and ignored.`,
		Args: extraArgsOnly,
		RunE: func(_ *cobra.Command, args []string) error {
			ignoreExtraArgs(io.Err, "script", args)
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
	cmd.AddCommand(newEngineModelServerCmd(io))
	for _, shim := range []struct {
		name, short string
		run         func(context.Context, engine.ShimOptions, stdio.Reader, stdio.Writer) error
	}{
		{"claude", "Wrap the Claude Code CLI (claude -p --output-format stream-json) as a v1 engine", engine.Claude},
		{"codex", "Wrap the Codex CLI (codex exec --json) as a v1 engine", engine.Codex},
	} {
		var binary string
		c := &cobra.Command{
			Use:   shim.name + " [--binary PATH] [-- EXTRA CLI FLAGS…]",
			Short: shim.short,
			Long: shim.short + `.

Reads the v1 envelope on stdin (kind, max_steps and schema from it), sends the prompt
to the CLI on stdin (never in argv), enforces max_steps itself, and turns the CLI's
JSON events into agent_step / usage / failure events and one report (docs/child-contract.md § Output).
Flags after -- go to the CLI (model, permission mode, ...).`,
			RunE: func(_ *cobra.Command, args []string) error {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return shim.run(ctx, engine.ShimOptions{Binary: binary, ExtraArgs: args, Stderr: io.Err}, io.In, io.Out)
			},
		}
		c.Flags().StringVar(&binary, "binary", "", "the CLI to run (default: "+shim.name+" on PATH)")
		cmd.AddCommand(c)
	}
	return cmd
}

// extraArgsOnly accepts arguments only after "--": a node's extra_args,
// which the runner passes a bundled engine after a "--" (README § Engines).
func extraArgsOnly(c *cobra.Command, args []string) error {
	if dash := c.ArgsLenAtDash(); len(args) > 0 && (dash < 0 || dash > 0) {
		return usageError{fmt.Errorf("unexpected argument %q: %s takes arguments only after -- (a node's extra_args, ignored)", args[0], c.CommandPath())}
	}
	return nil
}

// ignoreExtraArgs says once on stderr that a bundled engine without a CLI
// to hand them to ignores the arguments after "--" (a node's extra_args must
// not fail every node on the echo or script engine).
func ignoreExtraArgs(w stdio.Writer, name string, args []string) {
	if len(args) > 0 {
		fmt.Fprintf(w, "stratus engine %s: ignoring %d extra argument(s) after --: %s (this engine wraps no CLI to pass them to)\n", name, len(args), strings.Join(args, " "))
	}
}
