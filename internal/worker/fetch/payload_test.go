package fetch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/fetch"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/architecture.md § Workspaces: the payload of a run whose repository
// travels names no path of the operator's: everything is under the
// workspace's Root; a workspace-write agent is told to commit and where to
// upload its bundle, an evaluator is not; the bundles and ctx files are
// addressed through this API (an fs sink does not presign).
func TestFetchPrompt_WorkspacePayloadNamesOnlyTheRoot(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true, Roles: map[string]string{"f/impl.md": "Work in {repo_path} on {task_path}; ctx {plan_path}.\n"}})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	p, err := fetch.Invoke(ctx, r.Svc.Service, "Bearer "+sp.Handle, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), r.Dir) {
		t.Errorf("the payload carries the operator's work dir %s:\n%s", r.Dir, raw)
	}
	ws := p.Workspace
	if ws == nil || ws.Root != core.WorkspaceRoot("r1") || ws.Head != r.Base || !ws.Write || ws.Upload == nil || len(ws.Bundles) != 1 {
		t.Fatalf("workspace = %+v", ws)
	}
	if !strings.HasPrefix(p.Engine.Dir, ws.Root) || !strings.Contains(p.Prompt, "Work in "+ws.Root+" on "+ws.Root+"/.stratus/task/task.md") {
		t.Errorf("engine dir %q, prompt %q: want both under the root", p.Engine.Dir, p.Prompt)
	}
	if !strings.HasPrefix(ws.Bundles[0].URL, "/v1/worker/workspace/blob?key=") || !strings.HasPrefix(ws.Upload.URL, "/v1/worker/workspace/blob?key=") {
		t.Errorf("blob URLs %q, %q: want the API's route", ws.Bundles[0].URL, ws.Upload.URL)
	}
	var task bool
	for _, f := range ws.Files {
		task = task || (f.Path == ".stratus/task/task.md" && strings.Contains(string(f.Body), "id: t1"))
	}
	if !task {
		t.Errorf("the task file is not among the payload's files: %+v", ws.Files)
	}
}

// docs/contracts.md § The request line: the envelope tells the engine what it
// must return: kind follows the node (agent, evaluator), an evaluator's
// request carries the findings schema (advisory: the worker's parse fails
// closed), a provider's own kind (openseek's) wins.
func TestFetchPrompt_KindAndSchemaFollowTheNode(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow})
	for i, node := range []string{"impl", "rev"} {
		r.Dispatch(t, node)
		sp := r.Launcher.Launched()[i]
		p, err := fetch.Invoke(ctx, r.Svc.Service, "Bearer "+sp.Handle, sp.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		json.Unmarshal(p.Engine.Input, &in)
		switch node {
		case "impl":
			if p.Engine.Kind != "agent" || len(p.Engine.Schema) != 0 {
				t.Errorf("agent node: kind %q schema %s; want agent and none", p.Engine.Kind, p.Engine.Schema)
			}
		case "rev":
			if p.Engine.Kind != "evaluator" || string(p.Engine.Schema) != findings.JSONSchema || !p.Engine.SchemaAdvisory {
				t.Errorf("evaluator node: kind %q schema %s advisory %v; want evaluator and the findings schema", p.Engine.Kind, p.Engine.Schema, p.Engine.SchemaAdvisory)
			}
		}
		if node == "impl" {
			if _, err := r.Submit(t, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
