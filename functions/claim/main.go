// Command claim is the claim Lambda: each wake — a message of the claim
// queue (a run ended, or `stratus submit` queued a task), a task file
// written under the bucket's tasks/pending/ prefix (EventBridge), or the
// schedule — runs one claim of the stack's task pool (awsapp.App.Claim):
// eligible tasks are taken with a conditional write in DynamoDB and their
// executions started, at most MaxConcurrentTasks at a time.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/logging"
)

func main() {
	app, err := awsapp.LoadClaim(context.Background(), os.Getenv, awsapp.Options{Component: "claim"})
	if err != nil {
		logging.JSON(os.Stderr, "claim").Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(handler.Claim(app.Claim))
}
