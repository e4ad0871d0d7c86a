package fold_test

import (
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/fold"
)

func ExampleValue() {
	for _, body := range []string{"```json\n{\"lanes\": [1, 2]}\n```", "42", "The plan is ready."} {
		v, _ := fold.Value("planner", []byte(body), "", fold.RoleBody)
		fmt.Println(string(v))
	}
	// Output:
	// {"lanes":[1,2]}
	// "42"
	// "The plan is ready."
}

func ExampleFold() {
	tail := []stratus.OutputEvent{
		{Kind: stratus.OutputArtifact, Name: "plan.md", Body: []byte("# Plan\n")},
		{Kind: stratus.OutputArtifact, Name: "plan-meta.json", Body: []byte(`{"lanes": ["api", "ui"]}`)},
		{Kind: stratus.OutputFinal, Body: []byte("planned")},
	}
	v, _ := fold.Fold("planner", tail, "")
	fmt.Println(string(v))
	// Output:
	// {"out":"planned","parts":{"plan.md":"# Plan\n","plan-meta.json":{"lanes":["api","ui"]}}}
}
