// Command events is the events Lambda: the stack's state machines'
// "Step Functions Execution Status Change" events record a run's terminal
// and write its summary when no `stratus run --target aws` follows it to
// the end, failing any step still waiting for a human
// (awsapp.App.ExecutionEnded); an hourly schedule sweeps expired
// capability handles (awsapp.App.Sweep). See functions/handler.Events.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
)

func main() {
	app, err := awsapp.LoadEvents(context.Background(), os.Getenv, awsapp.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "stratus events: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(handler.Events(app.ExecutionEnded, app.Sweep))
}
