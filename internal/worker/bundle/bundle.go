package bundle

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/upload"
	"github.com/stratusflow/stratus/internal/workspace"
)

// bundleTooLarge is the refusal of the caller's step bundle of size bytes
// (-1: only "more than max" is known).
func bundleTooLarge(c *core.Caller, size, max int64) error {
	if size < 0 {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the workspace bundle of step %s is over the limit of %d bytes (limits.max_snapshot_bytes)", c.Step.StepRef, max)
	}
	return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the workspace bundle of step %s is %d bytes, over the limit of %d bytes (limits.max_snapshot_bytes)", c.Step.StepRef, size, max)
}

// checkBundleSize refuses (ETOOLARGE) the bundle stored under key when it
// is over the caller's limit, and deletes it: whoever stored it did not
// go through WorkspaceUpload. Nothing stored there is EINVALID.
func checkBundleSize(ctx context.Context, s *core.Service, c *core.Caller, key string) error {
	size, err := s.Sink.Size(ctx, key)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return stratus.FieldErrorf(stratus.EINVALID, "to", "no bundle was uploaded to %s; upload it before advancing the head", key)
	} else if err != nil {
		return err
	}
	if max := s.WorkspaceMaxBytes(c.Env); size > max {
		if err := s.Sink.Delete(ctx, key); err != nil {
			s.WarnCall(c, "%s: delete the oversized bundle %s: %v", c.Step.StepRef, key, err)
		}
		return bundleTooLarge(c, size, max)
	}
	return nil
}

// readableKey reports whether the caller may read key through the API,
// and where it is: bundle for a key of its run's workspace bundles (the
// service's Sink), file for one of its ctx dir or report dir (the run's
// work-dir files, Service.files).
func readableKey(c *core.Caller, key string) (bundle, file bool) {
	ws := c.Run.Workspace
	if ws == nil || len(ws.Bundles) == 0 || sink.CheckKey(key) != nil {
		return false, false
	}
	under := func(dir string) bool { return dir != "" && strings.HasPrefix(key, dir+"/") }
	dir, _ := core.CtxDir(c.Env, c.Run)
	if under(path.Dir(ws.Bundles[0])) {
		return true, false
	}
	return false, under(dir) || under(core.ReportDir(c.Env.Flow, c.Run.TaskID))
}

// Read serves GET /v1/worker/workspace/blob?key= for a sink that does not
// presign (docs/architecture.md § Workspaces): the bytes of one of the caller's
// run's workspace bundles, ctx or report files. Errors: see Authorize; EINVALID
// for a key outside those; ENOTFOUND when nothing is stored there.
func Read(ctx context.Context, s *core.Service, authorization, key string) ([]byte, error) {
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, "")
	if err != nil {
		return nil, err
	}
	switch bundle, file := readableKey(c, key); {
	case bundle:
		return s.Sink.Get(ctx, key)
	case file:
		return s.Files(c.Run).Get(ctx, key)
	}
	return nil, stratus.FieldErrorf(stratus.EINVALID, "key", "%q is not a file of run %s's workspace, ctx dir or report dir", key, c.Run.ID)
}

// Write serves PUT /v1/worker/workspace/blob?key= for a sink that does not
// presign: the caller's attempt stores its step bundle under the one key its
// payload named (Upload), or a body under one of its upload keys (NewUpload;
// docs/contracts.md § Request and response bodies). Errors: see Authorize;
// ECONFLICT when the attempt can no longer count (fence); EINVALID for any other
// key; ETOOLARGE for a bundle over the limit (WriteBlobFrom).
func Write(ctx context.Context, s *core.Service, authorization, key string, body []byte) error {
	return WriteFrom(ctx, s, authorization, key, func(limit int64) ([]byte, error) {
		if int64(len(body)) > limit {
			return nil, sink.TooLarge(key, int64(len(body)), limit)
		}
		return body, nil
	})
}

// WriteFrom is WriteBlob of a body not read yet: once the caller and
// the key are accepted, read is called with the most bytes the key takes
// (a step bundle: the bundle limit; an upload: MaxUpload) and returns the
// body, or an ETOOLARGE error having read at most limit+1 bytes of it
// (docs/security.md § Upload size limits: a body over the limit is never
// buffered whole). Errors: WriteBlob's; ETOOLARGE (field bytes) naming the
// limit for a bundle over it.
func WriteFrom(ctx context.Context, s *core.Service, authorization, key string, read func(limit int64) ([]byte, error)) error {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return err
	}
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	ws := c.Run.Workspace
	if ws != nil && len(ws.Bundles) > 0 && key == core.WorkspaceUploadKey(ws, c) {
		if node := c.Env.Flow.Node(c.Step.Node); node == nil || !core.WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
			return stratus.FieldErrorf(stratus.EINVALID, "key", "step %s is not a workspace-write agent node; it uploads no bundle", c.Step.StepRef)
		}
		max := s.WorkspaceMaxBytes(c.Env)
		body, err := read(max)
		switch {
		case stratus.ErrorCode(err) == stratus.ETOOLARGE:
			return bundleTooLarge(c, -1, max)
		case err != nil:
			return err
		case int64(len(body)) > max:
			return bundleTooLarge(c, int64(len(body)), max)
		}
		return s.Sink.Put(ctx, key, body)
	}
	if strings.HasPrefix(key, path.Join(core.StateDirName, "uploads")+"/") {
		body, err := read(s.MaxUpload())
		if err != nil {
			return err
		}
		if err := upload.CheckUploadPut(s, c, key, body); err != nil {
			return err
		}
		if err := upload.PendingUploads(ctx, s, c, key); err != nil {
			return err
		}
		return s.Sink.Put(ctx, key, body)
	}
	return stratus.FieldErrorf(stratus.EINVALID, "key", "%q is not this attempt's bundle key or one of its uploads (POST /v1/worker/upload)", key)
}

// acceptedKey is where AdvanceHead keeps the bundle it checked, under a
// key no attempt may write (WriteBlob takes its upload key only, and a
// presigned URL names that key), so that what the run's head is made of
// is what was checked, whatever is written to the upload key later.
func acceptedKey(ws *stratus.Workspace, to string) string {
	return path.Join(path.Dir(ws.Bundles[0]), "step-"+to+".bundle")
}

// AdvanceHead serves POST /v1/worker/workspace/head (docs/security.md §
// Workspace commits): after
// uploading its bundle, a workspace-write attempt moves the run's head from
// the head it started from to its commit. Fenced twice: the attempt must
// still count (a rekicked or late attempt gets ECONFLICT), and the head
// must still be From (store AdvanceWorkspace). An engine holds the handle
// too, so the bundle is checked here as the runner checks its own commit
// (docs/security.md § Workspace commits: s.Commits, with the run's
// exclude list, WorkspaceExclude: no commit touches Stratus's own paths),
// and the head moves to a copy of exactly the bytes checked
// (acceptedKey).
//
// Errors: see Authorize; ECONFLICT as said; EINVALID for a node that may
// not write, a malformed commit id, or a bundle not uploaded;
// EUNPROCESSABLE (naming the commit, the paths and the rules, or what a
// valid step bundle is) or ETOOLARGE for a bundle the check refuses (ETOOLARGE, and the bundle deleted, for a
// stored bundle over the limit: checkBundleSize), and EUNPROCESSABLE naming the files when
// the attempt's engine wrote into the operator's work dir (WatchWorkDir);
// EINTERNAL when the service has no CommitChecker. A refused move leaves
// the head where it was.
func AdvanceHead(ctx context.Context, s *core.Service, authorization string, h core.HeadAdvance) error {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return err
	}
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	ws := c.Run.Workspace
	if ws == nil || len(ws.Bundles) == 0 {
		return stratus.Errorf(stratus.EINVALID, "run %s has no workspace to advance", c.Run.ID)
	}
	node := c.Env.Flow.Node(c.Step.Node)
	if node == nil || !core.WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
		return stratus.Errorf(stratus.EINVALID, "step %s is not a workspace-write agent node; it may not change the run's workspace", c.Step.StepRef)
	}
	for field, v := range map[string]string{"from": h.From, "to": h.To} {
		if !isCommitID(v) {
			return stratus.FieldErrorf(stratus.EINVALID, field, "%q is not a commit id; valid: 40 lowercase hex digits", v)
		}
	}
	if why := s.WatchReason(ctx, c); why != "" {
		// Its engine wrote into the operator's work dir: the step fails,
		// and its commit is not taken (core.Service.WatchReason).
		return stratus.Errorf(stratus.EUNPROCESSABLE, "%s", why)
	}
	if h.From != ws.Head {
		// The store fences this too; said first, before a costly check.
		return stratus.FieldErrorf(stratus.ECONFLICT, "from", "run %s: the workspace head is %s, not %s: another attempt advanced it", c.Run.ID, ws.Head, h.From)
	}
	key := core.WorkspaceUploadKey(ws, c)
	if err := checkBundleSize(ctx, s, c, key); err != nil { // docs/security.md § Upload size limits
		return err
	}
	max := s.WorkspaceMaxBytes(c.Env)
	upload, err := s.Sink.GetMax(ctx, key, workspace.BundleReadMax(max))
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return stratus.FieldErrorf(stratus.EINVALID, "to", "no bundle was uploaded to %s; upload it before advancing the head", key)
	} else if err != nil {
		return err
	}
	if s.Commits == nil {
		return stratus.Errorf(stratus.EINTERNAL, "this worker API checks no workspace commit (no CommitChecker); the head of run %s is not moved", c.Run.ID)
	}
	exclude, err := core.WorkspaceExclude(c.Env, c.Run)
	if err != nil {
		return err
	}
	if err := s.Commits.CheckAdvance(ctx, workspace.Advance{Sink: s.Sink, Bundles: ws.Bundles, Upload: upload,
		From: h.From, To: h.To, MaxBytes: max, Exclude: exclude}); err != nil {
		return err
	}
	accepted := acceptedKey(ws, h.To)
	if err := s.Sink.Put(ctx, accepted, upload); err != nil {
		return err
	}
	if err := s.Store.AdvanceWorkspace(ctx, c.Run.ID, h.From, h.To, accepted); err != nil {
		return err
	}
	// The accepted copy is what the run reads from now on; the upload
	// would only be a second copy an engine can still overwrite.
	if err := s.Sink.Delete(ctx, key); err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		s.WarnCall(c, "%s: delete the uploaded bundle %s once accepted: %v", c.Step.StepRef, key, err)
	}
	return nil
}

// isCommitID reports whether s is a full SHA-1 commit id in lowercase hex.
func isCommitID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Upload serves POST /v1/worker/workspace/upload {"bytes": N}
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
func Upload(ctx context.Context, s *core.Service, authorization string, req core.UploadRequest) (core.Upload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return core.Upload{}, err
	}
	if err := s.Fence(ctx, c); err != nil {
		return core.Upload{}, err
	}
	ws := c.Run.Workspace
	if ws == nil || len(ws.Bundles) == 0 {
		return core.Upload{}, stratus.Errorf(stratus.EINVALID, "run %s has no workspace; it stores no step bundle", c.Run.ID)
	}
	if node := c.Env.Flow.Node(c.Step.Node); node == nil || !core.WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
		return core.Upload{}, stratus.Errorf(stratus.EINVALID, "step %s is not a workspace-write agent node; it uploads no bundle", c.Step.StepRef)
	}
	max := s.WorkspaceMaxBytes(c.Env)
	switch {
	case req.Bytes <= 0:
		return core.Upload{}, stratus.FieldErrorf(stratus.EINVALID, "bytes", "%d (or missing) is not a bundle size; valid: 1 to %d bytes", req.Bytes, max)
	case req.Bytes > max:
		return core.Upload{}, bundleTooLarge(c, req.Bytes, max)
	}
	key := core.WorkspaceUploadKey(ws, c)
	u := core.Upload{Key: key, MaxBytes: max, ExpiresAt: s.NowUTC().Add(core.UploadTTL).Truncate(time.Second).UTC()}
	if p, ok := s.Sink.(sink.Presigner); ok {
		if u.URL, err = p.PresignPutSize(ctx, key, req.Bytes, core.UploadTTL); err != nil {
			return core.Upload{}, err
		}
	} else {
		u.URL = core.BlobRoute(key)
	}
	return u, nil
}
