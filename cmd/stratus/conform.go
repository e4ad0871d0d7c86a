package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/conform"
	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/safetext"
)

// EngineConformOptions are the flags and arguments of
// `stratus engine conform`.
type EngineConformOptions struct {
	IO IO
	// Command and Args are the engine to check (after --).
	Command string
	Args    []string
	// Kind and Input are the request's kind and input JSON
	// (docs/contracts.md § The request line); empty means conform.DefaultKind
	// / conform.DefaultInput.
	Kind  string
	Input string
	// GraceMS is the cancel grace in milliseconds
	// (docs/contracts.md § Process lifecycle).
	GraceMS int
	// TimeoutMS bounds each launch expected to finish on its own.
	TimeoutMS int
	JSON      bool
}

// newEngineConformCmd is `stratus engine conform`; it is registered under
// `stratus engine`.
func newEngineConformCmd(io IO) *cobra.Command {
	o := &EngineConformOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "conform [--kind K] [--input JSON] [--grace-ms N] [--json] -- CMD [ARGS...]",
		Short: "Check an engine against the child contract's conformance checklist (docs/child-contract.md)",
		Long: `conform launches the engine CMD ARGS once per check of the workflow child
contract v1 conformance checklist and prints one row per check: its name,
the section of docs/child-contract.md it enforces, PASS, FAIL or SKIP, and what
was observed. Exit status 0 when no check fails, 1 when one does, 2 for bad
usage (the engine command must follow --). The engine is launched four
times: a model-backed engine spends tokens on each launch.

Each launch runs in a fresh scratch directory, removed afterwards, never in
the current directory: an engine that edits its working directory edits
nothing of yours. A relative command path, and a relative argument naming a
file (conform -- python3 engine.py), are resolved against the current
directory first. The contract the checks enforce is docs/child-contract.md.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			switch {
			case dash < 0 && len(args) > 0:
				return usageError{fmt.Errorf("put the engine command after --: stratus engine conform [flags] -- %s", strings.Join(args, " "))}
			case dash > 0:
				return usageError{fmt.Errorf("unexpected argument %q before --; the engine command goes after --", args[0])}
			case len(args) == 0:
				return usageError{fmt.Errorf("no engine command: give it after --, e.g. stratus engine conform -- stratus engine echo")}
			}
			o.Command, o.Args = args[0], args[1:]
			return runEngineConform(o)
		},
	}
	cmd.Flags().StringVar(&o.Kind, "kind", conform.DefaultKind, "the request's kind")
	cmd.Flags().StringVar(&o.Input, "input", conform.DefaultInput, "the request's input (JSON)")
	cmd.Flags().IntVar(&o.GraceMS, "grace-ms", contract.DefaultCancelGraceMS, "cancel grace in ms: how long the engine may take to end once stdin closes")
	cmd.Flags().IntVar(&o.TimeoutMS, "timeout-ms", conform.DefaultTimeoutMS, "how long in ms one normal run may take")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the results as JSON")
	return cmd
}

// ConformReport is the output of `stratus engine conform --json`.
type ConformReport struct {
	Command []string         `json:"command"`
	Passed  bool             `json:"passed"`
	Results []conform.Result `json:"results"`
}

func runEngineConform(o *EngineConformOptions) error {
	if o.Command == "" {
		return usageError{fmt.Errorf("no engine command: name it after --")}
	}
	if o.GraceMS < 0 || o.TimeoutMS < 0 {
		return usageError{fmt.Errorf("--grace-ms %d, --timeout-ms %d: must not be negative (0 means the default)", o.GraceMS, o.TimeoutMS)}
	}
	if _, err := exec.LookPath(o.Command); err != nil {
		return usageError{fmt.Errorf("engine command %q: %w", o.Command, err)}
	}
	t := conform.Target{Command: o.Command, Args: o.Args, Kind: o.Kind, Input: json.RawMessage(o.Input), GraceMS: o.GraceMS, TimeoutMS: o.TimeoutMS}
	if err := t.Validate(); err != nil {
		return usageError{fmt.Errorf("--input: %w", err)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := conform.Run(ctx, t)
	if err != nil {
		return usageError{err}
	}
	passed := conform.Passed(results)
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		enc.Encode(ConformReport{Command: append([]string{o.Command}, o.Args...), Passed: passed, Results: results})
	} else {
		tw := tabwriter.NewWriter(o.IO.Out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tdocs/child-contract.md\tSTATUS\tDETAIL")
		counts := map[conform.Status]int{}
		for _, r := range results {
			counts[r.Status]++
			// A detail quotes what the engine under test wrote: one cell,
			// escaped (docs/security.md § Text an engine wrote).
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Section, r.Status, safetext.Line(r.Detail))
		}
		tw.Flush()
		fmt.Fprintf(o.IO.Out, "%d passed, %d failed, %d skipped\n", counts[conform.Pass], counts[conform.Fail], counts[conform.Skip])
	}
	if !passed {
		return &exitError{code: ExitFailed}
	}
	return nil
}
