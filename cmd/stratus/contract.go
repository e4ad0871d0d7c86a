package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/inputfile"
)

// ContractRunOptions are the flags of `stratus contract run`.
type ContractRunOptions struct {
	IO   IO
	Kind string
	// Input is the request's input as JSON text
	// (docs/contracts.md § The request line: any JSON).
	Input string
	// MaxSteps is the step ceiling sent as max_steps; nil leaves it out.
	MaxSteps *int
	// Schema is a file holding a JSON Schema object; "" sends none.
	Schema string
	// DeadlineMS and CancelGraceMS are in milliseconds; 0 means the
	// contract defaults (600 000 and 5 000,
	// docs/contracts.md § Timing, environment and argv).
	DeadlineMS    int
	CancelGraceMS int
	// Command is the engine: the executable and its arguments.
	Command []string
	// Context, when non-nil, replaces the SIGINT/SIGTERM context (tests).
	Context context.Context
}

// ContractRunResult is the one JSON object `stratus contract run` prints.
type ContractRunResult struct {
	Terminal contract.Terminal `json:"terminal"`
	// Report is present only for Captured (a null report prints as null).
	Report  json.RawMessage  `json:"report,omitempty"`
	Failure string           `json:"failure,omitempty"`
	Attempt contract.Attempt `json:"attempt"`
}

func newContractCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "contract",
		Short: "Drive an engine through the workflow child contract v1 (docs/child-contract.md)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q; commands: run (see --help)", args[0])}
			}
			return usageError{errors.New("name a command: run (see --help)")}
		},
	}
	cmd.AddCommand(newContractRunCmd(io))
	return cmd
}

func newContractRunCmd(io IO) *cobra.Command {
	o := &ContractRunOptions{IO: io}
	var maxSteps int
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG...]",
		Short: "Run one engine call under the child contract and print its terminal as JSON",
		Long: `run launches CMD ARG... once as a workflow engine (docs/child-contract.md): it writes the v1
request line on the engine's stdin, classifies its stdout, and prints one JSON
object on stdout:

  {"terminal": ..., "report": ..., "failure": ..., "attempt": {"id", "steps",
   "prompt_tokens", "completion_tokens", "cost_usd", "exit_code", "wall_ms"}}

report appears only for Captured, failure only for Failed; cost_usd and
exit_code may be null. SIGINT/SIGTERM kill the engine's process group.

Exit status: 0 Captured, 1 any other terminal, 2 bad flags, 130 interrupted.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			if dash < 0 {
				if len(args) > 0 {
					return usageError{fmt.Errorf("put the engine command after --: stratus contract run [flags] -- %s", args[0])}
				}
				return usageError{errors.New("no engine command: give it after --, e.g. stratus contract run -- sh engine.sh")}
			}
			if dash > 0 {
				return usageError{fmt.Errorf("unexpected argument %q before --; the engine command goes after --", args[0])}
			}
			o.Command = args
			if c.Flags().Changed("max-steps") {
				o.MaxSteps = &maxSteps
			}
			return runContractRun(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kind, "kind", "agent", "agent kind sent as the request's kind")
	f.StringVar(&o.Input, "input", "null", "request input, any JSON value")
	f.IntVar(&maxSteps, "max-steps", 0, "step ceiling sent as max_steps (absent when not given)")
	f.StringVar(&o.Schema, "schema", "", "file holding a JSON Schema object sent as schema")
	f.IntVar(&o.DeadlineMS, "deadline-ms", 0, "wall deadline in ms (0: 600000)")
	f.IntVar(&o.CancelGraceMS, "cancel-grace-ms", 0, "grace after the deadline closes stdin, in ms (0: 5000)")
	return cmd
}

// contractRequest checks the options and builds the launch; every error is
// a usage error (exit 2) naming the flag, the value and what is valid.
func contractRequest(o *ContractRunOptions) (contract.LaunchSpec, contract.Request, error) {
	var spec contract.LaunchSpec
	var req contract.Request
	if len(o.Command) == 0 || o.Command[0] == "" {
		return spec, req, errors.New("no engine command: give it after --, e.g. stratus contract run -- sh engine.sh")
	}
	input := bytes.TrimSpace([]byte(o.Input))
	if !json.Valid(input) {
		return spec, req, fmt.Errorf("--input %q is not JSON; give any JSON value, e.g. '{\"query\":\"q\"}' or null", o.Input)
	}
	if o.MaxSteps != nil && *o.MaxSteps < 0 {
		return spec, req, fmt.Errorf("--max-steps %d is negative; give a step ceiling >= 0", *o.MaxSteps)
	}
	if o.DeadlineMS < 0 {
		return spec, req, fmt.Errorf("--deadline-ms %d is negative; give milliseconds > 0 (0: the 600000 default)", o.DeadlineMS)
	}
	if o.CancelGraceMS < 0 {
		return spec, req, fmt.Errorf("--cancel-grace-ms %d is negative; give milliseconds > 0 (0: the 5000 default)", o.CancelGraceMS)
	}
	var schema json.RawMessage
	if o.Schema != "" {
		raw, err := inputfile.ReadFile("--schema", o.Schema)
		if err != nil {
			return spec, req, fmt.Errorf("--schema %s: %w", o.Schema, err)
		}
		raw = bytes.TrimSpace(raw)
		if !json.Valid(raw) || raw[0] != '{' {
			return spec, req, fmt.Errorf("--schema %s: the file must hold one JSON object (a JSON Schema)", o.Schema)
		}
		schema = raw
	}
	spec = contract.LaunchSpec{
		Command:       o.Command[0],
		Args:          o.Command[1:],
		DeadlineMS:    o.DeadlineMS,
		CancelGraceMS: o.CancelGraceMS,
	}
	req = contract.Request{Kind: o.Kind, Input: input, MaxSteps: o.MaxSteps, Schema: schema}
	return spec, req, nil
}

func runContractRun(o *ContractRunOptions) error {
	spec, req, err := contractRequest(o)
	if err != nil {
		return usageError{err}
	}
	ctx := o.Context
	if ctx == nil {
		var stop context.CancelFunc
		ctx, stop = signalContext()
		defer stop()
	}
	res, err := contract.NewRunner().Run(ctx, spec, req, nil)
	if err != nil {
		// Caller cancellation is never a terminal
		// (docs/contracts.md § Process lifecycle): the group is already
		// killed; keep the spend visible on stderr.
		a := res.Attempt
		cost := "unknown"
		if a.CostUSD != nil {
			cost = fmt.Sprintf("%g", *a.CostUSD)
		}
		fmt.Fprintf(o.IO.Err, "stratus: interrupted: engine stopped (attempt %s: %d steps, tokens %d/%d, cost_usd %s)\n",
			a.ID, a.Steps, a.PromptTokens, a.CompletionTokens, cost)
		return &exitError{code: ExitInterrupted}
	}
	out := ContractRunResult{Terminal: res.Terminal, Failure: res.Failure, Attempt: res.Attempt}
	if res.Terminal == contract.Captured {
		out.Report = res.Report
		if len(out.Report) == 0 {
			out.Report = json.RawMessage("null")
		}
	}
	if err := json.NewEncoder(o.IO.Out).Encode(out); err != nil {
		return err
	}
	if res.Terminal != contract.Captured {
		return &exitError{code: ExitFailed}
	}
	return nil
}
