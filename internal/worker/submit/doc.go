// Package submit is the worker API's submit operation: an attempt's final
// body (POST /v1/worker/submit) or structured result (POST
// /v1/worker/result) is checked against its node's verdicts, folded with
// the staged parts into the step's value (docs/contracts.md § The fold and
// submit_format), projected into the run's ctx files (§ Files are the
// server's job), judged where the node is an evaluator (internal/worker/verify)
// and, where it failed, retried by the retry policy; then the step's Task
// state is completed through its task token.
package submit
