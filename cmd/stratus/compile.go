package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/runcheck"
)

// CompileOptions are the flags of `stratus compile`.
type CompileOptions struct {
	IO      IO
	Names   []string
	All     bool
	Builtin bool
	Dir     string
	Flows   string
	OutDir  string
	// Structural checks only what the compiler needs (graph integrity and
	// the security ceiling, role_file containment but not existence), so a
	// flow set from elsewhere compiles without its role files, tools or
	// config (what `make statemachines` does for the worc peer flows).
	Structural bool
}

func newCompileCmd(io IO) *cobra.Command {
	o := &CompileOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "compile [NAME... | --all] [--builtin] [--out-dir DIR]",
		Short: "Compile flows to Amazon States Language",
		Long: `compile validates each flow and writes its state machine as ASL JSON: to stdout
for one flow, or to OUT-DIR/<flow>.asl.json. --builtin compiles the flows built
into this binary (what 'make statemachines' commits under statemachine/);
--structural skips the role-file existence check, for a flow set from
elsewhere (make statemachines compiles worc's peer flows into
statemachine/worc/ this way).`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.Names = args
			return runCompile(o)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "compile every flow")
	cmd.Flags().BoolVar(&o.Builtin, "builtin", false, "compile the built-in flows instead of DIR/.stratus/flows")
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().StringVar(&o.Flows, "flows", "", "flows directory (default DIR/.stratus/flows)")
	cmd.Flags().StringVar(&o.OutDir, "out-dir", "", "write <flow>.asl.json files here instead of stdout")
	cmd.Flags().BoolVar(&o.Structural, "structural", false, "check only the graph and the security ceiling, not that role files exist")
	return cmd
}

func runCompile(o *CompileOptions) error {
	var load func(name string) (*flow.Flow, error)
	var all []string
	if o.Builtin {
		load = func(name string) (*flow.Flow, error) {
			p := "flows/" + name + ".yaml"
			data, err := fs.ReadFile(builtin.Flows, p)
			if err != nil {
				return nil, usageError{fmt.Errorf("no built-in flow %q; built-ins: %s", name, strings.Join(builtin.Names, ", "))}
			}
			f, err := flow.Parse(name+".yaml", data)
			if err != nil {
				return nil, err
			}
			if probs := flow.Fatal(flow.Validate(f, flow.ValidateOptions{})); len(probs) > 0 {
				return nil, fmt.Errorf("built-in flow %s: %s", name, probs[0])
			}
			return f, nil
		}
		all = builtin.Names
	} else {
		dir := o.Flows
		if dir == "" {
			dir = filepath.Join(o.Dir, orchestrator.StateDir, orchestrator.FlowsDir)
		}
		load = func(name string) (*flow.Flow, error) {
			f, err := flow.Load(dir, name)
			if err != nil {
				return nil, err
			}
			if o.Structural {
				if probs := flow.Fatal(flow.Validate(f, flow.ValidateOptions{})); len(probs) > 0 {
					return nil, fmt.Errorf("flow %s: %s", name, probs[0])
				}
				return f, nil
			}
			return f, runcheck.Check(f, dir)
		}
		matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, m := range matches {
			all = append(all, strings.TrimSuffix(filepath.Base(m), ".yaml"))
		}
		sort.Strings(all)
	}
	names := o.Names
	if o.All {
		if len(names) > 0 {
			return usageError{fmt.Errorf("give flow names or --all, not both")}
		}
		if len(all) == 0 {
			return usageError{fmt.Errorf("--all: no flows (*.yaml) found")}
		}
		names = all
	}
	if len(names) == 0 {
		return usageError{fmt.Errorf("name a flow or pass --all")}
	}
	if len(names) > 1 && o.OutDir == "" {
		return usageError{fmt.Errorf("compiling %d flows needs --out-dir", len(names))}
	}
	for _, name := range names {
		f, err := load(name)
		if err != nil {
			return err
		}
		def, err := compiler.Compile(f, compiler.Options{})
		if err != nil {
			return err
		}
		if o.OutDir == "" {
			o.IO.Out.Write(def)
			continue
		}
		if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
			return err
		}
		out := filepath.Join(o.OutDir, name+".asl.json")
		if err := os.WriteFile(out, def, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Err, "wrote %s\n", out)
	}
	return nil
}
