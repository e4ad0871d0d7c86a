// Command events is the events Lambda: the stack's state machines'
// "Step Functions Execution Status Change" events record a run's terminal
// and write its summary when no `stratus run --target aws` follows it to
// the end, failing any step still waiting for a human
// (awsapp.App.ExecutionEnded); an hourly schedule sweeps expired
// capability handles (awsapp.App.Sweep). See functions/handler.Events.
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
	app, err := awsapp.LoadEvents(context.Background(), os.Getenv, awsapp.Options{Component: "events"})
	if err != nil {
		logging.JSON(os.Stderr, "events").Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(handler.Events(app.ExecutionEnded, app.Sweep))
}
