// Command dispatch is the dispatch Lambda: each message of the dispatch queue
// (a compiled Task state's {run_id, node, kind, task_token}, or a "<node>.stop"
// state's stop) runs through worker.Service.Dispatch, which creates the step
// and attempt and starts the worker with ecs:RunTask (docs/architecture.md §
// The path of one step, 2-4). Messages that failed for an infrastructure reason
// are reported back for redelivery (ReportBatchItemFailures); see
// awsapp.HandleMessage.
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
	app, err := awsapp.Load(context.Background(), os.Getenv, awsapp.Options{Component: "dispatch"})
	if err != nil {
		logging.JSON(os.Stderr, "dispatch").Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(handler.SQS(app.HandleMessage, app.Logger, app.Drain))
}
