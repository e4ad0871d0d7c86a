package main

import (
	"encoding/json"
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
	JSON    bool
}

func newGraphCmd(io IO) *cobra.Command {
	o := &GraphOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "graph FLOW [--dir DIR | --builtin] [--format mermaid|dot | --json]",
		Short: "Print a flow as a graph: Mermaid (default) or Graphviz dot",
		Long: `graph prints flow FLOW (its task_type) of DIR/.stratus/flows, or a built-in
flow with --builtin, as a graph: each node with its kind, each edge with its
outcome, each loop with its name and budget (drawn dotted or dashed).
--format mermaid (default) pastes into a Markdown file GitHub renders;
--format dot pipes into Graphviz (dot -Tsvg). --json prints the graph for a
program: {"flow", "nodes": [{"id", "kind"}], "edges": [{"from", "to",
"outcome", "loop", "budget", "back"}], "loops": [{"name", "budget"}]}, an
edge's outcome "" when it is unconditional, budget 0 for none, back true for
an edge that closes a loop.

Exit status: 0 printed, 2 no such flow, an invalid one, or bad flags.`,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.JSON && c.Flags().Changed("format") {
				return usageError{fmt.Errorf("give --format or --json, not both")}
			}
			return runGraph(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.Builtin, "builtin", false, "a flow built into this binary instead of DIR/.stratus/flows")
	cmd.Flags().StringVar(&o.Format, "format", "mermaid", "mermaid or dot")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the nodes, edges (with outcome) and loops (with budget) as JSON on stdout")
	return cmd
}

// GraphResult is what `stratus graph --json` prints.
type GraphResult struct {
	Flow  string      `json:"flow"`
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
	Loops []GraphLoop `json:"loops"`
}

// GraphNode is a node of GraphResult.
type GraphNode struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // agent | evaluator | checks | tool | hitl | publish
}

// GraphEdge is an edge of GraphResult: Outcome "" for an unconditional
// edge; Loop and Budget (0: none) for a loop's edge, Back for the edge
// that closes it.
type GraphEdge struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Outcome string `json:"outcome"`
	Loop    string `json:"loop,omitempty"`
	Budget  int    `json:"budget,omitempty"`
	Back    bool   `json:"back"`
}

// GraphLoop is a named loop of the flow and its iteration budget (0: none).
type GraphLoop struct {
	Name   string `json:"name"`
	Budget int    `json:"budget"`
}

// graphResult is g as `graph --json` prints it: each loop once, in the
// order its first edge comes.
func graphResult(g *flowgraph.Graph) GraphResult {
	r := GraphResult{Flow: g.Flow, Nodes: []GraphNode{}, Edges: []GraphEdge{}, Loops: []GraphLoop{}}
	for _, n := range g.Nodes {
		r.Nodes = append(r.Nodes, GraphNode{ID: n.ID, Kind: n.Kind})
	}
	seen := map[string]bool{}
	for _, e := range g.Edges {
		r.Edges = append(r.Edges, GraphEdge{From: e.From, To: e.To, Outcome: e.Outcome, Loop: e.Loop, Budget: e.Budget, Back: e.Back})
		if e.Loop != "" && !seen[e.Loop] {
			seen[e.Loop] = true
			r.Loops = append(r.Loops, GraphLoop{Name: e.Loop, Budget: e.Budget})
		}
	}
	return r
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
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(graphResult(g))
	}
	if o.Format == "dot" {
		_, err = fmt.Fprint(o.IO.Out, g.Dot())
	} else {
		_, err = fmt.Fprint(o.IO.Out, g.Mermaid())
	}
	return err
}
