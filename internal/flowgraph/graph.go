// Package flowgraph is a flow drawn as a graph (issue 15 § 1-2): its
// nodes, its edges labelled with outcomes, which edges close a loop (a
// rework edge back to an earlier node, with its budget), and a layered
// layout for drawing it. `stratus graph` prints it as Mermaid or Graphviz
// dot; the run viewer (internal/webui) draws the layout as SVG.
package flowgraph

import (
	"fmt"
	"sort"
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

// Layout places the graph for drawing, top to bottom: each node on the
// layer of its longest forward path from a root, in flow order within a
// layer; back edges are drawn in lanes on the right. Sizes in px.
type Layout struct {
	Width, Height float64
	Nodes         []Placed
	Edges         []Routed
}

// Placed is a node's box: top-left X, Y and its size.
type Placed struct {
	Node
	X, Y, W, H float64
	Layer      int
}

// Routed is an edge's path (SVG path data) and its label's anchor.
type Routed struct {
	Edge
	Path           string
	LabelX, LabelY float64
	Anchor         string // the label's text-anchor: start, or end for an edge going left
}

// Box sizes and gaps of a layout, px.
const (
	NodeW  = 168.0
	NodeH  = 46.0
	GapX   = 44.0
	GapY   = 64.0
	Margin = 24.0
	// LabelRoom is the room left of the nodes for a label of an edge
	// going left.
	LabelRoom = 150.0
	LaneW     = 26.0
)

// Layout lays the graph out (see Layout).
func (g *Graph) Layout() *Layout {
	layer := map[string]int{}
	index := map[string]int{}
	for i, n := range g.Nodes {
		index[n.ID] = i
	}
	// Longest path over forward edges (a DAG once back edges are out):
	// relax repeatedly; at most len(nodes) rounds.
	for range g.Nodes {
		changed := false
		for _, e := range g.Edges {
			if e.Back {
				continue
			}
			if _, ok := index[e.To]; !ok {
				continue
			}
			if l := layer[e.From] + 1; l > layer[e.To] {
				layer[e.To], changed = l, true
			}
		}
		if !changed {
			break
		}
	}
	rows := map[int][]string{}
	maxLayer, widest := 0, 0
	for _, n := range g.Nodes {
		l := layer[n.ID]
		rows[l] = append(rows[l], n.ID)
		maxLayer = max(maxLayer, l)
		widest = max(widest, len(rows[l]))
	}
	back := 0
	for _, e := range g.Edges {
		if e.Back {
			back++
		}
	}
	contentW := float64(widest)*NodeW + float64(widest-1)*GapX
	lo := &Layout{
		Width:  2*Margin + LabelRoom + contentW + float64(back)*LaneW + 90,             // lanes, and room for their labels
		Height: 2*Margin + float64(maxLayer+1)*NodeH + float64(maxLayer)*GapY + GapY/2, // a lane below the last row
	}
	pos := map[string]Placed{}
	layers := make([]int, 0, len(rows))
	for l := range rows {
		layers = append(layers, l)
	}
	sort.Ints(layers)
	for _, l := range layers {
		ids := rows[l]
		rowW := float64(len(ids))*NodeW + float64(len(ids)-1)*GapX
		x0 := Margin + LabelRoom + (contentW-rowW)/2
		for i, id := range ids {
			p := Placed{Node: g.Nodes[index[id]], X: x0 + float64(i)*(NodeW+GapX), Y: Margin + float64(l)*(NodeH+GapY), W: NodeW, H: NodeH, Layer: l}
			pos[id] = p
		}
	}
	for _, n := range g.Nodes {
		lo.Nodes = append(lo.Nodes, pos[n.ID])
	}
	lane := 0
	for _, e := range g.Edges {
		a, okA := pos[e.From]
		b, okB := pos[e.To]
		if !okA || !okB {
			continue
		}
		r := Routed{Edge: e, Anchor: "start"}
		if e.Back {
			// Out of the source's right side, up a lane right of every
			// node, into the target's right side.
			// Down out of the source first, below its row, so the lane
			// never crosses a node beside it.
			lane++
			x := Margin + LabelRoom + contentW + float64(lane)*LaneW
			below := a.Y + a.H + GapY/3 + float64(lane-1)*6
			y2 := b.Y + b.H/2
			r.Path = fmt.Sprintf("M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f", a.X+a.W/2, a.Y+a.H, a.X+a.W/2, below, x, below, x, y2, b.X+b.W+6, y2)
			r.LabelX, r.LabelY = x+4, (below+y2)/2
		} else {
			x1, y1 := a.X+a.W/2, a.Y+a.H
			x2, y2 := b.X+b.W/2, b.Y-6
			my := (y1 + y2) / 2
			r.Path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, y1, x1, my, x2, my, x2, y2)
			// Near the target, so two edges out of one node keep their
			// labels apart.
			r.LabelX, r.LabelY = x1+(x2-x1)*0.8+4, y1+(y2-y1)*0.72
			if x2 < x1 {
				r.LabelX, r.Anchor = x1+(x2-x1)*0.8-4, "end"
			}
		}
		lo.Edges = append(lo.Edges, r)
	}
	return lo
}
