package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
)

// A callback Task: the handler stands in for SQS and hands the task token
// to a worker, which completes the task with SendTaskSuccess.
func Example() {
	tokens := make(chan string, 1)
	exec := embedded.New(embedded.Options{
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
				tokens <- call.Token
				return json.RawMessage(`{"MessageId":"1"}`), nil
			},
		},
		Substitutions: map[string]string{"QueueUrl": "https://sqs.local/q"},
	})
	def := `{"StartAt":"review","States":{
		"review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
			"Parameters":{"QueueUrl":"${QueueUrl}","MessageBody":{"run_id.$":"$.run_id","task_token.$":"$$.Task.Token"}},
			"ResultPath":"$.last","TimeoutSeconds":900,"Next":"done"},
		"done":{"Type":"Succeed"}}}`
	ctx := context.Background()
	x, err := exec.StartExecution(ctx, executor.StartInput{StateMachine: "review", Definition: []byte(def), Name: "run-1", Input: json.RawMessage(`{"run_id":"r-1"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := exec.SendTaskSuccess(ctx, <-tokens, json.RawMessage(`{"outcome":"accept"}`)); err != nil {
		fmt.Println(err)
		return
	}
	done, _ := exec.WaitExecution(ctx, x.ARN)
	fmt.Println(done.ARN)
	fmt.Println(done.Status, string(done.Output))
	// Output:
	// arn:aws:states:local:000000000000:execution:review:run-1
	// SUCCEEDED {"run_id":"r-1","last":{"outcome":"accept"}}
}
