// Package hitl is the worker API's human-gate operation: a human's reply
// (answer, approve, reject) to a step waiting at a hitl node or an agent's
// question, checked against the node's grant, written beside the run's ctx
// files, and completing the waiting step's Task state — once, however many
// replies race (docs/contracts.md § Routes, § Request and response bodies;
// docs/security.md § Operator replies on AWS). The parking half, at
// dispatch, is internal/worker/gate.
package hitl
