package orchestrator

import (
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

// PublishingWarnings are the non-fatal problems of a flow's publish nodes
// whose policy (or, without one, the flow's publishing) opens a pull
// request, in a repository without the remote publishing pushes to
// (remote nil; name is config git.remote): the run keeps its commits in a
// local branch and opens none (worc reference.md § Validation: "a
// PR-publishing flow with no git configured" is non-fatal;
// docs/architecture.md § Publishing). One warning per such node, at its
// policy; none when the remote exists.
func PublishingWarnings(fl *flow.Flow, remote *stratus.GitRemote, name string) []flow.Problem {
	if remote != nil {
		return nil
	}
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
			Message: fmt.Sprintf("node %q: %s", n.ID, report.PublishingNote(p, name))})
	}
	return out
}
