package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/flowgraph"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// GraphOptions are the flags of `stratus graph`.
type GraphOptions struct {
	IO      IO
	Name    string
	Dir     string
	Builtin bool
	Format  string
}

func newGraphCmd(io IO) *cobra.Command {
	o := &GraphOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "graph FLOW [--dir DIR | --builtin] [--format mermaid|dot]",
		Short: "Print a flow as a graph: Mermaid (default) or Graphviz dot",
		Long: `graph prints flow FLOW (its task_type) of DIR/.stratus/flows, or a built-in
flow with --builtin, as a graph: each node with its kind, each edge with its
outcome, each loop with its name and budget (drawn dotted or dashed).
--format mermaid (default) pastes into a Markdown file GitHub renders;
--format dot pipes into Graphviz (dot -Tsvg).

Exit status: 0 printed, 2 no such flow, an invalid one, or bad flags.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			o.Name = args[0]
			return runGraph(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.Builtin, "builtin", false, "a flow built into this binary instead of DIR/.stratus/flows")
	cmd.Flags().StringVar(&o.Format, "format", "mermaid", "mermaid or dot")
	return cmd
}

func runGraph(o *GraphOptions) error {
	if o.Format != "mermaid" && o.Format != "dot" {
		return usageError{fmt.Errorf("--format %q: valid: mermaid, dot", o.Format)}
	}
	var f *flow.Flow
	var err error
	if o.Builtin {
		data, rerr := fs.ReadFile(builtin.Flows, "flows/"+o.Name+".yaml")
		if rerr != nil {
			return usageError{fmt.Errorf("no built-in flow %q; built-ins: %s", o.Name, strings.Join(builtin.Names, ", "))}
		}
		f, err = flow.Parse(o.Name+".yaml", data)
	} else {
		f, err = flow.Load(filepath.Join(o.Dir, orchestrator.StateDir, orchestrator.FlowsDir), o.Name)
	}
	if err != nil {
		return usageError{err}
	}
	if probs := flow.Fatal(flow.Validate(f, flow.ValidateOptions{})); len(probs) > 0 {
		return usageError{fmt.Errorf("flow %s is not valid: %s (stratus validate %s says all)", o.Name, probs[0], o.Name)}
	}
	g := flowgraph.Build(f)
	if o.Format == "dot" {
		_, err = fmt.Fprint(o.IO.Out, g.Dot())
	} else {
		_, err = fmt.Fprint(o.IO.Out, g.Mermaid())
	}
	return err
}
