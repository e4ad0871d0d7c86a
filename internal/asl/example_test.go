package asl_test

import (
	"fmt"

	"github.com/stratusflow/stratus/internal/asl"
)

// Parse names every problem by state and field.
func ExampleParse() {
	_, err := asl.Parse([]byte(`{"StartAt":"fan","States":{
		"fan":{"Type":"Map","Next":"review"},
		"review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken","TimeoutSecondsPath":"$.t"}}}`))
	fmt.Println(err)
	// Output:
	// state "fan": field "Type": "Map" is not supported by the embedded executor; supported: Pass, Task, Choice, Wait, Succeed, Fail
	// state "review": field "TimeoutSecondsPath": not supported; use TimeoutSeconds
	// state "review": field "Next": a Task state needs exactly one of "Next" (a state name) or "End": true
}

// The input and output processing of one state, without running it.
func ExampleState_ApplyResult() {
	sm, _ := asl.Parse([]byte(`{"StartAt":"count","States":{"count":{"Type":"Pass",
		"Parameters":{"review_fix.$":"States.MathAdd($.loops.review_fix, 1)"},"ResultPath":"$.loops","End":true}}}`))
	st := sm.States["count"]
	raw := asl.MustDecode(`{"run_id":"r-1","loops":{"review_fix":1}}`)
	eff, _ := st.EffectiveInput(raw, &asl.Context{})
	out, _ := st.ApplyResult(raw, st.PassResult(eff), &asl.Context{})
	fmt.Println(asl.EncodeString(out))
	// Output:
	// {"run_id":"r-1","loops":{"review_fix":2}}
}
