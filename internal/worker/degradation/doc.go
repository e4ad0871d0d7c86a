// Package degradation is the worker API's degradation operation: POST
// /v1/worker/degradation records that a tool an engine used fell back, on
// the run's degradation record (shown in the summary and the viewer) and
// never on the attempt's output tail, fenced like every other write; a
// dispatch task with no run records nothing and answers as if it had
// (docs/contracts.md § Routes, § Request and response bodies).
package degradation
