// Command workerapi is the worker API Lambda: API Gateway HTTP API events
// (payload format 2.0) served by internal/httpapi, the same handler the
// embedded server runs (DESIGN.md § Layout; docs/contracts.md § Routes). Its
// configuration is the environment template.yaml gives it
// (internal/awsapp).
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
)

func main() {
	app, err := awsapp.Load(context.Background(), os.Getenv, awsapp.Options{Component: "workerapi", Commits: bundlecheck.Checker{}})
	if err != nil {
		logging.JSON(os.Stderr, "workerapi").Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(handler.HTTPAPI(app.HTTPHandler(), app.Drain))
}
