package lambdas_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/secret/secretsmanager"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// coldStarts is how many times each function is started afresh.
const coldStarts = 5

// The three functions of template.yaml, built as `make lambdas` builds
// them, initialise under the emulator with the template's environment
// (resolved against resources made on moto), memory size and timeout,
// serve an invocation, and stay under their memory size. The figures
// (issue: init duration and max memory beside MemorySize) are logged:
// go test -v -run TestFunctions_ ./internal/devstack/lambdas
func TestFunctions_InitUnderTheEmulatorWithinMemorySize(t *testing.T) {
	m := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := m.Config()
	prefix := "lambdas-measure-"
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), prefix); err != nil {
		t.Fatal(err)
	}
	bucket := "lambdas-measure"
	if _, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		t.Fatal(err)
	}
	secretARN, err := secretsmanager.CreateKeySecret(ctx, sm.NewFromConfig(cfg), "lambdas-measure-hmac")
	if err != nil && !strings.Contains(err.Error(), "ResourceExists") {
		t.Fatal(err)
	}
	if secretARN == "" {
		secretARN = "lambdas-measure-hmac"
	}
	q, err := sqs.NewFromConfig(cfg).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("lambdas-measure-dispatch")})
	if err != nil {
		t.Fatal(err)
	}
	// What the deployed stack resolves each variable to, here.
	resolved := map[string]string{
		"STRATUS_TABLE":                         dynamodb.TableName(prefix),
		"STRATUS_BUCKET":                        bucket,
		"STRATUS_ECS_CLUSTER":                   "arn:aws:ecs:us-east-1:123456789012:cluster/lambdas-measure",
		"STRATUS_ECS_TASK_DEFINITION":           "lambdas-measure-runner:1",
		"STRATUS_ECS_NETWORK_TASK_DEFINITION":   "lambdas-measure-network-runner:1",
		"STRATUS_ECS_PUBLISHER_TASK_DEFINITION": "lambdas-measure-publisher:1",
		"STRATUS_ECS_SUBNETS":                   "subnet-1",
		"STRATUS_ECS_SECURITY_GROUPS":           "sg-1",
		"STRATUS_ECS_NETWORK_SUBNETS":           "subnet-1",
		"STRATUS_ECS_NETWORK_SECURITY_GROUPS":   "sg-2",
		"STRATUS_ECS_ASSIGN_PUBLIC_IP":          "DISABLED",
		"STRATUS_API_URL":                       "https://api.example.test",
		"STRATUS_HMAC_SECRET_ID":                secretARN,
		"STRATUS_MAX_UPLOAD_BYTES":              fmt.Sprint(worker.DefaultMaxUploadBytes),
		"STRATUS_DISPATCH_QUEUE_URL":            aws.ToString(q.QueueUrl),
		"STRATUS_POOL_QUEUE_URL":                "", // the pool is off by default
		"STRATUS_POOL_NETWORK_QUEUE_URL":        "",
		"STRATUS_POOL_PICKUP_SECONDS":           "",
		"STRATUS_CLAIM_QUEUE_URL":               aws.ToString(q.QueueUrl),
		"STRATUS_MAX_CONCURRENT_TASKS":          "1",
		"STRATUS_TASK_QUEUE":                    "default",
		"STRATUS_STATE_MACHINE_ROLE_ARN":        "arn:aws:iam::123456789012:role/lambdas-measure-states",
		"STRATUS_STATE_MACHINE_PREFIX":          "lambdas-measure-",
		"STRATUS_HEARTBEAT_SECONDS":             "300",
	}
	tmpl := readTemplate(t)
	specs, err := lambdas.FunctionsFromTemplate(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := lambdas.RoutesFromTemplate(tmpl, "WorkerApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	// One invocation each function serves without a run: the worker
	// API's health check through its HTTP API route, an empty dispatch
	// batch, the hourly sweep, a claim of an empty pool.
	invocations := map[string]func(t *testing.T, fn *lambdas.Function){
		"WorkerApiFunction": func(t *testing.T, fn *lambdas.Function) {
			srv := httptest.NewServer(lambdas.APIFront(routes, fn))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/v1/healthz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET /v1/healthz: %s", resp.Status)
			}
		},
		"DispatchFunction": func(t *testing.T, fn *lambdas.Function) {
			out, err := fn.Invoke(ctx, []byte(`{"Records":[]}`))
			if err != nil || !strings.Contains(string(out), `"batchItemFailures":[]`) {
				t.Fatalf("an empty batch: %s, %v", out, err)
			}
		},
		"ClaimFunction": func(t *testing.T, fn *lambdas.Function) {
			ev := fmt.Sprintf(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{}}`, time.Now().UTC().Format(time.RFC3339))
			if out, err := fn.Invoke(ctx, []byte(ev)); err != nil {
				t.Fatalf("a claim of an empty pool: %s, %v", out, err)
			}
		},
		"EventsFunction": func(t *testing.T, fn *lambdas.Function) {
			ev := fmt.Sprintf(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":{}}`, time.Now().UTC().Format(time.RFC3339))
			if out, err := fn.Invoke(ctx, []byte(ev)); err != nil {
				t.Fatalf("the hourly sweep: %s, %v", out, err)
			}
		},
	}
	for _, spec := range specs {
		t.Run(spec.LogicalID, func(t *testing.T) {
			call := invocations[spec.LogicalID]
			if call == nil {
				t.Fatalf("%s: a function this test does not know: give it an invocation", spec.LogicalID)
			}
			dir := strings.TrimPrefix(spec.CodeURI, "functions/")
			bootstrap := build(t, dir+"/bootstrap", "./"+spec.CodeURI, true)
			env := map[string]string{}
			for k, v := range spec.Env {
				if s, ok := v.(string); ok {
					env[k] = s
					continue
				}
				r, ok := resolved[k]
				if !ok {
					t.Fatalf("%s: no value here for %s = %v: add it to this test", spec.LogicalID, k, v)
				}
				env[k] = r
			}
			var reports []lambdas.Report
			var logs syncBuffer
			logs.b = new(strings.Builder)
			for range coldStarts {
				fn, err := lambdas.Start(ctx, lambdas.Config{Name: spec.LogicalID, Bootstrap: bootstrap, Env: env,
					MemoryMB: spec.MemoryMB, Timeout: spec.Timeout, Region: awstest.Region, AccessKeyID: "test", SecretAccessKey: "test",
					Endpoint: m.URL, RIE: rie(t), LogWriter: &logs})
				if err != nil {
					t.Fatal(err)
				}
				call(t, fn) // cold
				call(t, fn) // warm
				fn.Stop()
				reports = append(reports, fn.Reports()...)
			}
			if t.Failed() {
				t.Logf("the emulator's output:\n%s", logs.String())
			}
			s := lambdas.Summarize(spec.LogicalID, spec.MemoryMB, reports)
			t.Log(s)
			fmt.Printf("LAMBDA_REPORT %s init_ms=%.1f-%.1f median_init_ms=%.1f max_memory_mb=%d memory_size_mb=%d\n", spec.LogicalID,
				float64(s.InitMin)/1e6, float64(s.InitMax)/1e6, float64(s.InitMedian)/1e6, s.MaxMemoryUsedMB, s.MemorySizeMB)
			if s.ColdStarts != coldStarts || s.Invocations != 2*coldStarts {
				t.Errorf("%d cold starts in %d invocations; want %d in %d: %v", s.ColdStarts, s.Invocations, coldStarts, 2*coldStarts, reports)
			}
			if s.MaxMemoryUsedMB <= 0 || s.MaxMemoryUsedMB >= s.MemorySizeMB {
				t.Errorf("max memory %d MB; want it measured and under the memory size %d MB", s.MaxMemoryUsedMB, s.MemorySizeMB)
			}
		})
	}
}
