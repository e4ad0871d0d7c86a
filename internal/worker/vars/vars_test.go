package vars_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A question gate's answer is a prompt variable of the nodes after it
// (docs/prompt-variables.md § Node outputs): {<hitl node>_path} is the
// file Human wrote the reply to, and empty until the gate was answered.
func TestTemplateVars_HITLAnswerIsAPathForLaterNodes(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: ask, kind: hitl, signal: question, question: "Which database?" }
    - { id: build, kind: agent, role_file: f/build.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: ask, to: build }
    - { from: build, to: publish }
`, Roles: map[string]string{"f/build.md": "{?ask_path}The human answered in {ask_path}.{/ask_path}Build it."}})
	if v := r.Vars(t, "build"); v["ask_path"] != "" {
		t.Errorf("{ask_path} = %q before the gate was answered, want empty", v["ask_path"])
	}
	r.Dispatch(t, "ask") // the gate waits
	if _, err := r.Svc.Human(context.Background(), r.Run.ID, "ask", core.Reply{Decision: core.DecisionAnswer, Text: "Postgres 16."}); err != nil {
		t.Fatal(err)
	}
	r.Dispatch(t, "build")
	want := "The human answered in " + r.Ctx("ask.md") + ".Build it."
	if got := r.LastPrompt(t); got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
	if !strings.Contains(workertest.Read(t, r.Ctx("ask.md")), "Postgres 16.") {
		t.Error("ask.md lacks the answer")
	}
}
