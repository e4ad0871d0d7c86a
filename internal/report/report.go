// Package report writes a run's summary artifacts, summary.json and
// summary.md, under .stratus/logs/<task_id>/ (seed 004 § The summary
// artifacts). summary.json keeps worc's one key set (what, summary,
// follow_ups, task_usage, supervisor_usage, cost_not_accounted, degraded;
// the optional ones present only when they apply). summary.md is the
// deterministic report: a pure function of the store, so two renders of one
// run are byte-identical. There is no supervisor layer yet, so `summary` is
// empty prose and no finalize turn runs.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
)

// Summary is summary.json.
type Summary struct {
	What             string             `json:"what"`
	Summary          string             `json:"summary"`
	FollowUps        []any              `json:"follow_ups,omitempty"`
	TaskUsage        *Usage             `json:"task_usage,omitempty"`
	CostNotAccounted []CostNotAccounted `json:"cost_not_accounted,omitempty"`
	Degraded         bool               `json:"degraded,omitempty"`
}

// Usage totals provider calls of a run.
type Usage struct {
	Calls        int      `json:"calls"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"` // nil when no attempt reported a cost
}

// CostNotAccounted names attempts that reported no cost (seed 004: "absent
// means unknown, never free").
type CostNotAccounted struct {
	Agent       string `json:"agent"`
	Attempts    int    `json:"attempts"`
	InputTokens int64  `json:"input_tokens"`
}

// StepLine is one row of the report's Steps section.
type StepLine struct {
	Step     stratus.Step
	Attempts []stratus.Attempt
}

// Facts are what the report is rendered from.
type Facts struct {
	Run    stratus.Run
	Status string // the run's terminal as it is being written
	Steps  []StepLine
}

// Collect reads a run's facts from the store.
func Collect(ctx context.Context, st store.Store, run stratus.Run, status string) (*Facts, error) {
	steps, err := st.ListSteps(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	f := &Facts{Run: run, Status: status}
	for _, s := range steps {
		line := StepLine{Step: s}
		for n := 1; ; n++ {
			a, err := st.GetAttempt(ctx, s.TID, n)
			if stratus.ErrorCode(err) == stratus.ENOTFOUND {
				break
			} else if err != nil {
				return nil, err
			}
			line.Attempts = append(line.Attempts, a)
		}
		f.Steps = append(f.Steps, line)
	}
	return f, nil
}

// Dir is the sink key prefix of a task's logs.
func Dir(taskID string) string { return path.Join(".stratus/logs", taskID) }

// Write renders and stores summary.json and summary.md; it returns their keys.
func Write(ctx context.Context, sk sink.Sink, f *Facts) ([]string, error) {
	js, md := Render(f)
	dir := Dir(f.Run.TaskID)
	keys := []string{path.Join(dir, "summary.json"), path.Join(dir, "summary.md")}
	if err := sk.Put(ctx, keys[0], js); err != nil {
		return nil, err
	}
	if err := sk.Put(ctx, keys[1], md); err != nil {
		return nil, err
	}
	return keys, nil
}

// Render returns summary.json and summary.md for f.
func Render(f *Facts) (js, md []byte) {
	s := Summary{What: f.Run.TaskTitle}
	var u Usage
	unpriced := map[string]*CostNotAccounted{}
	for _, l := range f.Steps {
		for _, a := range l.Attempts {
			u.Calls++
			u.InputTokens += a.PromptTokens
			u.OutputTokens += a.CompletionTokens
			if a.CostUSD != nil {
				c := *a.CostUSD
				if u.CostUSD != nil {
					c += *u.CostUSD
				}
				u.CostUSD = &c
			} else {
				n := unpriced[a.Agent]
				if n == nil {
					n = &CostNotAccounted{Agent: a.Agent}
					unpriced[a.Agent] = n
				}
				n.Attempts++
				n.InputTokens += a.PromptTokens
			}
		}
	}
	if u.Calls > 0 {
		s.TaskUsage = &u
	}
	names := make([]string, 0, len(unpriced))
	for n := range unpriced {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s.CostNotAccounted = append(s.CostNotAccounted, *unpriced[n])
	}
	js, _ = json.MarshalIndent(s, "", "  ")
	js = append(js, '\n')

	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", f.Run.TaskTitle)
	fmt.Fprintf(&b, "Task `%s`, flow `%s`, run `%s`: **%s**.\n\n", f.Run.TaskID, f.Run.Flow, f.Run.ID, f.Status)
	b.WriteString("## Steps\n\n| step | outcome | attempts | terminal | duration | tokens in/out |\n|---|---|---|---|---|---|\n")
	for _, l := range f.Steps {
		term, dur, in, out := "", time.Duration(0), int64(0), int64(0)
		for _, a := range l.Attempts {
			term = a.Terminal
			if !a.EndedAt.IsZero() {
				dur += a.EndedAt.Sub(a.StartedAt)
			}
			in += a.PromptTokens
			out += a.CompletionTokens
		}
		outcome := l.Step.Verdict
		if outcome == "" {
			outcome = l.Step.Status
		}
		if l.Step.Kind == "publish" && l.Step.Status == stratus.StepRunning {
			// seed 004: the publish step writes this report, so it is
			// pending while the report is written; that is expected.
			outcome = "pending (it writes this report)"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d/%d |\n", l.Step.StepRef, outcome, len(l.Attempts), dash(term), dur.Round(time.Millisecond), in, out)
	}
	b.WriteString("\n## Gates\n\n")
	gates := 0
	for _, l := range f.Steps {
		if l.Step.Kind != "evaluator" || l.Step.Status != stratus.StepCompleted {
			continue
		}
		gates++
		var v struct {
			Reason string `json:"reason"`
		}
		json.Unmarshal(l.Step.Value, &v)
		fmt.Fprintf(&b, "- %s: **%s** (%s)\n", l.Step.StepRef, l.Step.Verdict, v.Reason)
	}
	if gates == 0 {
		b.WriteString("No gate decided.\n")
	}
	b.WriteString("\n## Run cost\n\n")
	switch {
	case u.Calls == 0:
		b.WriteString("No provider call was made.\n")
	case u.CostUSD == nil:
		fmt.Fprintf(&b, "Cost not accounted (%d attempts, %d input tokens, %d output tokens): no engine reported a cost.\n", u.Calls, u.InputTokens, u.OutputTokens)
	default:
		fmt.Fprintf(&b, "$%.2f over %d provider calls (%d input tokens, %d output tokens).\n", *u.CostUSD, u.Calls, u.InputTokens, u.OutputTokens)
		if len(s.CostNotAccounted) > 0 {
			fmt.Fprintf(&b, "The figure does not cover %d attempts that reported no cost.\n", len(s.CostNotAccounted))
		}
	}
	return js, b.Bytes()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Overhead returns, for consecutive worker attempts of a run, the time from
// one attempt's report (its end) to the next attempt's engine start: the
// orchestration overhead per step. Pairs without both timestamps are skipped.
func Overhead(f *Facts) []time.Duration {
	var out []time.Duration
	var prevEnd time.Time
	for _, l := range f.Steps {
		for _, a := range l.Attempts {
			if !prevEnd.IsZero() && !a.EngineStartedAt.IsZero() {
				out = append(out, a.EngineStartedAt.Sub(prevEnd))
			}
			prevEnd = a.EndedAt
		}
	}
	return out
}
