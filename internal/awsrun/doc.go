// Package awsrun is the operator's side of a deployed stack: it finds the
// stack's resources (the CloudFormation outputs of template.yaml, or names
// given explicitly for moto or LocalStack), starts a run on them — the task
// checked as an embedded run checks it, its environment frozen to the bucket
// (internal/runenv), the run recorded in the store, an execution of the
// flow's state machine started — and follows that execution, printing the
// embedded run's progress lines (internal/runview) until it ends, then
// records the run's terminal status and writes its summary, as an embedded
// run does. It answers a waiting gate for a human (Reply) on the worker API's
// IAM-authorised route, the request signed with the operator's own AWS
// credentials: the stack's HMAC key never leaves the stack.
//
// The dispatch and worker API functions do the run's work; this package
// only reads their records. It does not deploy anything (template.yaml
// and `sam deploy` do; tests deploy to moto), does not compare the
// deployed state machine with the local flow (the bundle's flow drives
// dispatch, the deployed definition the routing: they must come from the
// same flow file), and archives nothing, as an embedded run archives its
// task's previous ctx dir: each run's files are its own in the bucket
// (under runs/<run_id>/: sink.ForRun), and a task's runs take turns under
// the task's lock (lock.go).
package awsrun
