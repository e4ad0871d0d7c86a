package runnerimage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/runnerimage"
	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/runner-image.md § Building the images: each image `make image`
// built runs as a non-root user and prints its CLI's version, the one
// package.json pins for the agent CLIs. Skipped (failed under
// STRATUS_REQUIRE_ALL=1) without a container engine or the images.
func TestImages_PrintVersionsAsNonRoot(t *testing.T) {
	ctx := context.Background()
	e, err := container.Connect(ctx)
	if errors.Is(err, container.ErrNoEngine) {
		testenv.Missing(t, "a container engine", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	repo := testenv.ModuleRoot(t)
	for _, target := range runnerimage.Targets {
		t.Run(target.Name, func(t *testing.T) {
			if ok, err := e.ImageExists(ctx, target.Tag); err != nil {
				t.Fatal(err)
			} else if !ok {
				testenv.Missing(t, "the runner images", target.Tag+" is not built: make image builds it")
			}
			r, err := runnerimage.Check(ctx, e, repo, target)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s, uid %d, %s", target.Tag, r.Version, r.UID, runnerimage.MB(r.Size))
		})
	}
}

func TestTargetByName(t *testing.T) {
	for _, name := range []string{"latest", "claude", "codex"} {
		if tg, ok := runnerimage.TargetByName(name); !ok || tg.Name != name {
			t.Errorf("TargetByName(%q) = %+v, %v", name, tg, ok)
		}
	}
	if _, ok := runnerimage.TargetByName("go"); ok {
		t.Errorf("TargetByName(go): found; make image builds latest, claude and codex only")
	}
}
