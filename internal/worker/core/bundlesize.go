package core

import (
	"context"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/sink"
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

// WorkspaceUpload serves POST /v1/worker/workspace/upload {"bytes": N}
// (docs/security.md § Upload size limits): where the caller's
// workspace-write attempt stores its step bundle of N bytes. URL is a
// presigned PUT of exactly N bytes (Sink.PresignPutSize; S3 refuses another
// length) or, for a sink that does not presign, this API's PUT
// /v1/worker/workspace/blob?key=, which refuses a body over MaxBytes. Key
// is the attempt's one bundle key (the payload's workspace.upload.key);
// MaxBytes is the bundle limit, bytes.
//
// Errors: see Authorize; ECONFLICT when fenced; EINVALID for a run without
// a workspace or a step that is not a workspace-write agent node, and
// (field bytes) for a size below 1; ETOOLARGE (field bytes) over the
// limit.
func (s *Service) WorkspaceUpload(ctx context.Context, authorization string, req UploadRequest) (Upload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return Upload{}, err
	}
	if err := s.Fence(ctx, c); err != nil {
		return Upload{}, err
	}
	ws := c.Run.Workspace
	if ws == nil || len(ws.Bundles) == 0 {
		return Upload{}, stratus.Errorf(stratus.EINVALID, "run %s has no workspace; it stores no step bundle", c.Run.ID)
	}
	if node := c.Env.Flow.Node(c.Step.Node); node == nil || !WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
		return Upload{}, stratus.Errorf(stratus.EINVALID, "step %s is not a workspace-write agent node; it uploads no bundle", c.Step.StepRef)
	}
	max := s.workspaceMaxBytes(c.Env)
	switch {
	case req.Bytes <= 0:
		return Upload{}, stratus.FieldErrorf(stratus.EINVALID, "bytes", "%d (or missing) is not a bundle size; valid: 1 to %d bytes", req.Bytes, max)
	case req.Bytes > max:
		return Upload{}, bundleTooLarge(c, req.Bytes, max)
	}
	key := WorkspaceUploadKey(ws, c)
	u := Upload{Key: key, MaxBytes: max, ExpiresAt: s.NowUTC().Add(UploadTTL).Truncate(time.Second).UTC()}
	if p, ok := s.Sink.(sink.Presigner); ok {
		if u.URL, err = p.PresignPutSize(ctx, key, req.Bytes, UploadTTL); err != nil {
			return Upload{}, err
		}
	} else {
		u.URL = BlobRoute(key)
	}
	return u, nil
}

// bundleTooLarge is the refusal of the caller's step bundle of size bytes
// (-1: only "more than max" is known).
func bundleTooLarge(c *Caller, size, max int64) error {
	if size < 0 {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the workspace bundle of step %s is over the limit of %d bytes (limits.max_snapshot_bytes)", c.Step.StepRef, max)
	}
	return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the workspace bundle of step %s is %d bytes, over the limit of %d bytes (limits.max_snapshot_bytes)", c.Step.StepRef, size, max)
}

// checkBundleSize refuses (ETOOLARGE) the bundle stored under key when it
// is over the caller's limit, and deletes it: whoever stored it did not
// go through WorkspaceUpload. Nothing stored there is EINVALID.
func (s *Service) checkBundleSize(ctx context.Context, c *Caller, key string) error {
	size, err := s.Sink.Size(ctx, key)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return stratus.FieldErrorf(stratus.EINVALID, "to", "no bundle was uploaded to %s; upload it before advancing the head", key)
	} else if err != nil {
		return err
	}
	if max := s.workspaceMaxBytes(c.Env); size > max {
		if err := s.Sink.Delete(ctx, key); err != nil {
			s.WarnCall(c, "%s: delete the oversized bundle %s: %v", c.Step.StepRef, key, err)
		}
		return bundleTooLarge(c, size, max)
	}
	return nil
}

// workspaceMaxBytes is the cap on one step's bundle, bytes: config
// limits.max_snapshot_bytes (the snapshot's cap), or its default.
func (s *Service) workspaceMaxBytes(env *RunEnv) int64 {
	if env.Config != nil && env.Config.Limits.MaxSnapshotBytes > 0 {
		return env.Config.Limits.MaxSnapshotBytes
	}
	return workspace.DefaultMaxBytes
}
