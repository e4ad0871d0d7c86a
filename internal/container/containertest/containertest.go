// Package containertest is what tests that run containers share: an
// engine with an image built, or the test skipped by name (a failure under
// STRATUS_REQUIRE_ALL, as internal/testenv's skips are).
package containertest

import (
	"context"
	"testing"

	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/testenv"
)

// RunnerImage is the image make image builds that the stand-in's task
// definitions name by default.
const RunnerImage = "stratus-runner:latest"

// WithImage connects to a container engine (container.Connect) that holds
// image, closed when tb ends; without an engine, or without the image, it
// skips tb naming what is missing (make image builds the runner images).
func WithImage(tb testing.TB, image string) *container.Engine {
	tb.Helper()
	ctx := context.Background()
	e, err := container.Connect(ctx)
	if err != nil {
		testenv.Missing(tb, "a container engine", err.Error())
	}
	tb.Cleanup(func() { e.Close() })
	if ok, err := e.ImageExists(ctx, image); err != nil || !ok {
		testenv.Missing(tb, "the runner image", image+" is not built: make image")
	}
	return e
}
