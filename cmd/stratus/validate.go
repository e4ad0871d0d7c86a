package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// ValidateOptions are the flags of `stratus validate`.
type ValidateOptions struct {
	IO    IO
	Names []string
	All   bool
	Dir   string
	Flows string
	JSON  bool
}

func newValidateCmd(io IO) *cobra.Command {
	o := &ValidateOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "validate [NAME... | --all]",
		Short: "Validate flows (seed 004 § Fatal validation) and list every problem",
		Long: `validate loads each named flow (its task_type) from DIR/.stratus/flows/, or the
directory given with --flows, and lists every problem with file:line:column.
Exit status 1 when any problem is fatal.`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.Names = args
			return runValidate(o)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "validate every flow in the flows directory")
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().StringVar(&o.Flows, "flows", "", "flows directory (default DIR/.stratus/flows)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print problems as JSON")
	return cmd
}

// FlowReport is one flow's result in `validate --json`.
type FlowReport struct {
	Flow     string         `json:"flow"`
	Fatal    int            `json:"fatal"`
	Problems []flow.Problem `json:"problems"`
}

func runValidate(o *ValidateOptions) error {
	dir := o.Flows
	if dir == "" {
		dir = filepath.Join(o.Dir, orchestrator.StateDir, orchestrator.FlowsDir)
	}
	names := o.Names
	if o.All {
		if len(names) > 0 {
			return usageError{fmt.Errorf("give flow names or --all, not both")}
		}
		matches, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, m := range matches {
			names = append(names, strings.TrimSuffix(filepath.Base(m), ".yaml"))
		}
		sort.Strings(names)
		if len(names) == 0 {
			return usageError{fmt.Errorf("no flows (*.yaml) in %s", dir)}
		}
	}
	if len(names) == 0 {
		return usageError{fmt.Errorf("name a flow (its task_type) or pass --all")}
	}
	if _, err := os.Stat(dir); err != nil {
		return usageError{fmt.Errorf("flows directory: %w", err)}
	}
	// With a config at hand, check config consistency too (seed 004 §
	// Fatal validation: a pinned provider must be allowed).
	var cfg *config.Config
	if c, err := config.Load(filepath.Join(o.Dir, orchestrator.StateDir, orchestrator.ConfigFile)); err == nil {
		cfg = c
	} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return err
	}
	var reports []FlowReport
	fatal := 0
	for _, name := range names {
		r := FlowReport{Flow: name, Problems: []flow.Problem{}}
		f, err := flow.Load(dir, name)
		var pe *flow.ParseError
		switch {
		case errors.As(err, &pe):
			r.Problems = append(r.Problems, pe.Problems...)
		case err != nil:
			// No such flow, or a name that is not a flow's task_type.
			return usageError{err}
		default:
			r.Problems = append(r.Problems, flow.Validate(f, flow.ValidateOptions{RoleFileRoot: dir})...)
			for _, p := range orchestrator.Preflight(f, cfg, nil) {
				// A kind this build cannot run yet is a warning: the flow is valid.
				p.Fatal = !strings.Contains(p.Message, "is not supported by this build")
				r.Problems = append(r.Problems, p)
			}
		}
		for _, p := range r.Problems {
			if p.Fatal {
				r.Fatal++
			}
		}
		fatal += r.Fatal
		reports = append(reports, r)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		enc.Encode(reports)
	} else {
		for _, r := range reports {
			for _, p := range r.Problems {
				sev := "warning"
				if p.Fatal {
					sev = "error"
				}
				fmt.Fprintf(o.IO.Out, "%s: %s\n", sev, p.String())
			}
			status := "ok"
			if r.Fatal > 0 {
				status = fmt.Sprintf("%d fatal", r.Fatal)
			}
			fmt.Fprintf(o.IO.Out, "flow %s: %s (%d problems)\n", r.Flow, status, len(r.Problems))
		}
	}
	if fatal > 0 {
		return &exitError{code: ExitFailed}
	}
	return nil
}
