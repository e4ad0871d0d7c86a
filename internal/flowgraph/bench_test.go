package flowgraph_test

import (
	"testing"

	"github.com/stratusflow/stratus/internal/flowgraph"
)

// The layout of the built-in flow, as the viewer draws it on every run
// page.
func BenchmarkLayout_Implementation(b *testing.B) {
	g := flowgraph.Build(implementation(b))
	for b.Loop() {
		g.Layout()
	}
}
