// Package asl owns the Amazon States Language document model Stratus
// compiles flows into, and the pure pieces of its evaluation: parsing and
// checking a definition (Parse), JSONPath (Path.Get, Path.Set), payload
// templates (Template), intrinsic functions (Intrinsic), Choice Rules
// (ChoiceRule), input/output processing (State.EffectiveInput,
// State.ApplyResult, State.ApplyOutputPath), when a Wait state ends
// (State.WaitUntil, ParseTimestamp), and error-name matching for Retry
// and Catch (MatchError, Retrier.Delay).
//
// It implements exactly the subset the compiler emits, as AWS Step Functions
// does (see docs/architecture.md § The compiled state machines): the JSONPath
// query language; Pass, Task, Choice, Wait (Seconds, Timestamp, SecondsPath,
// TimestampPath), Succeed and Fail states; Retry, Catch, TimeoutSeconds,
// HeartbeatSeconds; paths without wildcards, filters or slices; the
// context-object fields $$.Execution.{Id,Input,Name,StartTime},
// $$.State.{Name,EnteredTime,RetryCount}, $$.StateMachine.{Id,Name} and
// $$.Task.Token; the intrinsics States.Format, States.StringToJson,
// States.JsonToString, States.Array and States.MathAdd; the string, numeric,
// boolean and type-test Choice operators. Parse rejects everything else with
// every problem named by state and field.
//
// Where the ASL specification and AWS differ, AWS wins, because the same
// definition must behave the same on Step Functions and in-process:
// a path that selects nothing in Parameters, ResultSelector, InputPath or
// OutputPath is States.Runtime (not States.ParameterPathFailure); a
// Choice comparison on a missing Variable is States.Runtime, not false;
// States.Runtime is never retried nor caught; Task TimeoutSeconds has no
// 60 s default; a Wait's SecondsPath that selects nothing, a negative
// number or anything but an integer is States.Runtime, and a Timestamp's
// fractions of a second are dropped (developer guide § Wait workflow
// state).
//
// JSON values (Value) keep number text and key order, so payloads
// re-encode as they came.
//
// What it deliberately does not do: run anything. Timers, task
// invocation, task tokens, execution state and history belong to
// internal/executor/embedded. Nor does it implement JSONata, variables
// (Assign), Map, Parallel, timestamp comparisons in Choice Rules or the
// other intrinsics.
package asl
