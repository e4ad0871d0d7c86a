package orchestrator

import (
	"context"
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/store"
)

// PublishingWarnings are the non-fatal problems of a flow's publish nodes
// whose policy (or, without one, the flow's publishing) would open a pull
// request: Stratus writes the report locally and opens none
// (README.md § Node kinds, publish: "PR publishing is described as
// unsupported unless a git remote and a publisher are configured"; worc
// reference.md § Validation: "a PR-publishing flow with no git configured" is
// non-fatal). One warning per such node, at its policy.
func PublishingWarnings(fl *flow.Flow) []flow.Problem {
	var out []flow.Problem
	for i := range fl.Nodes {
		n := &fl.Nodes[i]
		p := report.PullRequestPolicy(fl, n)
		if p == "" {
			continue
		}
		pos := n.Pos
		if at, ok := n.Fields["policy"]; ok {
			pos = at
		}
		out = append(out, flow.Problem{File: fl.File, Line: pos.Line, Col: pos.Col, Path: fmt.Sprintf("nodes[%d].policy", n.Index),
			Message: fmt.Sprintf("node %q: %s", n.ID, report.PublishingNote(p))})
	}
	return out
}

// publishNote is the progress line's note for the publish step of run that
// is running now: PublishingNote of its pull-request policy, or "".
func publishNote(ctx context.Context, st store.Store, runID string, fl *flow.Flow) string {
	steps, err := st.ListSteps(ctx, runID)
	if err != nil || fl == nil {
		return ""
	}
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Kind != flow.KindPublish || s.Status != stratus.StepRunning {
			continue
		}
		if p := report.PullRequestPolicy(fl, fl.Node(s.Node)); p != "" {
			return fmt.Sprintf("%s: %s", s.StepRef, report.PublishingNote(p))
		}
		return ""
	}
	return ""
}
