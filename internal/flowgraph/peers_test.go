package flowgraph_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/flowgraph"
	"github.com/stratusflow/stratus/internal/testenv"
)

// Every flow worc ships draws with no edge through a node and no loop
// crossing another edge.
func TestLayout_PeerFlowsDrawClean(t *testing.T) {
	dir := testenv.Peers(t, "worc", "flows")
	matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(matches) == 0 {
		t.Fatalf("no flows in %s", dir)
	}
	for _, m := range matches {
		name := strings.TrimSuffix(filepath.Base(m), ".yaml")
		t.Run(name, func(t *testing.T) {
			f, err := flow.Load(dir, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range faults(flowgraph.Build(f).Layout()) {
				t.Error(p)
			}
		})
	}
}

// A flow with more branches than the built-in: two gates, a human
// approval, a tool, every rework through one fixing node back to the
// first gate, a reject straight back to the draft and a self-loop.
func TestLayout_ManyBranchesDrawClean(t *testing.T) {
	nodes := []struct{ id, kind string }{{"plan", "agent"}, {"draft", "agent"}, {"length", "tool"}, {"style", "evaluator"},
		{"facts", "evaluator"}, {"approve", "hitl"}, {"fixing", "agent"}, {"polish", "agent"}, {"publish", "publish"}}
	f := &flow.Flow{Name: "gated", Budgets: map[string]int{"style_fix": 3, "facts_fix": 2, "redo": 1}}
	for _, n := range nodes {
		f.Nodes = append(f.Nodes, flow.Node{ID: n.id, Kind: n.kind})
	}
	for _, e := range [][4]string{
		{"plan", "draft", "", ""}, {"draft", "length", "", ""}, {"length", "style", "pass", ""}, {"length", "fixing", "fail", "style_fix"},
		{"style", "facts", "accept", ""}, {"style", "fixing", "rework", "style_fix"}, {"facts", "approve", "accept", ""},
		{"facts", "fixing", "rework", "facts_fix"}, {"approve", "polish", "approve", ""}, {"approve", "draft", "reject", "redo"},
		{"fixing", "length", "", ""}, {"polish", "polish", "again", ""}, {"polish", "publish", "", ""},
	} {
		f.Edges = append(f.Edges, flow.Edge{From: e[0], To: e[1], Outcome: e[2], Loop: e[3]})
	}
	g := flowgraph.Build(f)
	back := 0
	for _, e := range g.Edges {
		if e.Back {
			back++
		}
	}
	if back != 3 {
		t.Errorf("%d back edges; want 3 (fixing → length, approve → draft, polish → polish)", back)
	}
	lo := g.Layout()
	for _, p := range faults(lo) {
		t.Error(p)
	}
}

// Two loops leaving one layer, a loop back to the first gate's own
// predecessor, a four-way route with its own re-plan loop (two loop labels
// were printed on one line, unreadable).
func TestLayout_LoopsFromOneLayerDrawClean(t *testing.T) {
	f := &flow.Flow{Name: "maze"}
	for _, n := range [][2]string{{"intake", "agent"}, {"design", "agent"}, {"impl", "agent"}, {"lint", "tool"}, {"test", "tool"}, {"review", "evaluator"},
		{"fix", "agent"}, {"triage", "tool"}, {"doc", "agent"}, {"ask", "hitl"}, {"publish", "publish"}} {
		f.Nodes = append(f.Nodes, flow.Node{ID: n[0], Kind: n[1]})
	}
	for _, e := range [][4]string{
		{"intake", "design", "", ""}, {"design", "impl", "", ""}, {"impl", "lint", "", ""}, {"lint", "test", "pass", ""}, {"lint", "fix", "fail", "lint_fix"},
		{"fix", "lint", "", ""}, {"test", "review", "pass", ""}, {"test", "impl", "fail", "test_fix"}, {"review", "triage", "accept", ""},
		{"review", "fix", "rework", "review_fix"}, {"triage", "publish", "route:small", ""}, {"triage", "doc", "route:big", ""},
		{"triage", "ask", "route:unsure", ""}, {"triage", "design", "route:redo", "replan"}, {"ask", "doc", "", ""}, {"doc", "publish", "", ""},
	} {
		f.Edges = append(f.Edges, flow.Edge{From: e[0], To: e[1], Outcome: e[2], Loop: e[3]})
	}
	for _, p := range faults(flowgraph.Build(f).Layout()) {
		t.Error(p)
	}
}
