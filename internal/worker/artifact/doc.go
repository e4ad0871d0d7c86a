// Package artifact is the worker API's staging operation: one named part
// of an attempt's output per request (POST /v1/worker/artifact), and the
// presigned upload a body over the inline limit travels by (POST
// /v1/worker/upload). Parts are checked by name (docs/security.md § Part
// names) and size (§ Upload size limits) and wait, staged, for the
// attempt's submit (docs/contracts.md § Output is a tool call, § Routes).
package artifact
