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
	"github.com/stratusflow/stratus/internal/retry"
	"github.com/stratusflow/stratus/internal/safetext"
)

// toolsDirName is the tool registry under DIR/.stratus/ (worc's
// .worc/tools/; seed 004 § tools).
const toolsDirName = "tools"

// ValidateOptions are the flags of `stratus validate`.
type ValidateOptions struct {
	IO    IO
	Names []string
	All   bool
	Dir   string
	Flows string // default DIR/.stratus/flows
	Tools string // default DIR/.stratus/tools
	JSON  bool
}

func newValidateCmd(io IO) *cobra.Command {
	o := &ValidateOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "validate [NAME... | --all]",
		Short: "Validate flows (seed 004 § Fatal validation) and list every problem",
		Long: `validate loads each named flow (its task_type) from DIR/.stratus/flows/, or the
directory given with --flows, and lists every problem with file:line:column,
sorted by position: the graph-integrity and security-ceiling layers always;
the config-consistency layer when DIR/.stratus/config.yaml exists (providers,
reasoning, Codex network, skills, supervisor.observe.mode); the tool registry
(every tool node's executable in DIR/.stratus/tools/, or --tools); and the
warnings (anti-drift lint of role files, missing role files, loop budgets, and
what ` + "`stratus doctor`" + ` finds wrong with the providers the flow uses on this
machine: a command that does not resolve, an unset "$NAME"). Exit status 1 when
any problem is fatal.`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.Names = args
			return runValidate(o)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "validate every flow in the flows directory")
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().StringVar(&o.Flows, "flows", "", "flows directory (default DIR/.stratus/flows)")
	cmd.Flags().StringVar(&o.Tools, "tools", "", "tool registry directory (default DIR/.stratus/tools)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print problems as JSON")
	return cmd
}

// ValidateReport is the output of `validate --json`.
type ValidateReport struct {
	// Config is the config.yaml the config-aware layer read; "" when there
	// was none and that layer was skipped (Notes says so).
	Config   string       `json:"config"`
	ToolsDir string       `json:"tools_dir"`
	Notes    []string     `json:"notes"`
	Fatal    int          `json:"fatal"`
	Flows    []FlowReport `json:"flows"`
}

// FlowReport is one flow's result in `validate --json`.
type FlowReport struct {
	Flow     string         `json:"flow"`
	Fatal    int            `json:"fatal"`
	Problems []flow.Problem `json:"problems"`
}

func runValidate(o *ValidateOptions) error {
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	dir := o.Flows
	if dir == "" {
		dir = filepath.Join(state, orchestrator.FlowsDir)
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
	rep := ValidateReport{ToolsDir: o.Tools, Notes: []string{}, Flows: []FlowReport{}}
	if rep.ToolsDir == "" {
		rep.ToolsDir = filepath.Join(state, toolsDirName)
	}
	// With a config at hand, check config consistency too (seed 004 §
	// Fatal validation, third layer); without one, say once that it was skipped.
	cfgPath := filepath.Join(state, orchestrator.ConfigFile)
	cfg, err := config.Load(cfgPath)
	switch {
	case err == nil:
		rep.Config = cfgPath
		// Valid, but worth a word: more provider hops than providers.
		rep.Notes = append(rep.Notes, retry.FromConfig(cfg).Notes()...)
	case stratus.ErrorCode(err) == stratus.ENOTFOUND:
		rep.Notes = append(rep.Notes, fmt.Sprintf("no %s: the config-aware layer (providers, reasoning, Codex network, skills, supervisor.observe.mode, max_fix_cycles) is skipped", cfgPath))
		cfg = nil
	default:
		return err
	}
	if n := keyModeNote(filepath.Join(state, orchestrator.KeyFile)); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	opt := flow.ValidateOptions{RoleFileRoot: dir, Config: cfg, ToolsDir: rep.ToolsDir}
	for _, name := range names {
		r := FlowReport{Flow: name, Problems: []flow.Problem{}}
		f, err := flow.Load(dir, name)
		var pe *flow.ParseError
		var parsed []flow.Problem
		switch {
		case errors.As(err, &pe):
			// What did parse is checked too (worc: all fatal, all
			// collected), leaving out what restates a parse problem.
			parsed, f = pe.Problems, pe.Flow
		case err != nil:
			// No such flow, or a name that is not a flow's task_type.
			return usageError{err}
		}
		if f != nil {
			r.Problems = append(r.Problems, flow.Validate(f, opt)...)
			// Preflight without a config or task says which checkers this
			// build cannot run: a warning, the flow itself is valid.
			for _, p := range orchestrator.Preflight(f, nil, nil) {
				p.Fatal = !strings.Contains(p.Message, "is not supported by this build")
				r.Problems = append(r.Problems, p)
			}
			// A pull-request policy Stratus does not act on: said, never silent.
			r.Problems = append(r.Problems, orchestrator.PublishingWarnings(f)...)
			// What `stratus doctor` says of the providers this flow uses.
			r.Problems = append(r.Problems, providerWarnings(o.Dir, cfgPath, cfg, f)...)
		}
		r.Problems = append(append([]flow.Problem{}, parsed...), flow.WithoutCascades(pe, r.Problems)...)
		flow.SortProblems(filepath.Join(dir, name+".yaml"), r.Problems)
		for _, p := range r.Problems {
			if p.Fatal {
				r.Fatal++
			}
		}
		rep.Fatal += r.Fatal
		rep.Flows = append(rep.Flows, r)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, n := range rep.Notes {
			fmt.Fprintf(o.IO.Out, "note: %s\n", safetext.Line(n))
		}
		for _, r := range rep.Flows {
			for _, p := range r.Problems {
				sev := "warning"
				if p.Fatal {
					sev = "error"
				}
				// A problem quotes the flow's files, which an engine working
				// in the work dir can write (docs/security.md § Text an engine wrote).
				fmt.Fprintf(o.IO.Out, "%s: %s\n", sev, safetext.Line(p.String()))
			}
			status := "ok"
			if r.Fatal > 0 {
				status = fmt.Sprintf("%d fatal", r.Fatal)
			}
			fmt.Fprintf(o.IO.Out, "flow %s: %s (%s)\n", r.Flow, status, problemCount(len(r.Problems)))
		}
	}
	if rep.Fatal > 0 {
		return &exitError{code: ExitFailed}
	}
	return nil
}

// problemCount is "1 problem", "2 problems", "no problems".
func problemCount(n int) string {
	switch n {
	case 0:
		return "no problems"
	case 1:
		return "1 problem"
	}
	return fmt.Sprintf("%d problems", n)
}
