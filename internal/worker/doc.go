// Package worker is the server side of the worker I/O contract (seed 000)
// behind the /v1/worker/* routes (seed 001): it dispatches a step (creates
// the attempt, renders the role file, mints the handle, launches the
// worker), assembles the prompt payload at fetch time, stages parts, folds
// and projects a submit, verifies evaluator findings, parks a hitl step
// until a human's reply (hitl.go), and completes the state machine's Task
// state through its task token. Every call is authorized (auth.go) by a
// credential fenced to its run: the run the Service serves, while it is
// under way (docs/security.md § Handles).
//
// It is transport-free: internal/httpapi maps HTTP onto it, and the same
// Service runs in embedded mode and behind the workerapi/dispatch Lambdas.
// It does not decide routing (the compiled state machine does) and does not
// run engines (the runner does, internal/contract).
package worker
