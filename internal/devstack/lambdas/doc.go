// Package lambdas runs the Lambda functions of template.yaml as they ship: each
// function's `bootstrap` (make lambdas: built as `sam build` builds a
// provided.al2023 function) under the AWS Lambda Runtime Interface Emulator
// (make rie: bin/aws-lambda-rie), one emulator per function instance, with the
// environment, memory size and timeout the deployed stack gives it
// (docs/architecture.md § Testing stand-ins). It is the Lambda service of
// `stratus dev aws`: no handler runs inside the calling process.
//
// It owns:
//   - starting and stopping the emulators (Start, Function.Stop: each
//     emulator and everything its runtime started dies with Stop, and with
//     the calling process);
//   - invoking them as the Lambda Invoke API answers (Function.Invoke:
//     ErrTimeout, *FunctionError, ErrPayloadTooLarge);
//   - the REPORT figures (Function.Reports: init duration from the
//     emulator's INIT REPORT, max memory from the runtime's peak RSS, since
//     the emulator's REPORT line repeats the memory size);
//   - the event sources template.yaml wires to the functions: the HTTP API
//     in front of the worker API function (RoutesFromTemplate, APIFront:
//     payload format 2.0, as `sam local start-api` sends it; on an AWS_IAM
//     route, API Gateway's IAM authorizer: WithIAM, iam.go), the dispatch
//     queue's event source mapping (SQSMappingFromTemplate, RunSQSSource)
//     and the EventBridge event of an execution's status change
//     (ExecutionRuleFromTemplate: which reach the function;
//     ExecutionStatusChange: the event);
//   - the figures of a run (Summarize: init durations and max memory
//     beside the memory size).
//
// It does not resolve the functions' environments (the deployed stack's
// outputs and parameters do that), create AWS resources, enforce the
// memory size (the figures say how far under it a function stays), or
// evaluate IAM policies: every function gets the credentials it is
// started with, and an AWS_IAM route checks a request's SigV4 signature
// against the principals it is given, not their execute-api:Invoke.
package lambdas
