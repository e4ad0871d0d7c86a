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
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/workspace"
)

// A run with a workspace (stratus.Run.Workspace; docs/architecture.md §
// Workspaces) has no disk of the operator's on the worker's side: every
// path a payload names is under the workspace's Root, which each runner
// replaces with a checkout of its own, and the repository travels as git
// bundles in the sink, read and written through presigned URLs (S3) or
// this API (the fs sink).

// WorkspaceSpec is the `workspace` field of a prompt payload: what the
// runner materializes before the engine (or a checks or tool command)
// starts, and what it does after (docs/architecture.md § Workspaces;
// docs/security.md § Workspace commits).
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
	// DiffPath and OverviewPath, when set (Head differs from Base), are where
	// the runner writes Base..Head as {diff_path} and {change_overview_path}
	// (docs/contracts.md § Template variables), Root-relative.
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

// WorkspaceExclude lists a run's Root-relative paths that are Stratus's
// own: the state dir and the ctx dir (as recorded when it was frozen).
func WorkspaceExclude(env *RunEnv, run stratus.Run) ([]string, error) {
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
	exclude, err := WorkspaceExclude(env, run)
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
		spec.Write, spec.Upload, spec.MaxBytes = true, &up, s.WorkspaceMaxBytes(env)
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
