package lambdas

import (
	"fmt"
	"github.com/stratusflow/stratus/internal/english"
	"slices"
	"time"
)

// Summary is a function's REPORT figures over its invocations: the spread
// of its cold starts' init durations and its peak memory beside its
// memory size.
type Summary struct {
	Function         string
	Invocations      int
	ColdStarts       int
	InitMin, InitMax time.Duration
	InitMedian       time.Duration
	MaxMemoryUsedMB  int // the largest of the reports'; 0 when none was measured
	MemorySizeMB     int
}

// Summarize sums up reports of one function (Function.Reports).
func Summarize(function string, memorySizeMB int, reports []Report) Summary {
	s := Summary{Function: function, MemorySizeMB: memorySizeMB}
	var inits []time.Duration
	for _, r := range reports {
		s.Invocations++
		if r.Init > 0 {
			inits = append(inits, r.Init)
		}
		s.MaxMemoryUsedMB = max(s.MaxMemoryUsedMB, r.MaxMemoryUsedMB)
	}
	if s.ColdStarts = len(inits); s.ColdStarts > 0 {
		slices.Sort(inits)
		s.InitMin, s.InitMax = inits[0], inits[len(inits)-1]
		s.InitMedian = inits[len(inits)/2]
		if len(inits)%2 == 0 {
			s.InitMedian = (inits[len(inits)/2-1] + inits[len(inits)/2]) / 2
		}
	}
	return s
}

// String is "WorkerApiFunction: init 58.8–61.4 ms, median 60.0 ms (3 cold
// starts), max memory 20 MB of 512 MB (6 invocations)".
func (s Summary) String() string {
	init := "no cold start"
	if s.ColdStarts > 0 {
		init = fmt.Sprintf("init %.1f–%.1f ms, median %.1f ms (%s)", ms(s.InitMin), ms(s.InitMax), ms(s.InitMedian), english.Plural(s.ColdStarts, "cold start"))
	}
	mem := "max memory not measured"
	if s.MaxMemoryUsedMB > 0 {
		mem = fmt.Sprintf("max memory %d MB", s.MaxMemoryUsedMB)
	}
	return fmt.Sprintf("%s: %s, %s of %d MB (%s)", s.Function, init, mem, s.MemorySizeMB, english.Plural(s.Invocations, "invocation"))
}
