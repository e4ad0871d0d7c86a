package core

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/workspace"
)

// A run with a workspace (stratus.Run.Workspace; issue 12, DESIGN.md §
// Workspaces) has no disk of the operator's on the worker's side: every
// path a payload names is under the workspace's Root, which each runner
// replaces with a checkout of its own, and the repository travels as git
// bundles in the sink, read and written through presigned URLs (S3) or
// this API (the fs sink).

// WorkspaceSpec is the `workspace` field of a prompt payload: what the
// runner materializes before the engine (or a checks or tool command)
// starts, and what it does after (issue 12 § 2).
type WorkspaceSpec struct {
	// Root is the path every other path of the payload is rendered under;
	// the runner puts its own directory in its place (in the prompt, the
	// envelope, the launch spec, the exec spec).
	Root string `json:"root"`
	// Base is the base snapshot commit; Head the run's head at fetch time,
	// which the runner checks out (detached).
	Base string `json:"base"`
	Head string `json:"head"`
	// Bundles carry Base..Head: fetched in order into the runner's
	// repository.
	Bundles []Blob `json:"bundles"`
	// Files are the run's ctx and report files (fetched by URL) and, for a
	// tool node, the run's frozen tools (inline Body), placed at Root/Path.
	Files []Blob `json:"files,omitempty"`
	// Exclude lists Root-relative paths that are Stratus's own (its state
	// dir, the ctx dir): never part of a commit, never a change.
	Exclude []string `json:"exclude"`
	// DiffPath and OverviewPath, when set (Head differs from Base), are
	// where the runner writes Base..Head as {diff_path} and
	// {change_overview_path} (seed 004 § Template variables), Root-relative.
	DiffPath     string `json:"diff_path,omitempty"`
	OverviewPath string `json:"overview_path,omitempty"`
	// Write is set for a workspace-write agent node: after its engine ends
	// with a report, the runner commits the change (one commit, message
	// the step ref, author Stratus), stores the bundle Head..commit where
	// POST /v1/worker/workspace/upload says (under Upload.Key), and
	// advances the head (POST /v1/worker/workspace/head). Upload.URL is
	// never a presigned URL (docs/security.md § Upload size limits): it is
	// empty, or this API's blob route for a sink that does not presign.
	Write  bool  `json:"write,omitempty"`
	Upload *Blob `json:"upload,omitempty"`
	// MaxBytes caps the step's bundle, bytes (limits.max_snapshot_bytes);
	// the worker API refuses a larger one wherever it is stored.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// Blob is one file of the workspace transport. URL is an absolute
// presigned URL (no credentials sent), or a worker API path starting with
// "/v1/" used with the runner's handle; Body carries small files inline.
type Blob struct {
	Path       string `json:"path,omitempty"` // Root-relative, slash-separated (Files)
	Key        string `json:"key"`            // the sink key
	URL        string `json:"url,omitempty"`
	Body       []byte `json:"body,omitempty"`
	Executable bool   `json:"executable,omitempty"`
}

// WorkspaceRoot is the Root of a run's workspace: a path no worker has,
// unique to the run, so that replacing it can touch nothing else.
func WorkspaceRoot(runID string) string { return "/stratus-workspace/" + runID }

// WorkspaceKeys returns the sink key prefix of a run's workspace bundles
// beside its run bundle (stateDir "" on AWS, where the sink's keys start at
// runs/; ".stratus" embedded, where the worker's sink is the work dir).
func WorkspaceKeys(stateDir, runID string) string {
	return path.Join(stateDir, "runs", runID, "workspace")
}

// WorkspaceBlobTTL is how long a presigned workspace URL lives: the
// longest step (hours) plus margin.
const WorkspaceBlobTTL = 12 * time.Hour

// workspaceExclude lists a run's Root-relative paths that are Stratus's
// own: the state dir and the ctx dir (as recorded when it was frozen).
func workspaceExclude(env *RunEnv, run stratus.Run) ([]string, error) {
	dir, err := CtxDir(env, run)
	if err != nil {
		return nil, err
	}
	out := []string{StateDirName, dir}
	for _, x := range run.Workspace.Exclude {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

// WorkspaceSpecOf builds a payload's workspace field for the caller's step
// (nil for a run without a workspace). write: the step may advance the
// head (a workspace-write agent node; never an evaluator, checks or tool).
func (s *Service) WorkspaceSpecOf(ctx context.Context, c *Caller, write bool, tools bool) (*WorkspaceSpec, error) {
	run, env := c.Run, c.Env
	ws := run.Workspace
	if ws == nil {
		return nil, nil
	}
	exclude, err := workspaceExclude(env, run)
	if err != nil {
		return nil, err
	}
	spec := &WorkspaceSpec{Root: ws.Root, Base: ws.Base, Head: ws.Head, Exclude: exclude}
	for _, k := range ws.Bundles {
		b, err := blob(ctx, s.Sink, k)
		if err != nil {
			return nil, err
		}
		spec.Bundles = append(spec.Bundles, b)
	}
	dirs := []string{exclude[1]}
	if rd := ReportDir(env.Flow, run.TaskID); rd != "" && rd != exclude[1] {
		dirs = append(dirs, rd)
	}
	files := s.Files(run)
	for _, d := range dirs {
		keys, err := files.List(ctx, d)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			b, err := blob(ctx, files, k)
			if err != nil {
				return nil, err
			}
			b.Path = k
			spec.Files = append(spec.Files, b)
		}
	}
	if env.Task != nil && env.Task.Path != "" {
		body, err := os.ReadFile(env.Task.Path)
		if err != nil {
			return nil, fmt.Errorf("the run's task file: %w", err)
		}
		rel := strings.TrimPrefix(TaskPathOf(run), ws.Root+"/")
		spec.Files = append(spec.Files, Blob{Path: rel, Body: body})
	}
	if tools {
		if err := addTools(env, spec); err != nil {
			return nil, err
		}
	}
	if ws.Head != ws.Base {
		spec.DiffPath, spec.OverviewPath = path.Join(exclude[1], DiffFile), path.Join(exclude[1], ChangeOverviewFile)
	}
	if write {
		// Never a presigned PUT here: it would store a body of any size
		// (docs/security.md § Upload size limits). The runner asks
		// WorkspaceUpload for a URL signed for its bundle's size.
		up := Blob{Key: WorkspaceUploadKey(ws, c)}
		if _, ok := s.Sink.(sink.Presigner); !ok {
			up.URL = BlobRoute(up.Key)
		}
		spec.Write, spec.Upload, spec.MaxBytes = true, &up, s.workspaceMaxBytes(env)
	}
	return spec, nil
}

// WorkspaceUploadKey is where the caller's attempt uploads its bundle: one key per
// attempt, beside the run's other bundles.
func WorkspaceUploadKey(ws *stratus.Workspace, c *Caller) string {
	return path.Join(path.Dir(ws.Bundles[0]), fmt.Sprintf("%s.a%d.bundle", c.Step.TID, c.Attempt.N))
}

// blob addresses key of sk (the service's Sink for a workspace bundle,
// the run's work-dir files for a ctx or report file) for the runner to
// read: a presigned GET when the sink signs URLs, else this API's
// /v1/worker/workspace/blob route (ReadBlob).
func blob(ctx context.Context, sk sink.Sink, key string) (Blob, error) {
	if p, ok := sk.(sink.Presigner); ok {
		u, err := p.PresignGet(ctx, key, WorkspaceBlobTTL)
		if err != nil {
			return Blob{}, err
		}
		return Blob{Key: key, URL: u}, nil
	}
	return Blob{Key: key, URL: BlobRoute(key)}, nil
}

// BlobRoute is this API's route to key for a sink that does not presign.
func BlobRoute(key string) string {
	return "/v1/worker/workspace/blob?key=" + url.QueryEscape(key)
}

// addTools inlines the run's frozen tools (RunEnv.ToolsDir) under
// .stratus/tools: a tool node runs them from the runner's own checkout.
func addTools(env *RunEnv, spec *WorkspaceSpec) error {
	if env.ToolsDir == "" {
		return nil
	}
	return filepath.WalkDir(env.ToolsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == env.ToolsDir {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(env.ToolsDir, p)
		spec.Files = append(spec.Files, Blob{Path: path.Join(StateDirName, "tools", filepath.ToSlash(rel)), Body: body, Executable: fi.Mode()&0o111 != 0})
		return nil
	})
}

// WritesWorkspace reports whether a step of node may advance the run's
// head: an agent node resolved to the workspace-write profile.
func WritesWorkspace(node *flow.Node, profile string) bool {
	return node.Kind == flow.KindAgent && profile == "workspace-write"
}

// readableKey reports whether the caller may read key through the API,
// and where it is: bundle for a key of its run's workspace bundles (the
// service's Sink), file for one of its ctx dir or report dir (the run's
// work-dir files, Service.files).
func readableKey(c *Caller, key string) (bundle, file bool) {
	ws := c.Run.Workspace
	if ws == nil || len(ws.Bundles) == 0 || sink.CheckKey(key) != nil {
		return false, false
	}
	under := func(dir string) bool { return dir != "" && strings.HasPrefix(key, dir+"/") }
	dir, _ := CtxDir(c.Env, c.Run)
	if under(path.Dir(ws.Bundles[0])) {
		return true, false
	}
	return false, under(dir) || under(ReportDir(c.Env.Flow, c.Run.TaskID))
}

// ReadBlob serves GET /v1/worker/workspace/blob?key= for a sink that does
// not presign (issue 12 § 1): the bytes of one of the caller's run's
// workspace bundles, ctx or report files. Errors: see Authorize; EINVALID
// for a key outside those; ENOTFOUND when nothing is stored there.
func (s *Service) ReadBlob(ctx context.Context, authorization, key string) ([]byte, error) {
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

// WriteBlob serves PUT /v1/worker/workspace/blob?key= for a sink that does
// not presign: the caller's attempt stores its step bundle under the one
// key its payload named (Upload), or a body under one of its upload keys
// (NewUpload, issue 14 § 8). Errors: see Authorize; ECONFLICT when
// the attempt can no longer count (fence); EINVALID for any other key;
// ETOOLARGE for a bundle over the limit (WriteBlobFrom).
func (s *Service) WriteBlob(ctx context.Context, authorization, key string, body []byte) error {
	return s.WriteBlobFrom(ctx, authorization, key, func(limit int64) ([]byte, error) {
		if int64(len(body)) > limit {
			return nil, sink.TooLarge(key, int64(len(body)), limit)
		}
		return body, nil
	})
}

// WriteBlobFrom is WriteBlob of a body not read yet: once the caller and
// the key are accepted, read is called with the most bytes the key takes
// (a step bundle: the bundle limit; an upload: MaxUpload) and returns the
// body, or an ETOOLARGE error having read at most limit+1 bytes of it
// (docs/security.md § Upload size limits: a body over the limit is never
// buffered whole). Errors: WriteBlob's; ETOOLARGE (field bytes) naming the
// limit for a bundle over it.
func (s *Service) WriteBlobFrom(ctx context.Context, authorization, key string, read func(limit int64) ([]byte, error)) error {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return err
	}
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	ws := c.Run.Workspace
	if ws != nil && len(ws.Bundles) > 0 && key == WorkspaceUploadKey(ws, c) {
		if node := c.Env.Flow.Node(c.Step.Node); node == nil || !WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
			return stratus.FieldErrorf(stratus.EINVALID, "key", "step %s is not a workspace-write agent node; it uploads no bundle", c.Step.StepRef)
		}
		max := s.workspaceMaxBytes(c.Env)
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
	if strings.HasPrefix(key, path.Join(StateDirName, "uploads")+"/") {
		body, err := read(s.MaxUpload())
		if err != nil {
			return err
		}
		if err := s.CheckUploadPut(c, key, body); err != nil {
			return err
		}
		if err := s.PendingUploads(ctx, c, key); err != nil {
			return err
		}
		return s.Sink.Put(ctx, key, body)
	}
	return stratus.FieldErrorf(stratus.EINVALID, "key", "%q is not this attempt's bundle key or one of its uploads (POST /v1/worker/upload)", key)
}

// HeadAdvance is the body of POST /v1/worker/workspace/head.
type HeadAdvance struct {
	From string `json:"from"` // the head the attempt started from (its payload's Head)
	To   string `json:"to"`   // the commit it made on top of From
}

// CommitChecker checks a move of a run's workspace head before the store
// records it (docs/security.md § Workspace commits): the uploaded bundle
// carries To, To descends from From, and every commit it brings passes
// the workspace commit rules. workspace/bundlecheck is the one
// implementation (it reads bundles without git, as the worker API's
// Lambda must); a port so that only what serves the worker API links it.
type CommitChecker interface {
	// CheckAdvance returns nil for a move that may be recorded; errors as
	// bundlecheck.Checker.CheckAdvance (4xx for whatever the bundle is to
	// blame for).
	CheckAdvance(ctx context.Context, a workspace.Advance) error
}

// acceptedKey is where AdvanceHead keeps the bundle it checked, under a
// key no attempt may write (WriteBlob takes its upload key only, and a
// presigned URL names that key), so that what the run's head is made of
// is what was checked, whatever is written to the upload key later.
func acceptedKey(ws *stratus.Workspace, to string) string {
	return path.Join(path.Dir(ws.Bundles[0]), "step-"+to+".bundle")
}

// AdvanceHead serves POST /v1/worker/workspace/head (issue 12 § 2): after
// uploading its bundle, a workspace-write attempt moves the run's head from
// the head it started from to its commit. Fenced twice: the attempt must
// still count (a rekicked or late attempt gets ECONFLICT), and the head
// must still be From (store AdvanceWorkspace). An engine holds the handle
// too, so the bundle is checked here as the runner checks its own commit
// (docs/security.md § Workspace commits: s.Commits, with the run's
// exclude list, workspaceExclude: no commit touches Stratus's own paths),
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
func (s *Service) AdvanceHead(ctx context.Context, authorization string, h HeadAdvance) error {
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
	if node == nil || !WritesWorkspace(node, c.Attempt.Resolved.PermissionProfile) {
		return stratus.Errorf(stratus.EINVALID, "step %s is not a workspace-write agent node; it may not change the run's workspace", c.Step.StepRef)
	}
	for field, v := range map[string]string{"from": h.From, "to": h.To} {
		if !isCommitID(v) {
			return stratus.FieldErrorf(stratus.EINVALID, field, "%q is not a commit id; valid: 40 lowercase hex digits", v)
		}
	}
	if why := s.WatchReason(ctx, c); why != "" {
		// Its engine wrote into the operator's work dir: the step fails,
		// and its commit is not taken (watch.go).
		return stratus.Errorf(stratus.EUNPROCESSABLE, "%s", why)
	}
	if h.From != ws.Head {
		// The store fences this too; said first, before a costly check.
		return stratus.FieldErrorf(stratus.ECONFLICT, "from", "run %s: the workspace head is %s, not %s: another attempt advanced it", c.Run.ID, ws.Head, h.From)
	}
	key := WorkspaceUploadKey(ws, c)
	if err := s.checkBundleSize(ctx, c, key); err != nil { // docs/security.md § Upload size limits
		return err
	}
	max := s.workspaceMaxBytes(c.Env)
	upload, err := s.Sink.GetMax(ctx, key, workspace.BundleReadMax(max))
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return stratus.FieldErrorf(stratus.EINVALID, "to", "no bundle was uploaded to %s; upload it before advancing the head", key)
	} else if err != nil {
		return err
	}
	if s.Commits == nil {
		return stratus.Errorf(stratus.EINTERNAL, "this worker API checks no workspace commit (no CommitChecker); the head of run %s is not moved", c.Run.ID)
	}
	exclude, err := workspaceExclude(c.Env, c.Run)
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
