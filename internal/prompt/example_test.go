package prompt_test

import (
	"fmt"

	"github.com/stratusflow/stratus/internal/prompt"
)

func ExampleRender() {
	tmpl := "Implement {task_id}{?subtask_spec_path}, subtask {subtask_order} of {subtask_count}{/subtask_spec_path}.\n" +
		"Read {planning_path}. Reply as {\"verdict\": \"pass\"}."
	vars := map[string]string{"task_id": "T-17", "planning_path": "ctx/planning.md"}
	fmt.Println(prompt.Render(tmpl, vars, []string{"planning"}))
	// Output:
	// Implement T-17.
	// Read ctx/planning.md. Reply as {"verdict": "pass"}.
}
