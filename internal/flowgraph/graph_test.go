package flowgraph_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/flowgraph"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

func implementation(t testing.TB) *flow.Flow {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "flows")
	workertest.WriteFiles(t, dir, workertest.ImplementationFlow(t))
	f, err := flow.Load(dir, "implementation")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The built-in flow: planning → implementation → review, review's accept
// to publish and its rework to fixing (the loop review_fix, budget 3),
// fixing back to review — the one edge that closes the cycle.
func TestBuild_FindsTheLoopAndItsBudget(t *testing.T) {
	g := flowgraph.Build(implementation(t))
	var back, loops []flowgraph.Edge
	for _, e := range g.Edges {
		if e.Back {
			back = append(back, e)
		}
		if e.Loop != "" {
			loops = append(loops, e)
		}
	}
	if len(back) != 1 || back[0].From != "fixing" || back[0].To != "review" {
		t.Errorf("back edges %+v; want fixing → review", back)
	}
	if len(loops) != 1 || loops[0].From != "review" || loops[0].Loop != "review_fix" || loops[0].Budget != 3 {
		t.Fatalf("loop edges %+v; want review → fixing, review_fix, budget 3", loops)
	}
	if l := loops[0].Label(); l != "rework · review_fix ≤3" {
		t.Errorf("loop label %q; want the outcome, the loop and its budget", l)
	}
}

// The layout puts each node below the nodes its forward edges come from,
// never two nodes on one spot, and draws no edge or label over a node.
func TestLayout_LayersClean(t *testing.T) {
	g := flowgraph.Build(implementation(t))
	lo := g.Layout()
	at := map[string]flowgraph.Placed{}
	spots := map[[2]float64]string{}
	for _, p := range lo.Nodes {
		at[p.ID] = p
		k := [2]float64{p.X, p.Y}
		if other, dup := spots[k]; dup {
			t.Errorf("%s and %s at one spot", p.ID, other)
		}
		spots[k] = p.ID
		if p.X < 0 || p.Y < 0 || p.X+p.W > lo.Width || p.Y+p.H > lo.Height {
			t.Errorf("%s at %v,%v outside the %vx%v drawing", p.ID, p.X, p.Y, lo.Width, lo.Height)
		}
	}
	for _, e := range g.Edges {
		if !e.Back && at[e.To].Layer <= at[e.From].Layer {
			t.Errorf("forward edge %s → %s goes from layer %d to %d", e.From, e.To, at[e.From].Layer, at[e.To].Layer)
		}
	}
	for _, p := range faults(lo) {
		t.Error(p)
	}
}

// Mermaid and dot name every node with its kind and every edge with its
// outcome; the loop is drawn apart (dotted, dashed).
func TestMermaidAndDot(t *testing.T) {
	g := flowgraph.Build(implementation(t))
	m, d := g.Mermaid(), g.Dot()
	for _, want := range []string{"flowchart TD", `n_review{{"review<br/><small>evaluator</small>"}}`, `n_review -->|"accept"| n_publish`, "n_fixing -.->"} {
		if !strings.Contains(m, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m)
		}
	}
	for _, want := range []string{`digraph "implementation"`, `"review" [label="review\nevaluator", shape=hexagon]`, `"review" -> "publish" [label="accept"]`, "style=dashed"} {
		if !strings.Contains(d, want) {
			t.Errorf("dot lacks %q:\n%s", want, d)
		}
	}
}
