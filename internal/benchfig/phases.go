package benchfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// Regions is what an execution trace (runtime/trace; a stratus command's
// STRATUS_TRACE) says of where its wall time went: the trace's wall, and
// per region type (the worker API's routes, "dispatch <kind>", "engine",
// "state <type>", a floor's own parts) the regions ended and their summed
// wall time.
type Regions struct {
	Wall  time.Duration
	Count map[string]int
	Total map[string]time.Duration
}

// ReadRegions reads the execution trace at path. A region still open at
// the trace's end is not counted. Errors: the file's, and the trace
// reader's for a file that is not a trace.
func ReadRegions(path string) (Regions, error) {
	f, err := os.Open(path)
	if err != nil {
		return Regions{}, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return Regions{}, fmt.Errorf("%s: %w", path, err)
	}
	type key struct {
		g    trace.GoID
		name string
	}
	open := map[key][]trace.Time{}
	out := Regions{Count: map[string]int{}, Total: map[string]time.Duration{}}
	var first, last trace.Time
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return Regions{}, fmt.Errorf("%s: %w", path, err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventRegionBegin:
			k := key{ev.Goroutine(), ev.Region().Type}
			open[k] = append(open[k], ev.Time())
		case trace.EventRegionEnd:
			k := key{ev.Goroutine(), ev.Region().Type}
			if st := open[k]; len(st) > 0 {
				out.Total[k.name] += ev.Time().Sub(st[len(st)-1])
				out.Count[k.name]++
				open[k] = st[:len(st)-1]
			}
		}
	}
	out.Wall = last.Sub(first)
	return out, nil
}

// Phase is one line of a breakdown: a name and the regions it sums.
type Phase struct {
	Name    string
	Regions []string
}

// PrintPhases writes r as one PHASE line of figure name: each phase's
// summed regions per step (steps > 0), in ms, then "other", what within the
// regions named in within (the steps' own wall: a Task state's) the phases
// do not cover, and "run", the trace's wall outside within (start, checks,
// the run's end), both per step too:
//
//	PHASE overhead dispatch=1.42 prompt=0.56 … other=0.80 run=2.10 ms/step (20 steps, one traced run)
func (r Regions) PrintPhases(w io.Writer, name string, steps int, within string, phases []Phase) {
	per := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1e3/float64(steps)) }
	var b strings.Builder
	var covered time.Duration
	for _, p := range phases {
		var d time.Duration
		for _, reg := range p.Regions {
			d += r.Total[reg]
		}
		covered += d
		fmt.Fprintf(&b, " %s=%s", p.Name, per(d))
	}
	if within != "" {
		fmt.Fprintf(&b, " other=%s run=%s", per(r.Total[within]-covered), per(r.Wall-r.Total[within]))
	}
	fmt.Fprintf(w, "PHASE %s%s ms/step (%d steps, one traced run)\n", name, b.String(), steps)
}
