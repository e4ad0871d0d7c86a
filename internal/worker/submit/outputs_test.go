package submit_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// slotFlow has one agent per output slot, and one with output_file.
func slotFlow(policy string) string {
	return `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: ` + policy + `
  publishing: none
  nodes:
    - { id: refinement, kind: agent, role_file: r/a.md, output_artifact: enriched_spec }
    - { id: planning, kind: agent, role_file: r/a.md, output_artifact: plan }
    - { id: wrap, kind: agent, role_file: r/a.md, output_artifact: summary }
    - { id: audit, kind: agent, role_file: r/a.md, output_artifact: report }
    - { id: draft, kind: agent, role_file: r/a.md, output_file: draft.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: refinement, to: planning }
    - { from: planning, to: wrap }
    - { from: wrap, to: audit }
    - { from: audit, to: draft }
    - { from: draft, to: publish }
`
}

// worc flow-authoring.md § Where a node's output goes: output_artifact lands
// the node's content — the contract's content field, or the whole body when
// it is not a JSON object with one — in the slot's file.
func TestOutputSlots_ContentLandsInTheSlotFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy, node, body, file, want string
	}{
		{"code_change", "refinement", `{"content": "# Enriched\n", "human_input": null}`, "workspace/tasks/t1/ctx/task.enriched.md", "# Enriched\n"},
		{"code_change", "planning", "```json\n{\"content\": \"1. do it\", \"decompose\": false, \"subtasks\": []}\n```", "workspace/tasks/t1/ctx/plan.md", "1. do it"},
		{"code_change", "planning", "Plain prose plan.", "workspace/tasks/t1/ctx/plan.md", "Plain prose plan."},
		{"code_change", "planning", `{"plan": "no content field"}`, "workspace/tasks/t1/ctx/plan.md", `{"plan": "no content field"}`},
		{"code_change", "wrap", `{"content": "Summary."}`, "workspace/tasks/t1/ctx/summary.md", "Summary."},
		{"code_change", "audit", `{"content": "Report."}`, "workspace/tasks/t1/ctx/report.md", "Report."},
		{"repository_document", "audit", `{"content": "Report."}`, "docs/research/t1/report.md", "Report."},
		{"private_control_workspace_report", "audit", `{"content": "Secret report."}`, ".stratus/security-reports/t1/report.md", "Secret report."},
	} {
		r := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow(tc.policy)})
		r.Visit(t, tc.node, tc.body)
		if got := workertest.Read(t, filepath.Join(r.Dir, filepath.FromSlash(tc.file))); got != tc.want {
			t.Errorf("%s %s: %s = %q, want %q", tc.policy, tc.node, tc.file, got, tc.want)
		}
	}
}

// worc flow-authoring.md § Where a node's output goes: a node that stages a
// part named after its slot file keeps it; the closing message does not
// overwrite it, and {plan_path} points at it.
func TestOutputSlots_StagedSlotPartWins(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow("code_change")})
	r.Dispatch(t, "planning")
	specs := r.Launcher.Launched()
	sp := specs[len(specs)-1]
	if err := r.Svc.Artifact(t.Context(), "Bearer "+sp.Handle, "plan.md", []byte("the real plan")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(t, "A one-paragraph summary."); err != nil {
		t.Fatal(err)
	}
	if got := workertest.Read(t, r.Ctx("plan.md")); got != "the real plan" {
		t.Errorf("plan.md = %q, want the staged part", got)
	}
	if got := r.Vars(t, "wrap")["plan_path"]; got != r.Ctx("plan.md") {
		t.Errorf("{plan_path} = %q", got)
	}
}

// docs/prompt-variables.md § Node outputs: with output_file, {<node>_path}
// carries a redacted copy of the file the node wrote
// (<ctx>/<node>.out/<file>), not its closing message; a file the node did not
// write falls back to the closing message with a warning.
func TestOutputFile_RedactedCopyIsTheChannel(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow("code_change")})
	workertest.Write(t, filepath.Join(r.Dir, "draft.md"), "Draft with AKIAABCDEFGHIJKLMNOP inside.\n")
	sv := r.Visit(t, "draft", "I wrote draft.md.")
	if sv.Output != "draft.out/draft.md" {
		t.Errorf("StepValue.Output = %q", sv.Output)
	}
	got := r.Vars(t, "publish")["draft_path"]
	if got != r.Ctx("draft.out/draft.md") {
		t.Fatalf("{draft_path} = %q", got)
	}
	if body := workertest.Read(t, got); body != "Draft with [REDACTED] inside.\n" {
		t.Errorf("copy = %q, want the redacted file", body)
	}

	r2 := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow("repository_document")})
	if sv := r2.Visit(t, "draft", "I forgot to write it."); sv.Output != "" {
		t.Errorf("missing file: StepValue.Output = %q, want empty", sv.Output)
	}
	if got := r2.Vars(t, "publish")["draft_path"]; got != r2.Ctx("draft.md") {
		t.Errorf("missing file: {draft_path} = %q, want the closing message", got)
	}
	if !r2.Warned("output_file") {
		t.Errorf("no warning for a missing output_file: %q", r2.Warnings.Messages())
	}
}

// worc reference.md § agent node: output_file is resolved inside the
// policy's report dir; a symbolic link out of it is not followed.
func TestOutputFile_LinkOutOfTheReportDirRefused(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: slotFlow("repository_document")})
	workertest.Write(t, filepath.Join(r.Dir, "secret.txt"), "top secret")
	if err := os.MkdirAll(filepath.Join(r.Dir, "docs", "research", "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(r.Dir, "secret.txt"), filepath.Join(r.Dir, "docs", "research", "t1", "draft.md")); err != nil {
		t.Skip(err)
	}
	if sv := r.Visit(t, "draft", "done"); sv.Output != "" || !r.Warned("outside") {
		t.Errorf("a link out of the report dir was copied: output %q, warnings %q", sv.Output, r.Warnings.Messages())
	}
}

// worc flow-authoring.md § What a node returns (the planning contract), worc
// reference.md § decomposition: the proposer's split happens only with the
// gate open (config agents.decomposition.enabled, the task's decomposition
// winning) and at least 2 subtasks; it writes <ctx>/subtasks/<NN>.md and
// reports the count as StepValue.Subtasks ($.last.subtasks).
func TestPlanningContract_DecompositionGateAndCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, front, body string
		config            func(*config.Config)
		want              int
		warn              string
	}{
		{"gate open, two subtasks", "", workertest.TwoSubtasks, workertest.EnableDecomposition, 2, ""},
		{"task front matter opens the gate", "decomposition: true\n", workertest.TwoSubtasks, nil, 2, ""},
		{"task front matter closes the gate", "decomposition: false\n", workertest.TwoSubtasks, workertest.EnableDecomposition, 0, "decomposition is off"},
		{"gate closed by default", "", workertest.TwoSubtasks, nil, 0, "decomposition is off"},
		{"one subtask is no split", "", `{"content": "p", "decompose": true, "subtasks": [{"title": "all", "spec": "everything"}]}`, workertest.EnableDecomposition, 0, "at least 2"},
		{"decompose false", "", `{"content": "p", "decompose": false, "subtasks": []}`, workertest.EnableDecomposition, 0, ""},
		{"prose plan", "", "Just a plan.", workertest.EnableDecomposition, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.DecompositionFlow, Config: tc.config,
				Task: "---\nid: t1\ntitle: T\n" + tc.front + "---\n## Description\nx\n## Acceptance criteria\n- y\n"})
			sv := r.Visit(t, "planning", tc.body)
			if sv.Subtasks != tc.want {
				t.Errorf("StepValue.Subtasks = %d, want %d", sv.Subtasks, tc.want)
			}
			var raw map[string]any
			json.Unmarshal(r.Tokens.Success("tok-1"), &raw)
			if got, _ := raw["subtasks"].(float64); int(got) != tc.want {
				t.Errorf("$.last.subtasks = %v, want %d", raw["subtasks"], tc.want)
			}
			_, err := os.Stat(r.Ctx("subtasks/01.md"))
			if (err == nil) != (tc.want > 0) {
				t.Errorf("subtasks/01.md exists = %v, want %v", err == nil, tc.want > 0)
			}
			if tc.warn != "" && !r.Warned(tc.warn) {
				t.Errorf("no warning %q: %q", tc.warn, r.Warnings.Messages())
			}
			if got := workertest.Read(t, r.Ctx("plan.md")); tc.body != "Just a plan." && got != "p" && got != "The plan." {
				t.Errorf("plan.md = %q, want the content field", got)
			}
		})
	}
}

// worc flow-authoring.md § What a node returns: the core re-validates a typed
// result; a malformed split is refused (422 naming the field) with nothing
// recorded, so the attempt may submit again.
func TestPlanningContract_MalformedSplitRefused(t *testing.T) {
	t.Parallel()
	for body, field := range map[string]string{
		`{"content": "p", "decompose": "yes"}`:                                             "decompose",
		`{"content": "p", "decompose": true, "subtasks": "two"}`:                           "subtasks",
		`{"content": "p", "decompose": true, "subtasks": [{"title": "a"}, {"spec": "b"}]}`: "subtasks[0].spec",
		`{"content": "p", "decompose": true, "subtasks": [1, 2]}`:                          "subtasks[0]",
	} {
		r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.DecompositionFlow, Config: workertest.EnableDecomposition})
		r.Dispatch(t, "planning")
		_, err := r.Submit(t, body)
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(stratus.ErrorMessage(err)+fieldOf(err), field) {
			t.Errorf("%s: err = %v, want EUNPROCESSABLE naming %s", body, err, field)
			continue
		}
		if _, err := r.Submit(t, workertest.TwoSubtasks); err != nil {
			t.Errorf("%s: resubmit after the refusal: %v", body, err)
		}
	}
}

func fieldOf(err error) string {
	if e, ok := err.(*stratus.Error); ok {
		return e.Field
	}
	return ""
}
