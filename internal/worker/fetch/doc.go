// Package fetch is the worker API's prompt operation: GET /v1/worker/prompt
// answers an attempt's payload, assembled at fetch time so it shows the
// attempt's current truth (its rendered prompt and baked system text, the
// context view, the engine's launch spec or a checks or tool node's exec
// spec, and the workspace of a run whose repository travels), and GET
// /v1/worker/prompt/system answers the baked system prompt byte for byte
// (docs/contracts.md § Input is a fetch, § Routes, § Request and response
// bodies). A supervisor turn's payload is the supervise layer's.
package fetch
