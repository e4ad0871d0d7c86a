package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/task"
)

var newHandle = captoken.NewHandle

// ctxDir returns the run's ctx-dir as a sink key prefix (seed 000 § Files
// are the server's job: placement default workspace/tasks/{task_id}/ctx).
func ctxDir(env *RunEnv, run stratus.Run) (string, error) {
	return projection.CtxDir(env.Config.Projection.Placement, run.TaskID)
}

// abs turns a sink key into the absolute path a local engine reads.
func abs(run stratus.Run, key string) string {
	return filepath.Join(run.WorkDir, filepath.FromSlash(key))
}

// outputNodes lists the nodes whose output is exposed as {<node_id>_path}
// (seed 004 § Node outputs: agent and tool nodes).
func outputNodes(f *flow.Flow) []string {
	var ids []string
	for _, n := range f.Nodes {
		if n.Kind == "agent" || n.Kind == "tool" {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// latestSteps returns, per node, the latest completed step of a run, in
// order of completion, excluding the step `except`.
func (s *Service) latestSteps(ctx context.Context, runID, except string) ([]stratus.Step, error) {
	steps, err := s.Store.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	idx := map[string]int{}
	var out []stratus.Step
	for _, st := range steps {
		if st.TID == except || st.Status != stratus.StepCompleted || st.Verdict == "skipped" {
			continue
		}
		if i, ok := idx[st.Node]; ok {
			out = append(out[:i], out[i+1:]...)
			for k, v := range idx {
				if v > i {
					idx[k] = v - 1
				}
			}
		}
		idx[st.Node] = len(out)
		out = append(out, st)
	}
	return out, nil
}

// templateVars builds the role-file variables of one node run (seed 004 §
// Template variables): metadata and artifact paths only, never bodies.
func (s *Service) templateVars(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step) (map[string]string, error) {
	dir, err := ctxDir(env, run)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{
		"task_id":    run.TaskID,
		"stage":      step.Node,
		"repo_path":  run.WorkDir,
		"repo":       filepath.Base(run.WorkDir),
		"task_path":  run.TaskPath,
		"report_dir": abs(run, dir),
	}
	prior, err := s.latestSteps(ctx, run.ID, step.TID)
	if err != nil {
		return nil, err
	}
	for _, st := range prior {
		p := abs(run, path.Join(dir, st.Node+".md"))
		n := env.Flow.Node(st.Node)
		if n == nil {
			continue
		}
		switch n.Kind {
		case "agent", "tool":
			vars[st.Node+"_path"] = p
		case "evaluator":
			vars["review_path"] = p
		}
		if n.OutputArtifact == "plan" {
			vars["plan_path"] = p
			if hasPart(st, "plan.md") {
				vars["plan_path"] = abs(run, path.Join(dir, "plan.md"))
			}
		}
	}
	return vars, nil
}

func hasPart(st stratus.Step, name string) bool {
	v, err := decodeStepValue(st.Value)
	if err != nil {
		return false
	}
	for _, p := range v.Parts {
		if p == name {
			return true
		}
	}
	return false
}

// readRoleFile reads a role file contained in the flows directory (seed 004
// § Fatal validation: role_file paths contain no traversal) and splits off
// its optional front matter.
func readRoleFile(flowDir, rel string) (prompt.RoleMeta, string, error) {
	raw, err := readRoleFileRaw(flowDir, rel)
	if err != nil {
		return prompt.RoleMeta{}, "", err
	}
	meta, body, err := prompt.SplitRoleFile(raw)
	if err != nil {
		return meta, "", fmt.Errorf("role file %s: %w", rel, err)
	}
	return meta, body, nil
}

func readRoleFileRaw(flowDir, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) || strings.Contains(rel, "..") || strings.Contains(rel, "\\") {
		return "", stratus.FieldErrorf(stratus.EINVALID, "role_file", "%q must be a relative path inside %s without ..", rel, flowDir)
	}
	b, err := os.ReadFile(filepath.Join(flowDir, filepath.FromSlash(rel)))
	if errors.Is(err, os.ErrNotExist) {
		return "", stratus.FieldErrorf(stratus.ENOTFOUND, "role_file", "role file %s does not exist", filepath.Join(flowDir, rel))
	} else if err != nil {
		return "", fmt.Errorf("read role file: %w", err)
	}
	return string(b), nil
}

// skipNode evaluates a node's `when` fact (worc flow format: the facts are
// derived.needs_refinement and config.external_research).
func skipNode(n *flow.Node, env *RunEnv) (bool, string) {
	if !NodeEnabled(env.Task, n.ID) {
		return true, "disabled by the task (nodes." + n.ID + ".enabled: false)"
	}
	if n.When == nil || n.When.Fact == "" {
		return false, ""
	}
	var v bool
	switch n.When.Fact {
	case "derived.needs_refinement":
		// A complete task (description + acceptance criteria) needs no refinement.
		body := strings.ToLower(env.Task.Body)
		v = !(strings.Contains(body, "acceptance criteria") && strings.Contains(body, "description"))
	case "config.external_research":
		v = false
	}
	want := true
	if b, ok := n.When.Equals.(bool); ok {
		want = b
	}
	if v != want {
		return true, fmt.Sprintf("when %s is %v", n.When.Fact, v)
	}
	return false, ""
}

// NodeEnabled reports whether the task leaves node id enabled (worc task
// format: nodes.<id>.enabled: false disables a node for this task).
func NodeEnabled(t *task.Task, id string) bool {
	nodes, _ := t.Front["nodes"].(map[string]any)
	o, _ := nodes[id].(map[string]any)
	if e, ok := o["enabled"].(bool); ok {
		return e
	}
	return true
}

var secretLike = regexp.MustCompile(`(?i)\b(sk-[a-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|xox[baprs]-[A-Za-z0-9-]{10,})`)

// redact masks token-shaped secrets in audit copies (seed 004 § Safety:
// rendered prompts are written redacted).
func redact(s string) string { return secretLike.ReplaceAllString(s, "[REDACTED]") }
