package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
	"github.com/stratusflow/stratus/internal/workspace"
)

// checkout is a runner's own copy of a run's repository:
// Dir is the work tree every payload path now points into.
type checkout struct {
	spec *worker.WorkspaceSpec
	top  string // the temporary directory holding Dir and the bundles
	Dir  string
	// bundles are the fetched bundles' paths, in order (a publish node
	// rebuilds the run's commits from them).
	bundles []string
}

// materialize makes the payload's workspace real on this machine: it
// fetches the bundles (base, then each step's) and checks out the run's
// head into a directory of the runner's own, places the ctx, report and
// tool files, writes base..head where {diff_path} and
// {change_overview_path} point (docs/contracts.md § Template variables), and
// rewrites every path of p from the workspace's Root to that directory.
// The caller removes it with cleanup.
func materialize(ctx context.Context, c *workerclient.Client, p *worker.Payload, o Options) (*checkout, error) {
	spec := p.Workspace
	if spec.Root == "" || !strings.HasPrefix(spec.Root, "/") {
		return nil, fmt.Errorf("workspace root %q is not an absolute path", spec.Root)
	}
	top, err := os.MkdirTemp(o.WorkRoot, "stratus-workspace-")
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	w := &checkout{spec: spec, top: top, Dir: filepath.Join(top, "work")}
	fail := func(err error) (*checkout, error) {
		w.cleanup()
		return nil, err
	}
	var bundles []string
	for i, b := range spec.Bundles {
		body, err := c.Blob(ctx, b)
		if err != nil {
			return fail(fmt.Errorf("workspace: fetch bundle %s: %w", b.Key, err))
		}
		f := filepath.Join(top, fmt.Sprintf("%03d.bundle", i))
		if err := os.WriteFile(f, body, 0o600); err != nil {
			return fail(fmt.Errorf("workspace: %w", err))
		}
		bundles = append(bundles, f)
	}
	w.bundles = bundles
	if err := workspace.Materialize(ctx, w.Dir, bundles, spec.Head, spec.Exclude); err != nil {
		return fail(fmt.Errorf("workspace: check out %s: %w", spec.Head, err))
	}
	for _, f := range spec.Files {
		rel := filepath.FromSlash(f.Path)
		if f.Path == "" || !filepath.IsLocal(rel) {
			return fail(fmt.Errorf("workspace: file path %q is not inside the workspace", f.Path))
		}
		body, err := c.Blob(ctx, f)
		if err != nil {
			return fail(fmt.Errorf("workspace: fetch %s: %w", f.Path, err))
		}
		mode := os.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		if err := writeFile(filepath.Join(w.Dir, rel), body, mode); err != nil {
			return fail(fmt.Errorf("workspace: %w", err))
		}
	}
	if spec.DiffPath != "" {
		if err := w.writeDiff(ctx); err != nil {
			return fail(err)
		}
	}
	if err := rewriteRoot(p, spec.Root, w.Dir); err != nil {
		return fail(err)
	}
	o.Log.Info(fmt.Sprintf("workspace at %s: head %s", w.Dir, short(spec.Head)), "bundles", len(spec.Bundles), "files", len(spec.Files))
	return w, nil
}

func (w *checkout) cleanup() { os.RemoveAll(w.top) }

// writeDiff writes the change base..head of the checkout (Stratus's own
// paths left out) as the payload's DiffPath and OverviewPath.
func (w *checkout) writeDiff(ctx context.Context) error {
	t, err := gitwork.Open(ctx, w.Dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	snap, err := t.Snapshot(ctx, w.spec.Base, w.spec.Exclude)
	if err != nil {
		return fmt.Errorf("workspace: diff %s..%s: %w", short(w.spec.Base), short(w.spec.Head), err)
	}
	diff := filepath.Join(w.Dir, filepath.FromSlash(w.spec.DiffPath))
	if err := writeFile(diff, snap.Diff, 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(w.Dir, filepath.FromSlash(w.spec.OverviewPath)), snap.Overview(diff), 0o644)
}

// commit ends a workspace-write attempt (docs/security.md § Workspace commits):
// its change becomes one commit on the head it started from (message: the
// step ref, author Stratus), uploaded as an incremental bundle where the
// worker API says once its size is known, and the run's head moves to it.
// Nothing changed: nothing is uploaded and the head stays. The head move
// is fenced by the worker API (409 when another attempt moved it or this
// one no longer counts).
func (w *checkout) commit(ctx context.Context, c *workerclient.Client, p *worker.Payload, o Options) error {
	if !w.spec.Write || w.spec.Upload == nil {
		return nil
	}
	bundle := filepath.Join(w.top, "step.bundle")
	sha, changed, err := workspace.CommitStep(ctx, w.Dir, w.spec.Head, p.StepRef, bundle, w.spec.MaxBytes)
	if err != nil {
		return fmt.Errorf("workspace: commit %s: %w", p.StepRef, err)
	}
	if !changed {
		o.Log.Info(fmt.Sprintf("workspace: %s changed nothing", p.StepRef))
		return nil
	}
	body, err := os.ReadFile(bundle)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	// The URL is asked for now that the size is known: it takes exactly
	// this bundle (docs/security.md § Upload size limits).
	up, err := c.WorkspaceUpload(ctx, int64(len(body)))
	if err != nil {
		return fmt.Errorf("workspace: upload the bundle of %s: %w", p.StepRef, err)
	}
	if err := c.PutBlob(ctx, worker.Blob{Key: up.Key, URL: up.URL}, body); err != nil {
		return fmt.Errorf("workspace: upload the bundle of %s: %w", p.StepRef, err)
	}
	if err := c.AdvanceHead(ctx, worker.HeadAdvance{From: w.spec.Head, To: sha}); err != nil {
		return fmt.Errorf("workspace: advance the head to %s: %w", short(sha), err)
	}
	o.Log.Info(fmt.Sprintf("workspace: %s committed %s", p.StepRef, short(sha)), "bundle_bytes", len(body))
	return nil
}

// rewriteRoot replaces the workspace Root with dir in every string of p
// (prompt, system, envelope, launch and exec specs, context), so that the
// engine and the commands see this machine's checkout. Root is unique to
// the run (worker.WorkspaceRoot), so nothing else is touched.
func rewriteRoot(p *worker.Payload, root, dir string) error {
	spec := p.Workspace
	p.Workspace = nil
	defer func() { p.Workspace = spec }()
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	raw = []byte(strings.ReplaceAll(string(raw), q(root), q(dir)))
	var out worker.Payload
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("workspace: rewrite %s: %w", root, err)
	}
	*p = out
	return nil
}

func writeFile(p string, body []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, body, mode)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
