package compiler

import (
	"testing"

	"github.com/stratusflow/stratus/internal/asl"
)

// Every compiled flow loads in the embedded executor's parser, which
// rejects what Step Functions rejects (unreachable states included): a
// terminal no state routes to must not be emitted.
func TestCompile_OutputLoadsInTheExecutor(t *testing.T) { // docs/architecture.md § The compiled state machines
	t.Parallel()
	flows := corpus(t)
	flows["agents only"] = parse(t, `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - { id: answer, kind: agent, role_file: tiny/answer.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: answer, to: publish }
`)
	for name, f := range flows {
		if _, err := asl.Parse(compile(t, f, Options{})); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
