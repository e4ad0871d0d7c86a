// Package benchfig prints a performance figure the way `make bench`
// reports it (README.md § Performance): the project's figure next to its
// anchor — the physical floor, measured in the same run (spawning the
// four-line shell engine of docs/contracts.md § Conformance checklist, a bare
// net/http handler, json.Valid) — as medians of
// interleaved rounds, their ratio, and whether the goal is met:
//
//	BENCH events project=5.21µs/line anchor=2.60µs/line ratio=2.00 goal>=0.5 met
//
// Which way the ratio is read is the figure's: a throughput goal is
// "ratio >= g" (project/anchor, higher is better), a cost goal "ratio <= g".
package benchfig

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Figure is one measured figure.
type Figure struct {
	Name string
	// Unit of a round's figure, e.g. "ms/step" or "µs/line".
	Unit string
	// Goal is the bound on Ratio; AtLeast says which side of it is met.
	Goal    float64
	AtLeast bool
	// Rounds are interleaved project, anchor pairs (default 7, at least 5).
	Rounds int
	// Invert reads the ratio as anchor/project: for a figure whose unit is
	// a cost (time per item) but whose goal is a throughput ("≥ 0.5 of
	// json.Valid's"). Off: project/anchor.
	Invert bool
}

// Result is a figure's medians and verdict.
type Result struct {
	Figure
	Project, Anchor float64 // medians, in Unit
	Ratio           float64
	Met             bool
}

// Measure runs f.Rounds interleaved rounds — project, then anchor, each
// returning its figure in f.Unit — and returns the medians and the
// verdict.
func Measure(f Figure, project, anchor func() float64) Result {
	if f.Rounds < 5 {
		f.Rounds = 7
	}
	var p, a []float64
	for range f.Rounds {
		p = append(p, project())
		a = append(a, anchor())
	}
	return FromSamples(f, p, a)
}

// FromSamples is the figure of samples taken otherwise (a figure whose
// anchor is the same operation at another point of one run, which cannot
// be interleaved): the medians of each, their ratio and the verdict.
func FromSamples(f Figure, project, anchor []float64) Result {
	r := Result{Figure: f, Project: median(project), Anchor: median(anchor)}
	r.Ratio = r.Project / r.Anchor
	if f.Invert {
		r.Ratio = r.Anchor / r.Project
	}
	if f.AtLeast {
		r.Met = r.Ratio >= f.Goal
	} else {
		r.Met = r.Ratio <= f.Goal
	}
	return r
}

// Print writes r as its BENCH line.
func (r Result) Print(w io.Writer) {
	op := "<="
	if r.AtLeast {
		op = ">="
	}
	verdict := "MISSED"
	if r.Met {
		verdict = "met"
	}
	fmt.Fprintf(w, "BENCH %s project=%s%s anchor=%s%s ratio=%.2f goal%s%g %s\n", r.Name, num(r.Project), r.Unit, num(r.Anchor), r.Unit, r.Ratio, op, r.Goal, verdict)
}

// PerItem times f and returns its duration per item in microseconds.
func PerItem(items int, f func()) float64 {
	start := time.Now()
	f()
	return float64(time.Since(start).Nanoseconds()) / 1e3 / float64(items)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
