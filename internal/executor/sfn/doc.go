// Package sfn is the AWS implementation of executor.Executor: executions
// and task-token callbacks on AWS Step Functions through the SDK
// (github.com/aws/aws-sdk-go-v2/service/sfn), the counterpart of
// internal/executor/embedded (../../../shared/DESIGN.md § The path of one
// step, steps 1, 4 and 5).
//
// It owns: mapping the executor port onto StartExecution,
// DescribeExecution, StopExecution and SendTaskSuccess / SendTaskFailure /
// SendTaskHeartbeat; polling for WaitExecution; optionally deploying the
// definition a caller starts (Options.RoleARN: CreateStateMachine, or
// UpdateStateMachine when the deployed definition differs), with
// DefinitionSubstitutions applied first (CloudFormation applies them on a
// deployed stack; the API does not); naming unnamed executions; and the
// error mapping below.
//
// Error mapping. Every Step Functions error comes back as a
// *stratus.Error whose message starts with the AWS error name:
//
//	TaskTimedOut            → ECONFLICT  final: the task expired, was completed, or its execution closed
//	InvalidToken            → EINVALID   final: not a token Step Functions issued
//	TaskDoesNotExist        → ENOTFOUND  final: a well-formed token never issued
//	InvalidOutput           → EINVALID   final
//	ExecutionAlreadyExists  → ECONFLICT
//	ExecutionDoesNotExist   → ENOTFOUND
//	StateMachineDoesNotExist→ ENOTFOUND
//	InvalidArn, InvalidName, InvalidDefinition, InvalidExecutionInput → EINVALID
//	throttling (ThrottlingException, ...) after the SDK's retries → EINTERNAL (retryable)
//	anything else, and transport errors → EINTERNAL
//
// A callback error that is final is never retried: the client NewClient
// builds tells the SDK retryer so (even were AWS to answer one with a 5xx),
// and a caller retries only EINTERNAL. Throttling and 5xx answers are
// retried by the SDK's standard retryer (exponential backoff with jitter),
// never by a loop here.
//
// What it deliberately does not do: read execution history (the parity
// test reads GetExecutionHistory itself), redrive, or manage IAM — a
// deployed state machine's role comes from the SAM template, and
// Options.RoleARN is for tests and `--endpoint-url` stand-ins.
package sfn
