package flowgraph

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Layout places the graph for drawing, top to bottom, the way layered
// drawings (Sugiyama et al. 1981; Graphviz dot) do:
//
//  1. each node goes on the layer of its longest forward path from a root
//     (back edges are read reversed, so every loop points up);
//  2. an edge spanning several layers gets a waypoint on each layer it
//     passes, which takes a slot in that layer like a narrow node, so no
//     edge runs through a node;
//  3. the order within each layer is improved by barycenter sweeps, down
//     and up, keeping the order with the fewest crossings between layers;
//  4. x positions pull each node and waypoint toward its neighbours'
//     (averaged, in order, never closer than the gap).
//
// Forward edges leave a node's bottom and enter the next's top; a loop
// leaves its source's top and enters its target's bottom, routed through
// its own waypoints; the edges on one side of a box meet it spread in the
// order of where they go (portsOf). A self-loop is drawn on the node's
// right side. Sizes in px.
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
	// LabelRoom is the room left and right of the drawing for edge labels.
	LabelRoom = 150.0
	// WaypointW is the width a waypoint takes in its layer.
	WaypointW = 16.0
)

// item is a node or a waypoint in a layer.
type item struct {
	node  int     // index in Graph.Nodes; -1 for a waypoint
	layer int     //
	pos   int     // order within the layer
	x     float64 // center
	w     float64
	up    []int // items linked on the layer above
	down  []int // items linked on the layer below
}

// Layout lays the graph out (see Layout).
func (g *Graph) Layout() *Layout {
	index := map[string]int{}
	for i, n := range g.Nodes {
		index[n.ID] = i
	}
	layer := make([]int, len(g.Nodes))
	// Longest path over forward edges (a DAG once back edges are out):
	// relax repeatedly; at most len(nodes) rounds.
	for range g.Nodes {
		changed := false
		for _, e := range g.Edges {
			a, okA := index[e.From]
			b, okB := index[e.To]
			if e.Back || !okA || !okB {
				continue
			}
			if l := layer[a] + 1; l > layer[b] {
				layer[b], changed = l, true
			}
		}
		if !changed {
			break
		}
	}
	items := make([]*item, len(g.Nodes))
	maxLayer := 0
	for i := range g.Nodes {
		items[i] = &item{node: i, layer: layer[i], w: NodeW}
		maxLayer = max(maxLayer, layer[i])
	}
	link := func(a, b int) { // a above b
		items[a].down = append(items[a].down, b)
		items[b].up = append(items[b].up, a)
	}
	// chains[i] are edge i's items from its upper end to its lower end
	// (nil: drawn apart: a self-loop, or a loop within one layer).
	chains := make([][]int, len(g.Edges))
	for i, e := range g.Edges {
		a, okA := index[e.From]
		b, okB := index[e.To]
		if !okA || !okB {
			continue
		}
		if e.Back {
			a, b = b, a // read up: the target is above
		}
		if layer[a] >= layer[b] {
			continue
		}
		chain := []int{a}
		for l := layer[a] + 1; l < layer[b]; l++ {
			items = append(items, &item{node: -1, layer: l, w: WaypointW})
			link(chain[len(chain)-1], len(items)-1)
			chain = append(chain, len(items)-1)
		}
		link(chain[len(chain)-1], b)
		chains[i] = append(chain, b)
	}
	rows := make([][]int, maxLayer+1)
	for i, it := range items { // nodes in flow order, then waypoints
		rows[it.layer] = append(rows[it.layer], i)
	}
	order(items, rows, chains)
	place(items, rows)

	// The drawing: shift so the leftmost box starts after the label room.
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, it := range items {
		minX, maxX = min(minX, it.x-it.w/2), max(maxX, it.x+it.w/2)
	}
	shift := Margin + LabelRoom - minX
	for _, it := range items {
		it.x += shift
	}
	top := func(l int) float64 { return Margin + float64(l)*(NodeH+GapY) }
	lo := &Layout{
		Width:  maxX + shift + LabelRoom + Margin,
		Height: top(maxLayer) + NodeH + GapY/2 + Margin,
	}
	for i, n := range g.Nodes {
		it := items[i]
		lo.Nodes = append(lo.Nodes, Placed{Node: n, X: it.x - NodeW/2, Y: top(it.layer), W: NodeW, H: NodeH, Layer: it.layer})
	}
	ports := portsOf(items, chains)
	for i, e := range g.Edges {
		a, okA := index[e.From]
		if _, okB := index[e.To]; !okA || !okB {
			continue
		}
		r := Routed{Edge: e, Anchor: "start"}
		switch {
		case chains[i] == nil:
			r.Path, r.LabelX, r.LabelY = aside(lo.Nodes[a], lo.Nodes[index[e.To]])
		default:
			r.Path, r.LabelX, r.LabelY, r.Anchor = route(items, chains[i], ports[i], e.Back, top)
		}
		lo.Edges = append(lo.Edges, r)
	}
	separateLabels(lo.Edges, lo.Nodes)
	return lo
}

// LabelCharW is the width a label's character takes, px (11 px text);
// a loop's label is drawn with " · spent N/M" after it (LoopSuffix).
const (
	LabelCharW = 6.0
	LoopSuffix = len(" · spent 10/10")
)

// LabelBox is the box a routed edge's label takes, px.
func LabelBox(r Routed) (x0, y0, x1, y1 float64) {
	n := len([]rune(r.Label()))
	if r.Loop != "" {
		n += LoopSuffix
	}
	w := LabelCharW * float64(n)
	x0 = r.LabelX
	if r.Anchor == "end" {
		x0 -= w
	}
	return x0, r.LabelY - 9, x0 + w, r.LabelY + 3
}

// separateLabels moves a label up or down, a line at a time (the nearest
// place first), while it overlaps a label placed before it or a node: two
// loops out of one layer would otherwise print on one line, unreadable.
func separateLabels(es []Routed, nodes []Placed) {
	free := func(i int, dy float64) bool {
		r := es[i]
		r.LabelY += dy
		ax0, ay0, ax1, ay1 := LabelBox(r)
		for j := range i {
			if es[j].Label() == "" {
				continue
			}
			bx0, by0, bx1, by1 := LabelBox(es[j])
			if ax0 < bx1 && ax1 > bx0 && ay0 < by1 && ay1 > by0 {
				return false
			}
		}
		for _, n := range nodes {
			if ax0 < n.X+n.W && ax1 > n.X && ay0 < n.Y+n.H && ay1 > n.Y {
				return false
			}
		}
		return true
	}
	for i := range es {
		if es[i].Label() == "" {
			continue
		}
		for _, dy := range []float64{0, 13, -13, 26, -26, 39, -39} {
			if free(i, dy) {
				es[i].LabelY += dy
				break
			}
		}
	}
}

// portsOf places where each chained edge meets its boxes: the edges on one
// side of a box (its bottom: those going down from it; its top: those
// coming down into it, loops included) spread along that side in the order
// of where they go, so that two edges sharing a box never cross at it.
// ports[i] is edge i's x on its upper box and on its lower box.
func portsOf(items []*item, chains [][]int) [][2]float64 {
	type end struct {
		edge, side int     // side 0: the upper box's bottom; 1: the lower box's top
		other      float64 // the x the edge heads to
	}
	sides := map[[2]int][]end{} // (item, side) → its edges
	for i, ch := range chains {
		if ch == nil {
			continue
		}
		up, low := ch[0], ch[len(ch)-1]
		sides[[2]int{up, 0}] = append(sides[[2]int{up, 0}], end{i, 0, items[ch[1]].x})
		sides[[2]int{low, 1}] = append(sides[[2]int{low, 1}], end{i, 1, items[ch[len(ch)-2]].x})
	}
	ports := make([][2]float64, len(chains))
	for k, es := range sides {
		sort.SliceStable(es, func(a, b int) bool {
			if es[a].other != es[b].other {
				return es[a].other < es[b].other
			}
			return es[a].edge < es[b].edge
		})
		n := float64(len(es))
		step := 0.0
		if n > 1 {
			step = min(24, NodeW*0.6/(n-1))
		}
		for j, e := range es {
			ports[e.edge][e.side] = items[k[0]].x + (float64(j)-(n-1)/2)*step
		}
	}
	return ports
}

// order improves the order within each layer: from each of four starts
// (flow order with each layer's waypoints after its nodes or before them,
// and both reversed), barycenter sweeps (down from the first layer, up
// from the last; four rounds), each followed by sifting; the order with
// the fewest crossings between layers wins.
func order(items []*item, rows [][]int, chains [][]int) {
	renumber := func(rows [][]int) {
		for _, row := range rows {
			for p, i := range row {
				items[i].pos = p
			}
		}
	}
	var best [][]int
	bestN := math.MaxInt
	for start := range 4 {
		try := snapshot(rows)
		for _, row := range try {
			if start&1 == 1 { // waypoints first
				sort.SliceStable(row, func(a, b int) bool { return items[row[a]].node < 0 && items[row[b]].node >= 0 })
			}
			if start&2 == 2 {
				slices.Reverse(row)
			}
		}
		renumber(try)
		if n := crossings(items, try); n < bestN {
			best, bestN = snapshot(try), n
		}
		for range 4 {
			for l := 1; l < len(try); l++ {
				barycenter(items, try[l], func(it *item) []int { return it.up })
			}
			for l := len(try) - 2; l >= 0; l-- {
				barycenter(items, try[l], func(it *item) []int { return it.down })
			}
			sift(items, try, chains)
			if n := crossings(items, try); n < bestN {
				best, bestN = snapshot(try), n
			}
		}
	}
	copy(rows, best)
	renumber(rows)
}

// barycenter orders row by the mean position of each item's links (by),
// an item without any keeping its place.
func barycenter(items []*item, row []int, by func(*item) []int) {
	bary := map[int]float64{}
	for _, i := range row {
		ns := by(items[i])
		if len(ns) == 0 {
			bary[i] = float64(items[i].pos)
			continue
		}
		sum := 0.0
		for _, n := range ns {
			sum += float64(items[n].pos)
		}
		bary[i] = sum / float64(len(ns))
	}
	sort.SliceStable(row, func(a, b int) bool { return bary[row[a]] < bary[row[b]] })
	for p, i := range row {
		items[i].pos = p
	}
}

// sift moves each item of each layer to the place in its layer with the
// fewest crossings, while a move lowers them (Matuszewski et al. 1999;
// adjacent swaps alone — dot's "transpose" — stop short of it).
//
// An edge's waypoints also move together, to the left or the right end of
// every layer they are on: a long edge that should run down the other side
// of the drawing is one move, not a run of moves each worse on its own.
func sift(items []*item, rows [][]int, chains [][]int) {
	set := func(row []int) {
		for p, i := range row {
			items[i].pos = p
		}
	}
	for pass := 0; pass < 10; pass++ {
		improved := false
		for _, ch := range chains {
			if len(ch) < 3 {
				continue
			}
			before := crossings(items, rows)
			kept := snapshot(rows)
			for _, side := range []int{0, 1} {
				for _, w := range ch[1 : len(ch)-1] {
					row := rows[items[w].layer]
					rest := slices.DeleteFunc(slices.Clone(row), func(i int) bool { return i == w })
					if side == 0 {
						copy(row, append([]int{w}, rest...))
					} else {
						copy(row, append(rest, w))
					}
					set(row)
				}
				if crossings(items, rows) < before {
					improved = true
					break
				}
				copy(rows, snapshot(kept))
				for _, row := range rows {
					set(row)
				}
			}
		}
		for _, row := range rows {
			for _, it := range slices.Clone(row) {
				from := slices.Index(row, it)
				bestAt, bestN := from, crossings(items, rows)
				rest := slices.Delete(slices.Clone(row), from, from+1)
				for at := 0; at <= len(rest); at++ {
					if at == from {
						continue
					}
					copy(row, slices.Insert(slices.Clone(rest), at, it))
					set(row)
					if n := crossings(items, rows); n < bestN {
						bestAt, bestN = at, n
					}
				}
				copy(row, slices.Insert(slices.Clone(rest), bestAt, it))
				set(row)
				improved = improved || bestAt != from
			}
		}
		if !improved {
			return
		}
	}
}

func snapshot(rows [][]int) [][]int {
	c := make([][]int, len(rows))
	for l, row := range rows {
		c[l] = append([]int(nil), row...)
	}
	return c
}

// crossings counts pairs of links between adjacent layers that cross.
func crossings(items []*item, rows [][]int) int {
	n := 0
	for l := 0; l+1 < len(rows); l++ {
		var links [][2]int
		for _, i := range rows[l] {
			for _, j := range items[i].down {
				links = append(links, [2]int{items[i].pos, items[j].pos})
			}
		}
		for a := range links {
			for b := a + 1; b < len(links); b++ {
				if (links[a][0]-links[b][0])*(links[a][1]-links[b][1]) < 0 {
					n++
				}
			}
		}
	}
	return n
}

// place sets each item's x (its center): packed in order, then pulled
// toward the mean x of its links, in sweeps down and up, each layer kept
// in order with its gaps.
func place(items []*item, rows [][]int) {
	gap := func(a, b *item) float64 {
		if a.node < 0 && b.node < 0 {
			return a.w/2 + b.w/2 + GapX/4
		}
		return a.w/2 + b.w/2 + GapX/2
	}
	for _, row := range rows {
		x := 0.0
		for p, i := range row {
			if p > 0 {
				x += gap(items[row[p-1]], items[i])
			}
			items[i].x = x
		}
	}
	settle := func(row []int, want []float64) {
		// Closest positions to want that keep order and gaps: push right,
		// then pull back left, then split the difference.
		n := len(row)
		r := make([]float64, n)
		for p := range n {
			r[p] = want[p]
			if p > 0 {
				r[p] = max(r[p], r[p-1]+gap(items[row[p-1]], items[row[p]]))
			}
		}
		l := make([]float64, n)
		for p := n - 1; p >= 0; p-- {
			l[p] = want[p]
			if p < n-1 {
				l[p] = min(l[p], l[p+1]-gap(items[row[p]], items[row[p+1]]))
			}
		}
		for p := range n {
			items[row[p]].x = (r[p] + l[p]) / 2
		}
		for p := 1; p < n; p++ { // the average of two valid placements keeps the gaps
			items[row[p]].x = max(items[row[p]].x, items[row[p-1]].x+gap(items[row[p-1]], items[row[p]]))
		}
	}
	pull := func(l int, by func(*item) []int) {
		row := rows[l]
		want := make([]float64, len(row))
		for p, i := range row {
			want[p] = items[i].x
			if ns := by(items[i]); len(ns) > 0 {
				sum := 0.0
				for _, n := range ns {
					sum += items[n].x
				}
				want[p] = sum / float64(len(ns))
			}
		}
		settle(row, want)
	}
	for range 8 {
		for l := 1; l < len(rows); l++ {
			pull(l, func(it *item) []int { return it.up })
		}
		for l := len(rows) - 2; l >= 0; l-- {
			pull(l, func(it *item) []int { return it.down })
		}
	}
}

// route draws an edge through its chain of items (upper end first): out
// of the upper box's bottom, straight through each waypoint, into the
// lower box's top, each hop a vertical-tangent curve. A loop is the same
// path read the other way, from its source's top into its target's
// bottom. port is where it meets its upper and its lower box. The label sits on the hop that
// arrives (forward) or on the first hop up (a loop).
func route(items []*item, chain []int, port [2]float64, back bool, top func(int) float64) (string, float64, float64, string) {
	type pt struct{ x, y float64 }
	var pts []pt // top to bottom, pairs: leave, arrive
	first, last := items[chain[0]], items[chain[len(chain)-1]]
	pts = append(pts, pt{port[0], top(first.layer) + NodeH})
	if back {
		pts[0].y += 6 // room for the arrow into the target's bottom
	}
	for _, i := range chain[1 : len(chain)-1] {
		it := items[i]
		pts = append(pts, pt{it.x, top(it.layer)}, pt{it.x, top(it.layer) + NodeH})
	}
	end := pt{port[1], top(last.layer)}
	if !back {
		end.y -= 6 // room for the arrow into the target's top
	}
	pts = append(pts, end)
	if back { // drawn from the source (below) up to the target
		for a, b := 0, len(pts)-1; a < b; a, b = a+1, b-1 {
			pts[a], pts[b] = pts[b], pts[a]
		}
	}
	var d strings.Builder
	fmt.Fprintf(&d, "M%.1f,%.1f", pts[0].x, pts[0].y)
	for k := 1; k < len(pts); k++ {
		a, b := pts[k-1], pts[k]
		if a.x == b.x && k%2 == 0 { // through a waypoint
			fmt.Fprintf(&d, " L%.1f,%.1f", b.x, b.y)
			continue
		}
		my := (a.y + b.y) / 2
		fmt.Fprintf(&d, " C%.1f,%.1f %.1f,%.1f %.1f,%.1f", a.x, my, b.x, my, b.x, b.y)
	}
	// The label: near the target on the arriving hop (forward), so two
	// edges out of one node keep their labels apart; beside the first hop
	// up (a loop).
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	t := 0.8
	if back {
		a, b, t = pts[0], pts[1], 0.3
	}
	x, y := a.x+(b.x-a.x)*t, a.y+(b.y-a.y)*t
	if b.x < a.x {
		return d.String(), x - 4, y, "end"
	}
	return d.String(), x + 4, y, "start"
}

// aside draws an edge between two boxes of one layer: to itself, a loop
// on its right side; to a node beside it, a bracket below the row, out of
// the source's bottom and into the target's.
func aside(a, b Placed) (string, float64, float64) {
	if a.ID == b.ID {
		x := a.X + a.W + 28
		ya, yb := a.Y+a.H*0.3, a.Y+a.H*0.7
		return fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", a.X+a.W, ya, x, ya-14, x, yb+14, a.X+a.W+6, yb), x + 4, (ya + yb) / 2
	}
	xa, xb := a.X+a.W*0.75, b.X+b.W*0.75
	y := a.Y + a.H + GapY/3
	return fmt.Sprintf("M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f", xa, a.Y+a.H, xa, y, xb, y, xb, b.Y+b.H+6), (xa+xb)/2 + 4, y + 12
}
