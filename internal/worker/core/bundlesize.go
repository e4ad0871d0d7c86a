package core

import (
	"github.com/stratusflow/stratus/internal/workspace"
)

// A step's workspace bundle is bounded by limits.max_snapshot_bytes
// (WorkspaceSpec.MaxBytes) wherever it is stored, not only by the runner
// that makes it: an engine holds the step's handle and may store a bundle
// itself (docs/security.md § Upload size limits). So the payload carries
// no URL that stores an unbounded body: on a sink that presigns, the
// runner asks POST /v1/worker/workspace/upload for a URL once it knows the
// bundle's size, and the URL signs exactly that length (S3 refuses any
// other); on a sink that does not, the blob route refuses a longer body
// before it has read more than the limit; and AdvanceHead checks the
// stored object's size before it moves the head.

// WorkspaceMaxBytes is the cap on one step's bundle, bytes: config
// limits.max_snapshot_bytes (the snapshot's cap), or its default.
func (s *Service) WorkspaceMaxBytes(env *RunEnv) int64 {
	if env.Config != nil && env.Config.Limits.MaxSnapshotBytes > 0 {
		return env.Config.Limits.MaxSnapshotBytes
	}
	return workspace.DefaultMaxBytes
}
