package flowgraph_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus/internal/flowgraph"
)

// point and seg are a routed path as straight pieces (curves sampled).
type point struct{ x, y float64 }
type seg struct{ a, b point }

// polyline parses the SVG path data Layout writes (M, L, C absolute).
func polyline(d string) ([]seg, error) {
	f := strings.FieldsFunc(d, func(r rune) bool { return r == ' ' || r == ',' })
	var segs []seg
	var cur point
	num := func(i int) float64 {
		v, _ := strconv.ParseFloat(strings.TrimLeft(f[i], "MLC"), 64)
		return v
	}
	for i := 0; i < len(f); {
		switch f[i][0] {
		case 'M':
			cur = point{num(i), num(i + 1)}
			i += 2
		case 'L':
			p := point{num(i), num(i + 1)}
			segs = append(segs, seg{cur, p})
			cur = p
			i += 2
		case 'C':
			c1, c2, e := point{num(i), num(i + 1)}, point{num(i + 2), num(i + 3)}, point{num(i + 4), num(i + 5)}
			prev := cur
			for k := 1; k <= 16; k++ {
				t := float64(k) / 16
				u := 1 - t
				p := point{u*u*u*cur.x + 3*u*u*t*c1.x + 3*u*t*t*c2.x + t*t*t*e.x, u*u*u*cur.y + 3*u*u*t*c1.y + 3*u*t*t*c2.y + t*t*t*e.y}
				segs = append(segs, seg{prev, p})
				prev = p
			}
			cur = e
			i += 6
		default:
			return nil, fmt.Errorf("path %q: %q", d, f[i])
		}
	}
	return segs, nil
}

func cross(p, q seg) bool {
	d := func(a, b, c point) float64 { return (b.x-a.x)*(c.y-a.y) - (b.y-a.y)*(c.x-a.x) }
	d1, d2 := d(p.a, p.b, q.a), d(p.a, p.b, q.b)
	d3, d4 := d(q.a, q.b, p.a), d(q.a, q.b, p.b)
	return d1*d2 < 0 && d3*d4 < 0
}

// inBox reports whether s passes through the inside of box p (shrunk by 2 px).
func inBox(s seg, p flowgraph.Placed) bool {
	x0, y0, x1, y1 := p.X+2, p.Y+2, p.X+p.W-2, p.Y+p.H-2
	for k := 0; k <= 20; k++ {
		t := float64(k) / 20
		x, y := s.a.x+(s.b.x-s.a.x)*t, s.a.y+(s.b.y-s.a.y)*t
		if x > x0 && x < x1 && y > y0 && y < y1 {
			return true
		}
	}
	return false
}

// faults lists what a reader of the drawing would trip over: an edge
// through a node box other than its own ends', a back edge crossing any
// other edge, two nodes overlapping, a label outside the drawing.
func faults(lo *flowgraph.Layout) []string {
	var out []string
	paths := make([][]seg, len(lo.Edges))
	for i, e := range lo.Edges {
		s, err := polyline(e.Path)
		if err != nil {
			return []string{err.Error()}
		}
		paths[i] = s
		for _, n := range lo.Nodes {
			if n.ID == e.From || n.ID == e.To {
				continue
			}
			for _, sg := range s {
				if inBox(sg, n) {
					out = append(out, fmt.Sprintf("edge %s→%s through node %s", e.From, e.To, n.ID))
					break
				}
			}
		}
		if l := e.Label(); l != "" {
			// The label as the viewer writes it (11 px text, about 6 px a
			// character; a loop's gets " · spent N/M"), on no node and
			// inside the drawing.
			if e.Loop != "" {
				l += " · spent 10/10"
			}
			w := 6 * float64(len([]rune(l)))
			x0 := e.LabelX
			if e.Anchor == "end" {
				x0 -= w
			}
			x1, y0, y1 := x0+w, e.LabelY-9, e.LabelY+3
			if x0 < 0 || x1 > lo.Width || y0 < 0 || y1 > lo.Height {
				out = append(out, fmt.Sprintf("edge %s→%s label %.0f..%.0f,%.0f outside %.0f×%.0f", e.From, e.To, x0, x1, e.LabelY, lo.Width, lo.Height))
			}
			for _, n := range lo.Nodes {
				if x0 < n.X+n.W && x1 > n.X && y0 < n.Y+n.H && y1 > n.Y {
					out = append(out, fmt.Sprintf("edge %s→%s label over node %s", e.From, e.To, n.ID))
				}
			}
		}
	}
	for i, a := range lo.Edges {
		for _, b := range lo.Edges[i+1:] {
			if a.Label() == "" || b.Label() == "" {
				continue
			}
			ax0, ay0, ax1, ay1 := flowgraph.LabelBox(a)
			bx0, by0, bx1, by1 := flowgraph.LabelBox(b)
			if ax0 < bx1 && ax1 > bx0 && ay0 < by1 && ay1 > by0 {
				out = append(out, fmt.Sprintf("labels of %s→%s and %s→%s overlap", a.From, a.To, b.From, b.To))
			}
		}
	}
	for i := range lo.Edges {
		for j := i + 1; j < len(lo.Edges); j++ {
			if !lo.Edges[i].Back && !lo.Edges[j].Back {
				continue
			}
			n := 0
			for _, p := range paths[i] {
				for _, q := range paths[j] {
					if cross(p, q) {
						n++
					}
				}
			}
			if n > 0 {
				out = append(out, fmt.Sprintf("back edge crossing: %s→%s × %s→%s", lo.Edges[i].From, lo.Edges[i].To, lo.Edges[j].From, lo.Edges[j].To))
			}
		}
	}
	for i, a := range lo.Nodes {
		for _, b := range lo.Nodes[i+1:] {
			if math.Abs(a.X-b.X) < a.W && math.Abs(a.Y-b.Y) < a.H {
				out = append(out, fmt.Sprintf("nodes %s and %s overlap", a.ID, b.ID))
			}
		}
	}
	return out
}
