package benchfig

import (
	"bytes"
	"testing"
)

func TestMeasure(t *testing.T) {
	p, a := []float64{9, 1, 5, 3, 7}, []float64{2, 2, 2, 2, 2}
	i := 0
	r := Measure(Figure{Name: "x", Unit: "ms", Goal: 2, Rounds: 5}, func() float64 { v := p[i]; return v }, func() float64 { v := a[i]; i++; return v })
	if r.Project != 5 || r.Anchor != 2 || r.Ratio != 2.5 || r.Met {
		t.Errorf("%+v: want medians 5 and 2, ratio 2.5, missed (goal <= 2)", r)
	}
	var b bytes.Buffer
	r.Print(&b)
	if got := b.String(); got != "BENCH x project=5ms anchor=2ms ratio=2.50 goal<=2 MISSED\n" {
		t.Errorf("line %q", got)
	}
	inv := Measure(Figure{Name: "y", Unit: "µs/line", Goal: 0.5, AtLeast: true, Invert: true, Rounds: 5}, func() float64 { return 4 }, func() float64 { return 2 })
	if inv.Ratio != 0.5 || !inv.Met {
		t.Errorf("%+v: want ratio anchor/project 0.5, met", inv)
	}
}
