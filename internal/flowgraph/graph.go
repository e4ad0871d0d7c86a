// Package flowgraph is a flow drawn as a graph: its nodes, its edges labelled
// with outcomes, which edges close a loop (a rework edge back to an earlier
// node, with its budget), and a layered layout for drawing it. `stratus
// graph` prints it as Mermaid or Graphviz dot; the run viewer
// (internal/webui) draws the layout as SVG.
package flowgraph

import (
	"fmt"
	"strings"

	"github.com/stratusflow/stratus/internal/flow"
)

// Graph is a flow's nodes and edges in flow order.
type Graph struct {
	Flow  string
	Nodes []Node
	Edges []Edge
}

// Node is one flow node.
type Node struct {
	ID   string
	Kind string // agent | evaluator | checks | tool | hitl | publish
}

// Edge is one flow edge. Back marks an edge that returns to a node at or
// above its source in the layering (a loop); Loop and Budget name the loop
// and its iteration cap (0: none).
type Edge struct {
	From, To, Outcome string
	Loop              string
	Budget            int
	Back              bool
}

// Label is the edge's label: its outcome ("" for an unconditional edge),
// and its loop with the budget ("rework · fix ≤5").
func (e Edge) Label() string {
	l := e.Outcome
	if e.Loop != "" {
		loop := e.Loop
		if e.Budget > 0 {
			loop += fmt.Sprintf(" ≤%d", e.Budget)
		}
		if l != "" {
			l += " · "
		}
		l += loop
	}
	return l
}

// Build draws f: its nodes in flow order; its edges, each back edge found
// by a depth-first walk from the first node (an edge to a node on the
// walk's path), each loop's budget from flow.budgets or the edge's own.
func Build(f *flow.Flow) *Graph {
	g := &Graph{Flow: f.Name}
	for _, n := range f.Nodes {
		g.Nodes = append(g.Nodes, Node{ID: n.ID, Kind: n.Kind})
	}
	out := map[string][]int{}
	for i, e := range f.Edges {
		budget := 0
		if e.Budget != nil {
			budget = *e.Budget
		} else if e.Loop != "" {
			budget = f.Budgets[e.Loop]
		}
		g.Edges = append(g.Edges, Edge{From: e.From, To: e.To, Outcome: e.Outcome, Loop: e.Loop, Budget: budget})
		out[e.From] = append(out[e.From], i)
	}
	// Back edges: an edge to a node still on the depth-first path.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var walk func(id string)
	walk = func(id string) {
		state[id] = onPath
		for _, i := range out[id] {
			switch state[g.Edges[i].To] {
			case onPath:
				g.Edges[i].Back = true
			case unseen:
				walk(g.Edges[i].To)
			}
		}
		state[id] = done
	}
	for _, n := range g.Nodes { // the first node, then any left unreached
		if state[n.ID] == unseen {
			walk(n.ID)
		}
	}
	return g
}

// Mermaid is the graph as a Mermaid flowchart (top to bottom): one shape
// per kind, each edge labelled, loops drawn dotted.
func (g *Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for _, n := range g.Nodes {
		open, shut := mermaidShape(n.Kind)
		fmt.Fprintf(&b, "  %s%s\"%s<br/><small>%s</small>\"%s\n", mermaidID(n.ID), open, n.ID, n.Kind, shut)
	}
	for _, e := range g.Edges {
		arrow := "-->"
		if e.Back {
			arrow = "-.->"
		}
		if l := e.Label(); l != "" {
			fmt.Fprintf(&b, "  %s %s|\"%s\"| %s\n", mermaidID(e.From), arrow, l, mermaidID(e.To))
		} else {
			fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.From), arrow, mermaidID(e.To))
		}
	}
	return b.String()
}

func mermaidShape(kind string) (string, string) {
	switch kind {
	case flow.KindEvaluator:
		return "{{", "}}"
	case flow.KindChecks, flow.KindTool:
		return "[/", "/]"
	case flow.KindHITL:
		return "([", "])"
	case flow.KindPublish:
		return "[[", "]]"
	}
	return "[", "]"
}

// mermaidID is a node id Mermaid takes as an identifier.
func mermaidID(id string) string {
	var b strings.Builder
	b.WriteString("n_")
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "_%x_", r)
		}
	}
	return b.String()
}

// Dot is the graph in Graphviz dot: one shape per kind, each edge
// labelled, loops dashed.
func (g *Graph) Dot() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [fontname=\"sans-serif\"];\n", g.Flow)
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "  %q [label=%q, shape=%s];\n", n.ID, n.ID+"\n"+n.Kind, dotShape(n.Kind))
	}
	for _, e := range g.Edges {
		attrs := []string{}
		if l := e.Label(); l != "" {
			attrs = append(attrs, fmt.Sprintf("label=%q", l))
		}
		if e.Back {
			attrs = append(attrs, "style=dashed", "constraint=false")
		}
		fmt.Fprintf(&b, "  %q -> %q", e.From, e.To)
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(attrs, ", "))
		}
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func dotShape(kind string) string {
	switch kind {
	case flow.KindEvaluator:
		return "hexagon"
	case flow.KindChecks, flow.KindTool:
		return "parallelogram"
	case flow.KindHITL:
		return "octagon"
	case flow.KindPublish:
		return "doubleoctagon"
	}
	return "box"
}
