package artifact

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/upload"
	"golang.org/x/text/cases"
)

// Artifact stages one named part (POST /v1/worker/artifact?name=;
// docs/contracts.md § Output is a tool call): appended to the attempt's tail
// (last write wins at the fold) and materialized raw at <ctx-dir>/<name> at
// staging time (§ Files are the server's job), the file first: a part is staged
// only once its file persisted (docs/security.md § Output that did not persist).
// Errors: EINVALID for a bad part name (nothing staged), ECONFLICT when fenced,
// the sink's error when it refuses the file (nothing staged; ENOSPACE for a full
// disk).
func Artifact(ctx context.Context, s *core.Service, authorization, name string, body []byte) error {
	return Invoke(ctx, s, authorization, name, core.Body{Bytes: body})
}

// Invoke is Artifact of a body inline or uploaded (POST
// /v1/worker/artifact?name=&upload=; docs/contracts.md § Request and
// response bodies). Errors: Artifact's;
// bodyOf's for the upload.
func Invoke(ctx context.Context, s *core.Service, authorization, name string, b core.Body) error {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return err
	}
	err = stageArtifact(ctx, s, c, name, b)
	upload.SettleUpload(ctx, s, c, b, err)
	return err
}

func stageArtifact(ctx context.Context, s *core.Service, c *core.Caller, name string, b core.Body) error {
	if c.Step.Kind == core.SupervisorKind {
		return stratus.Errorf(stratus.EFORBIDDEN, "%s is a supervisor turn: the layer is read-only and stages no part; return the text as the final report", c.Step.StepRef)
	}
	if err := projection.CheckPartName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, " ") {
		return stratus.FieldErrorf(stratus.EINVALID, "name", "part %q starts with a space; choose a name a reader can see", name)
	}
	for _, n := range c.Env.Flow.Nodes {
		// Case-insensitively: on macOS and Windows file systems
		// "Implementation.md" is implementation's projection.
		if strings.EqualFold(name, n.ID+".md") {
			return stratus.FieldErrorf(stratus.EINVALID, "name", "part %q would overwrite the projection of node %s (<ctx-dir>/%s.md); choose another name", name, n.ID, n.ID)
		}
	}
	unlock := s.LockStaging(c.Step.TID)
	defer unlock()
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	if err := checkPartCase(ctx, s, c, name); err != nil {
		return err
	}
	body, err := upload.BodyOf(ctx, s, c, b)
	if err != nil {
		return err
	}
	if body, err = s.ResolveFileSentinel(c, body); err != nil {
		return err
	}
	// The file first, then the tail: a part is staged (listed in the step's
	// parts) only once its file persisted, so a write the disk refuses
	// stages nothing (docs/security.md § Output that did not persist).
	if c.Run.WorkDir == "" {
		// No root to place files under: the part is staged (data plane),
		// its file is skipped fail-open (docs/contracts.md § Files are the
		// server's job).
		s.WarnCall(c, "%s: no work dir resolves for run %s; part %s staged without its file", c.Step.StepRef, c.Run.ID, name)
	} else {
		dir, err := core.CtxDir(c.Env, c.Run)
		if err != nil {
			return err
		}
		if err := s.Files(c.Run).Put(ctx, path.Join(dir, name), body); err != nil {
			return err
		}
	}
	_, err = s.Store.AppendOutput(ctx, stratus.OutputEvent{TID: c.Step.TID, Attempt: c.Attempt.N,
		Kind: stratus.OutputArtifact, Name: name, Body: body, OK: true, At: s.NowUTC()})
	return err
}

// foldName is name under Unicode full case folding (CaseFolding.txt, C
// and F), what case-insensitive file systems and object-store-to-disk
// copies compare: "PLAN.md", "Plan.MD" and "plan.md" are one file there.
func foldName(name string) string { return cases.Fold().String(name) }

// checkPartCase refuses name when it equals a part already staged by c's
// attempt under Unicode case folding without being byte-equal
// (docs/security.md § Part names): on a case-insensitive checkout, and
// when an S3 ctx dir is copied to such a disk, the two are one file, and
// which body survives depends on the order of the writes. Restaging the
// same name is last write wins (docs/contracts.md § Output is a tool
// call), so it passes. Errors:
// EINVALID (field name) naming both names; the store's error.
func checkPartCase(ctx context.Context, s *core.Service, c *core.Caller, name string) error {
	staged, err := s.Store.ListPartNames(ctx, c.Step.TID, c.Attempt.N)
	if err != nil {
		return err
	}
	key := foldName(name)
	for _, n := range staged {
		if n != name && foldName(n) == key {
			return stratus.FieldErrorf(stratus.EINVALID, "name",
				"part %q differs only by case from the part %q this step already staged: case-insensitive file systems (macOS, Windows) hold them as one file; stage %q again to replace it, or choose another name (docs/security.md § Part names)",
				name, n, n)
		}
	}
	return nil
}

// NewUpload serves POST /v1/worker/upload (docs/contracts.md § Request and
// response bodies; docs/security.md § Upload size limits): a key of the
// caller's attempt and a URL to PUT a body of req.Bytes bytes to. Errors:
// see Authorize; ECONFLICT when fenced; EINVALID (field bytes) for a size
// that is not positive; ETOOLARGE (field bytes) over MaxUpload.
func NewUpload(ctx context.Context, s *core.Service, authorization string, req core.UploadRequest) (core.Upload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return core.Upload{}, err
	}
	if err := s.Fence(ctx, c); err != nil {
		return core.Upload{}, err
	}
	switch max := s.MaxUpload(); {
	case req.Bytes <= 0:
		return core.Upload{}, stratus.FieldErrorf(stratus.EINVALID, "bytes", "%d (or missing) is not a body size; valid: 1 to %d bytes", req.Bytes, max)
	case req.Bytes > max:
		return core.Upload{}, stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "%d bytes is over the limit of %d bytes for a body sent through an upload", req.Bytes, max)
	}
	// Bounded storage: an attempt holds at most MaxPendingUploads bodies
	// stored and not yet named (checked again at a PUT through this API).
	if err := upload.PendingUploads(ctx, s, c, ""); err != nil {
		return core.Upload{}, err
	}
	exp := s.NowUTC().Add(core.UploadTTL).Truncate(time.Second).UTC()
	key := s.UploadKey(c, req.Bytes, exp)
	u := core.Upload{Key: key, MaxBytes: s.MaxUpload(), ExpiresAt: exp}
	if p, ok := s.Sink.(sink.Presigner); ok {
		if u.URL, err = p.PresignPutSize(ctx, key, req.Bytes, core.UploadTTL); err != nil {
			return core.Upload{}, err
		}
	} else {
		u.URL = core.BlobRoute(key)
	}
	return u, nil
}
