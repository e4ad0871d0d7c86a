package projection_test

import (
	"fmt"
	"time"

	"github.com/stratusflow/stratus/internal/projection"
)

func ExampleEncode() {
	body := []byte("# Plan\n\n1. do it\n")
	fm := projection.FrontMatter{
		TaskID: "T-17", Step: "planning", StepRef: "planning#1", Attempt: 1, Agent: "planner",
		SubmittedAt: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	}
	fm.SHA256, fm.Bytes = projection.Checksum(body)
	doc, _ := projection.Encode(fm, body)
	fmt.Print(string(doc))
	// Output:
	// ---
	// task_id: T-17
	// step: planning
	// step_ref: "planning#1"
	// attempt: 1
	// agent: planner
	// format: ""
	// sha256: 722822fb32bfa884963781e399142280a022dbd619d87b256dc2097a3e7c205c
	// bytes: 17
	// submitted_at: 2025-03-04T05:06:07Z
	// ---
	// # Plan
	//
	// 1. do it
}
