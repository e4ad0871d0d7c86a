// Package awsapp builds the AWS side of Stratus from its environment: the
// worker.Service the Lambda functions run (functions/workerapi,
// functions/dispatch) on the DynamoDB store (internal/store/dynamodb), the
// S3 sink (internal/sink/s3), Step Functions task tokens
// (internal/executor/sfn), the ECS launcher (internal/launch/ecs), the HMAC
// key from Secrets Manager (internal/secret/secretsmanager) and each run's
// environment from its frozen bundle (internal/runenv) —
// docs/architecture.md § Layout, § The path of one step.
//
// It owns the environment variables template.yaml sets (Env*, FromEnv),
// the order of construction (configuration checked before any AWS call),
// and the dispatch-message policy (HandleMessage): which failures the
// queue redelivers (infrastructure) and which fail the Task state at once.
//
// It does not import aws-lambda-go: the Lambda event mapping lives under
// functions/ (functions/handler). It does not create AWS resources
// (template.yaml does; tests make them on moto) and does not start
// executions (`stratus run --target aws`).
package awsapp
