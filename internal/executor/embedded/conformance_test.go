package embedded_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/executor/executortest"
)

// The embedded executor passes the suite every executor.Executor must.
func TestConformance(t *testing.T) {
	executortest.Run(t, func(t *testing.T) executortest.Harness {
		messages := make(chan json.RawMessage, 16)
		e := embedded.New(embedded.Options{Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, c embedded.TaskCall) (json.RawMessage, error) {
				var p struct {
					QueueURL    string `json:"QueueUrl"`
					MessageBody json.RawMessage
				}
				if err := json.Unmarshal(c.Parameters, &p); err != nil {
					return nil, err
				}
				if strings.HasSuffix(p.QueueURL, executortest.MissingQueueSuffix) {
					// What Step Functions' SQS integration reports.
					return nil, embedded.TaskError{Name: "SQS.SdkClientException", Cause: "The specified queue does not exist."}
				}
				messages <- p.MessageBody
				return json.RawMessage(`{"MessageId":"m"}`), nil
			},
		}})
		return executortest.Harness{
			Executor:     e,
			StateMachine: "arn:aws:states:local:000000000000:stateMachine:conformance",
			QueueURL:     "https://sqs.local/000000000000/dispatch",
			NextMessage: func(ctx context.Context) (json.RawMessage, error) {
				select {
				case m := <-messages:
					return m, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		}
	})
}
