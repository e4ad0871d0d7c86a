// Package report writes a run's summary artifacts, summary.json and
// summary.md, under .stratus/logs/<task_id>/
// (docs/contracts.md § The summary artifacts).
//
// It owns three things:
//
//   - the facts: Collect reads a run's recorded steps, attempts, final
//     bodies, degradations and the supervisor layer's records from the store,
//     and the changed paths of the work dir (git status, never the diff);
//   - the renderer: Render is a pure function of those facts, so two renders
//     of one run are byte-identical (no render-time clock, stable ordering).
//     It writes the deterministic report (sections Why the run stopped —
//     only for a run that did not end done, see Why — / Changes / Steps /
//     Checks / Gates / Technical debt / Follow-ups / Publishing — only for
//     a pull-request policy Stratus does not act on — / Pipeline nodes
//     skipped / Provider fallbacks / Run cost) in the four situations of
//     docs/contracts.md § The summary artifacts — the layer is disabled, the
//     terminal has no prose by design (failed / manual_action_required), the
//     synthesis could not run, the synthesis came back collapsed (prose under
//     CollapseFloor characters) — and otherwise composes the
//     provider-authored summary.md: the "# {title}" H1, the sanitized prose,
//     the follow-ups section, then the fact sections (Publishing when it
//     applies, and the three of that section);
//   - summary.json, with worc's one key set {what, summary, follow_ups?,
//     task_usage?, supervisor_usage?, cost_not_accounted?, degraded?}.
//
// The record shapes the supervisor layer leaves in the store (Kind,
// SupervisorValue, Synthesis) are defined here because the report reads
// them; internal/supervisor and internal/worker write them. The report
// does not run any turn, sanitize prose (the layer records what reached
// disk, already sanitized) or decide observation; it only escapes, in
// summary.md, the control and format characters of what engines wrote
// (safetext.Block; docs/security.md § Text an engine wrote).
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink"
)

// Dir is the sink key prefix of a task's logs.
func Dir(taskID string) string { return path.Join(".stratus/logs", taskID) }

// Keys are the sink keys of a task's summary.json and summary.md, as
// Write writes them.
func Keys(taskID string) []string {
	dir := Dir(taskID)
	return []string{path.Join(dir, "summary.json"), path.Join(dir, "summary.md")}
}

// Write renders and stores summary.json and summary.md; it returns their
// keys. A render without prose never replaces a summary.json whose summary
// is non-empty prose for the same done run
// (docs/contracts.md § What the supervisor layer does: "a finalize turn that
// fails … does not overwrite an existing non-empty summary.json with a blank
// one"); the existing pair is kept and its keys returned.
func Write(ctx context.Context, sk sink.Sink, f *Facts) ([]string, error) {
	js, md := Render(f)
	keys := Keys(f.Run.TaskID)
	if f.Status == stratus.RunDone && f.prose() == "" {
		if old, err := sk.Get(ctx, keys[0]); err == nil {
			var prev Summary
			if json.Unmarshal(old, &prev) == nil && prev.Summary != "" && prev.What == f.Run.TaskTitle {
				if _, err := sk.Get(ctx, keys[1]); err == nil {
					return keys, nil
				}
			}
		}
	}
	if err := sk.Put(ctx, keys[0], js); err != nil {
		return nil, err
	}
	if err := sk.Put(ctx, keys[1], md); err != nil {
		return nil, err
	}
	return keys, nil
}

// Overhead returns, for consecutive worker attempts of a run, the time from
// one attempt's report (its end) to the next attempt's engine start: the
// orchestration overhead per step. Pairs without both timestamps are
// skipped, and so is a pair with a hitl step between them: the time a
// human takes to reply is not overhead.
func Overhead(f *Facts) []time.Duration {
	var out []time.Duration
	var prevEnd time.Time
	for _, l := range f.Steps {
		if l.Step.Kind == flow.KindHITL && l.Step.Verdict != "skipped" {
			prevEnd = time.Time{}
			continue
		}
		for _, a := range l.Attempts {
			if !prevEnd.IsZero() && !a.EngineStartedAt.IsZero() {
				out = append(out, a.EngineStartedAt.Sub(prevEnd))
			}
			prevEnd = a.EndedAt
		}
	}
	return out
}

// Render returns summary.json and summary.md for f: a pure function of f.
func Render(f *Facts) (js, md []byte) {
	s := f.summary()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(s) // a Summary always encodes
	return buf.Bytes(), f.markdown(s)
}
