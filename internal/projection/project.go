package projection

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
)

// DefaultPlacement is the ctx-dir placement when a flow declares none
// (docs/contracts.md § Files are the server's job). "{task_id}" is the only
// placeholder.
const DefaultPlacement = "workspace/tasks/{task_id}/ctx"

// StatePlacement is where an embedded run whose repository travels keeps
// its ctx dir: in the state dir, which no snapshot or commit holds, so the
// operator's repository never sees a run's ctx files (README §
// Workspaces). config.yaml's projection.placement cannot name it.
const StatePlacement = ".stratus/ctx/{task_id}"

// InState reports whether placement puts the ctx dir in the state dir,
// whose files are the owner's alone (docs/security.md § Files under
// .stratus).
func InState(placement string) bool { return strings.HasPrefix(placement, ".stratus/") }

// RunPlacement is the placement run's ctx dir resolves from:
// StatePlacement for a run that keeps it in the state dir
// (Workspace.StateCtx), else placement (config.yaml's).
func RunPlacement(placement string, run stratus.Run) string {
	if run.Workspace != nil && run.Workspace.StateCtx {
		return StatePlacement
	}
	return placement
}

// RunCtxDir is run's ctx dir as a sink key prefix: CtxDir of
// RunPlacement. Every reader of a run's ctx files resolves it here.
func RunCtxDir(placement string, run stratus.Run) (string, error) {
	return CtxDir(RunPlacement(placement, run), run.TaskID)
}

// CtxDir resolves placement (DefaultPlacement when "") for taskID into a
// slash-separated relative sink key prefix, e.g. "workspace/tasks/T-17/ctx".
// Every "{task_id}" is replaced once (the id is never expanded again); a
// trailing "/" is dropped. Errors: *stratus.Error EINVALID with Field
// "task_id" when taskID is not a plain file name (empty, ".", "..", "/",
// "\", "..", control characters: it would escape its directory), or Field
// "placement" when the result is not a valid relative key (sink.CheckKey).
func CtxDir(placement, taskID string) (string, error) {
	if placement == "" {
		placement = DefaultPlacement
	}
	if err := checkName("task_id", "task id", taskID); err != nil {
		return "", err
	}
	dir := strings.TrimSuffix(strings.ReplaceAll(placement, "{task_id}", taskID), "/")
	if err := sink.CheckKey(dir); err != nil {
		return "", stratus.FieldErrorf(stratus.EINVALID, "placement",
			"placement %q for task %q resolves to %q, not a relative path inside the root (%s)",
			placement, taskID, dir, stratus.ErrorMessage(err))
	}
	return dir, nil
}

// Part is one staged part: its name (a plain file name, CheckPartName)
// and its submitted bytes.
type Part struct {
	Name string
	Body []byte
}

// Project writes one submitted attempt to s under ctxDir (a key prefix,
// usually from CtxDir):
//
//   - <ctxDir>/<step>.md: Encode(fm, body), with fm.SHA256 and fm.Bytes
//     set from body (the caller's values are overwritten);
//   - <ctxDir>/<name> for each part: its bytes, raw and verbatim. A name
//     staged twice is written once, with the last body.
//
// A part is skipped fail-open — not written, not an error, the rest goes
// on — when SkippedParts reports it (a name breaking CheckPartName, or
// "<step>.md", the body's own file); call SkippedParts to log them.
// written lists the keys written, in order, the body's first.
//
// Errors (fatal: nothing further is written): EINVALID with Field "step"
// when step is not a plain file name, Field "ctx_dir" when ctxDir is not a
// valid key; Encode's error; the sink's error; ctx's error.
func Project(ctx context.Context, s sink.Sink, ctxDir, step string, fm FrontMatter, body []byte, parts []Part) (written []string, err error) {
	if err := checkName("step", "step", step); err != nil {
		return nil, err
	}
	if err := sink.CheckKey(ctxDir); err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "ctx_dir",
			"ctx dir %q is not a relative path inside the root (%s)", ctxDir, stratus.ErrorMessage(err))
	}
	bodyName := step + ".md"
	if err := checkName("step", "step file", bodyName); err != nil {
		return nil, err
	}

	fm.SHA256, fm.Bytes = Checksum(body)
	doc, err := Encode(fm, body)
	if err != nil {
		return nil, err
	}
	key := path.Join(ctxDir, bodyName)
	if err := put(ctx, s, key, doc); err != nil {
		return nil, err
	}
	written = append(written, key)

	for _, p := range lastWins(parts) {
		if skip(step, p.Name) != nil {
			continue
		}
		key := path.Join(ctxDir, p.Name)
		if err := put(ctx, s, key, p.Body); err != nil {
			return written, err
		}
		written = append(written, key)
	}
	return written, nil
}

// SkippedParts returns, in order, one error per part Project(…, step, …,
// parts) would skip fail-open: *stratus.Error EINVALID (Field "name") from
// CheckPartName, or ECONFLICT (Field "name") for a part named "<step>.md",
// which would overwrite the body's wrapped file. Nil when none is skipped.
func SkippedParts(step string, parts []Part) []error {
	var out []error
	for _, p := range lastWins(parts) {
		if err := skip(step, p.Name); err != nil {
			out = append(out, err)
		}
	}
	return out
}

func skip(step, name string) error {
	if err := CheckPartName(name); err != nil {
		return err
	}
	if name == step+".md" {
		return stratus.FieldErrorf(stratus.ECONFLICT, "name",
			"part name %q is the file of step %q's own body; want another name", name, step)
	}
	return nil
}

func put(ctx context.Context, s sink.Sink, key string, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.Put(ctx, key, b); err != nil {
		return fmt.Errorf("projection: write %q: %w", key, err)
	}
	return nil
}

// lastWins collapses parts staged under one name into its last body, kept
// at the position of its first staging (the fold's order).
func lastWins(parts []Part) []Part {
	out := make([]Part, 0, len(parts))
	at := make(map[string]int, len(parts))
	for _, p := range parts {
		if i, ok := at[p.Name]; ok {
			out[i].Body = p.Body
			continue
		}
		at[p.Name] = len(out)
		out = append(out, p)
	}
	return out
}
