package lambdas_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

// How `stratus dev aws` puts the worker API function behind its HTTP API
// and the dispatch function behind its queue: each from template.yaml,
// its bootstrap from `make lambdas`, under the emulator from `make rie`,
// with the environment the deployed stack resolved (env).
func Example() {
	ctx := context.Background()
	tmpl, _ := os.ReadFile("template.yaml")
	specs, _ := lambdas.FunctionsFromTemplate(tmpl)
	env := map[string]map[string]string{} // logical id -> resolved Environment.Variables
	fns := map[string]*lambdas.Function{}
	for _, s := range specs {
		fn, err := lambdas.Start(ctx, lambdas.Config{
			Name: s.LogicalID, Bootstrap: "bin/lambdas/" + s.CodeURI[len("functions/"):] + "/bootstrap",
			Env: env[s.LogicalID], MemoryMB: s.MemoryMB, Timeout: s.Timeout,
			Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", Endpoint: "http://127.0.0.1:5000",
			RIE: "bin/aws-lambda-rie", LogWriter: os.Stderr,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer fn.Stop()
		fns[s.LogicalID] = fn
	}
	routes, _ := lambdas.RoutesFromTemplate(tmpl, "WorkerApiFunction")
	go http.ListenAndServe("127.0.0.1:8080", lambdas.APIFront(routes, fns["WorkerApiFunction"]))

	m, _ := lambdas.SQSMappingFromTemplate(tmpl, "DispatchFunction")
	var client *sqs.Client                       // on the stand-in
	queueURL := "the URL of " + m.QueueLogicalID // from the deployed stack
	go lambdas.RunSQSSource(ctx, client, queueURL, fns["DispatchFunction"], m, lambdas.SQSOptions{Wait: time.Second})

	// … and at the end, the figures:
	for _, s := range specs {
		fmt.Println(lambdas.Summarize(s.LogicalID, s.MemoryMB, fns[s.LogicalID].Reports()))
	}
}
