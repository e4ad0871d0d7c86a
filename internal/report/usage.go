package report

import (
	"fmt"
	"sort"

	"github.com/stratusflow/stratus"
)

// Usage totals provider calls. A provider call is an attempt whose engine
// reported usage (tokens or a cost): an attempt that never reached a
// provider (a launch error, an engine that refused the request) made none.
// WallMS is the attempts' wall time, start to end, in milliseconds.
type Usage struct {
	Calls        int               `json:"calls"`
	InputTokens  int64             `json:"input_tokens"`
	OutputTokens int64             `json:"output_tokens"`
	CostUSD      *float64          `json:"cost_usd"` // nil when no call reported a cost
	WallMS       int64             `json:"wall_ms"`
	ByProvider   map[string]*Usage `json:"by_provider,omitempty"`
}

// SupervisorUsage is supervisor_usage: the layer's calls as a total and
// split by job (docs/contracts.md § What observe.mode costs).
type SupervisorUsage struct {
	Usage
	ByJob map[string]*Usage `json:"by_job"`
}

// CostNotAccounted names the provider calls that reported no cost
// (docs/contracts.md § What observe.mode costs: {provider, attempts,
// input_tokens}; "absent means unknown, never free").
type CostNotAccounted struct {
	Provider    string `json:"provider"`
	Attempts    int    `json:"attempts"`
	InputTokens int64  `json:"input_tokens"`
}

func isCall(a stratus.Attempt) bool {
	return a.PromptTokens > 0 || a.CompletionTokens > 0 || a.CostUSD != nil
}

func (u *Usage) add(a stratus.Attempt) {
	u.Calls++
	u.InputTokens += a.PromptTokens
	u.OutputTokens += a.CompletionTokens
	if a.CostUSD != nil {
		c := *a.CostUSD
		if u.CostUSD != nil {
			c += *u.CostUSD
		}
		u.CostUSD = &c
	}
	if !a.EndedAt.IsZero() && a.EndedAt.After(a.StartedAt) {
		u.WallMS += a.EndedAt.Sub(a.StartedAt).Milliseconds()
	}
}

// usage totals the run's provider calls: every node attempt plus the
// supervisor layer (task_usage), the layer alone by job (supervisor_usage,
// nil when it made no call), and the calls without a cost per provider.
func (f *Facts) usage() (task *Usage, sup *SupervisorUsage, unpriced []CostNotAccounted) {
	t := &Usage{ByProvider: map[string]*Usage{}}
	s := &SupervisorUsage{ByJob: map[string]*Usage{JobObserve: {}, JobFinalize: {}, JobHandoff: {}}}
	missing := map[string]*CostNotAccounted{}
	count := func(l StepLine, supervisor bool) {
		for _, a := range l.Attempts {
			if !isCall(a) {
				continue
			}
			p := l.Provider(a)
			t.add(a)
			if t.ByProvider[p] == nil {
				t.ByProvider[p] = &Usage{}
			}
			t.ByProvider[p].add(a)
			if supervisor {
				s.add(a)
				job := l.Job
				if s.ByJob[job] == nil {
					s.ByJob[job] = &Usage{}
				}
				s.ByJob[job].add(a)
			}
			if a.CostUSD == nil {
				m := missing[p]
				if m == nil {
					m = &CostNotAccounted{Provider: p}
					missing[p] = m
				}
				m.Attempts++
				m.InputTokens += a.PromptTokens
			}
		}
	}
	for _, l := range f.Steps {
		count(l, false)
	}
	for _, l := range f.Supervisor {
		count(l, true)
	}
	if t.Calls > 0 {
		task = t
	}
	if s.Calls > 0 {
		sup = s
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		unpriced = append(unpriced, *missing[n])
	}
	return task, sup, unpriced
}

// tokens renders a token count the way worc's Run cost sentence does
// (8.4 M, 12.0 k, 950).
func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.1f k", float64(n)/1e3)
	default:
		return fmt.Sprint(n)
	}
}
